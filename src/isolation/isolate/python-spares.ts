import type { PooledIsolate } from "./pooled-isolate.js";

/**
 * A spare interpreter starts this long after a Python tool's isolate was made in this process, ms, so
 * that the call which needed that isolate keeps the CPU meanwhile. Default: 500 ms.
 */
export const SPARE_INTERPRETER_DELAY_MS = 500;

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
    return spare;
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

  /** After a Python tool's isolate was made for a call at this memory limit: have a spare ready for the next one. */
  refill(memoryLimitMb: number): void {
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
    }, SPARE_INTERPRETER_DELAY_MS);
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
