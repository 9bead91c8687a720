import type { PooledIsolate } from "./pooled-isolate.js";
import { monotonicMs } from "../../clock.js";

/**
 * A spare interpreter starts this long after a Python tool's isolate was made in this process, ms, so
 * that the call which needed that isolate keeps the CPU meanwhile. Default: 500 ms.
 */
export const SPARE_INTERPRETER_DELAY_MS = 500;

/**
 * A spare taken by a call whose interpreter was thrown away within this long (its call stopped, its memory
 * grew past what the warm pool keeps, the tool asked to be recycled) was churned, ms: each churn doubles
 * the delay before the next spare starts (`SPARE_INTERPRETER_MAX_DELAY_MS` at most).
 */
export const SPARE_CHURN_WINDOW_MS = 10_000;

/** The most a spare's start is put off after churned spares, ms: one boot (≈ 0.8 s of CPU) in this long at most. */
export const SPARE_INTERPRETER_MAX_DELAY_MS = 32_000;

/** Churned spares are forgotten (the delay is back to `SPARE_INTERPRETER_DELAY_MS`) after this long without one, ms. */
export const SPARE_CHURN_FORGOTTEN_MS = 60_000;

/**
 * A Python tool's isolate that was just described waits this long for the tool's first call, ms, then is
 * disposed: the host calls a tool right after it described it, or describes it for a listing only.
 */
export const DESCRIBED_KEPT_MS = 10_000;

/**
 * Python interpreters an isolate runner keeps ready outside its warm pool, so that a Python tool's first
 * call in a sandbox process does not wait for an interpreter to boot (≈ 0.5 s from the process's memory
 * snapshot): a spare, booted and holding no tool, and the isolate of the tool described last, which its
 * first call takes over instead of booting a second interpreter.
 *
 * Invariants:
 *  - A spare ran no tool's code, nobody's: it is keyed to an (Anima, bundle) only when a call or a
 *    describe takes it. It exists only in a process that has made a Python tool's isolate before (a
 *    process that runs only TypeScript tools never holds one), one per memory limit.
 *  - A described isolate ran its tool's load and `get_tool_schemas`, for no Anima, in this process, which
 *    serves one cordon: only a call of that very bundle at that memory limit takes it, within
 *    `DESCRIBED_KEPT_MS`. One is kept at a time.
 *  - A spare boots outside every call, so no Anima's share pays for it (the host judges calls:
 *    docs/scheduling.md). A call whose interpreter is thrown away soon after it took the spare makes the
 *    next spare start later, twice as late each time (`SPARE_CHURN_WINDOW_MS`,
 *    `SPARE_INTERPRETER_MAX_DELAY_MS`): a tool that gets its interpreter retired on every call cannot
 *    make the process boot one for it after every call. Its calls that find no spare boot their own,
 *    inside the call, where the host judges them.
 *  - Each holds an interpreter (≈ 130 MB resident): at most one spare per memory limit and one described
 *    isolate live beside the warm pool's idle interpreters (`warmPythonInterpreters`), which the memory limit of a
 *    process that runs Python tools makes room for (os/resource-watchdog.ts `pythonInterpretersMb`);
 *    `close` disposes them.
 */
export class PythonSpares {
  private readonly ready = new Map<number, PooledIsolate>();
  private readonly starting = new Map<number, NodeJS.Timeout | "booting">();
  private described: { bundleHash: string; memoryLimitMb: number; pooled: PooledIsolate; timer: NodeJS.Timeout } | undefined;
  private closed = false;
  /** The spare taken last (any memory limit), and when. */
  private lastTaken: { pooled: PooledIsolate; atMs: number } | undefined;
  /** Spares churned in a row (see `SPARE_CHURN_WINDOW_MS`), and when the last one was found. */
  private churned = 0;
  private lastChurnAtMs = Number.NEGATIVE_INFINITY;

  /**
   * `boot` makes a booted interpreter's isolate with no tool, for a memory limit (MB). Without
   * `keepSpare` (`HostOptions.sparePythonInterpreter` false) no spare is started; a described isolate
   * still goes to its tool's first call (it exists anyway, for at most `DESCRIBED_KEPT_MS`).
   */
  constructor(
    private readonly boot: (memoryLimitMb: number) => Promise<PooledIsolate>,
    private readonly keepSpare = true,
  ) {}

  /** The ready spare for this memory limit, if there is one; the caller keys it and loads its tool. */
  take(memoryLimitMb: number): PooledIsolate | undefined {
    const spare = this.ready.get(memoryLimitMb);
    this.ready.delete(memoryLimitMb);
    if (spare && !spare.healthy) return undefined;
    if (spare) this.noteTaken(spare);
    return spare;
  }

  /** A spare was taken now (after the one taken before it is looked at: `noteChurn`). */
  private noteTaken(spare: PooledIsolate): void {
    this.noteChurn();
    this.lastTaken = { pooled: spare, atMs: monotonicMs() };
  }

  /**
   * Looks once at the spare taken last, if it is gone: thrown away within `SPARE_CHURN_WINDOW_MS` of being
   * taken, it was churned. Runs before a spare is taken and before one is refilled (after each Python
   * isolate made for a call, its own boot included), so a churned spare is seen at the caller's next call.
   */
  private noteChurn(): void {
    const taken = this.lastTaken;
    if (!taken || taken.pooled.healthy) return;
    this.lastTaken = undefined;
    const now = monotonicMs();
    if ((taken.pooled.disposedAtMs ?? now) - taken.atMs >= SPARE_CHURN_WINDOW_MS) return;
    if (now - this.lastChurnAtMs >= SPARE_CHURN_FORGOTTEN_MS) this.churned = 0;
    this.churned = Math.min(this.churned + 1, 30); // far past the delay's cap: the count stays a small integer
    this.lastChurnAtMs = now;
  }

  /** How long after a Python isolate was made the next spare starts, ms: later after churned spares. */
  private get refillDelayMs(): number {
    if (monotonicMs() - this.lastChurnAtMs >= SPARE_CHURN_FORGOTTEN_MS) return SPARE_INTERPRETER_DELAY_MS;
    return Math.min(SPARE_INTERPRETER_DELAY_MS * 2 ** this.churned, SPARE_INTERPRETER_MAX_DELAY_MS);
  }

  /** Keeps the isolate a describe of a Python tool just used, for that tool's first call. */
  keepDescribed(bundleHash: string, memoryLimitMb: number, pooled: PooledIsolate): void {
    pooled.guard = undefined;
    if (this.closed) return pooled.disposeByHost();
    this.dropDescribed();
    const timer = setTimeout(() => this.dropDescribed(), DESCRIBED_KEPT_MS);
    timer.unref();
    this.described = { bundleHash, memoryLimitMb, pooled, timer };
  }

  /** The isolate kept by `keepDescribed` for this bundle at this memory limit, if any (taken once). */
  adoptDescribed(bundleHash: string, memoryLimitMb: number): PooledIsolate | undefined {
    const kept = this.described;
    if (!kept || kept.bundleHash !== bundleHash || kept.memoryLimitMb !== memoryLimitMb) return undefined;
    clearTimeout(kept.timer);
    this.described = undefined;
    return kept.pooled.healthy ? kept.pooled : undefined;
  }

  /** After a Python tool's isolate was made for a call at this memory limit, or a describe took its spare: have one ready for the next. */
  refill(memoryLimitMb: number): void {
    this.noteChurn();
    if (!this.keepSpare || this.closed || this.ready.has(memoryLimitMb) || this.starting.has(memoryLimitMb)) return;
    const timer = setTimeout(() => {
      this.starting.set(memoryLimitMb, "booting");
      this.boot(memoryLimitMb).then(
        (pooled) => {
          this.starting.delete(memoryLimitMb);
          if (this.closed || this.ready.has(memoryLimitMb)) pooled.disposeByHost();
          else this.ready.set(memoryLimitMb, pooled);
        },
        () => this.starting.delete(memoryLimitMb), // the next Python isolate made here tries again
      );
    }, this.refillDelayMs);
    timer.unref();
    this.starting.set(memoryLimitMb, timer);
  }

  /** Interpreters held now: ready spares and the described isolate. */
  get held(): number {
    return this.ready.size + (this.described ? 1 : 0);
  }

  close(): void {
    this.closed = true;
    for (const state of this.starting.values()) if (state !== "booting") clearTimeout(state);
    this.starting.clear();
    for (const spare of this.ready.values()) spare.disposeByHost();
    this.ready.clear();
    this.dropDescribed();
  }

  private dropDescribed(): void {
    if (!this.described) return;
    clearTimeout(this.described.timer);
    this.described.pooled.disposeByHost();
    this.described = undefined;
  }
}
