import type { CallOutcome, DescribeOutcome, SandboxRequest } from "../wire/messages.js";
import { isPythonBundle, PYTHON_BOOT_GRACE_MS } from "../wire/tool-bundle.js";
import { DESCRIBED_KEPT_MS, SPARE_CHURN_FORGOTTEN_MS, SPARE_INTERPRETER_DELAY_MS, SPARE_INTERPRETER_MAX_DELAY_MS } from "../isolate/python-spares.js";

/** The most tools a process's record holds as warm (oldest dropped first). */
export const WARM_TOOLS_KEPT = 1_000;

/** One request noted by `InterpretersSent.sent`: whether it must boot, and its end to tell. */
export interface SentRequest {
  readonly needsBoot: boolean;
  /** The request's outcome (undefined: none came) as the host got it, at `now`. */
  ended(outcome: CallOutcome | DescribeOutcome | undefined, now: number): void;
}

const NOT_PYTHON: SentRequest = { needsBoot: false, ended: () => {} };

/**
 * What one sandbox process (one incarnation of a slot) was sent of Python tools, from the host's own
 * record: whether a request finds an interpreter ready there, or must boot one first (and may then get
 * its Anima's boot allowance: scheduling/boot-allowance.ts).
 *
 * The process decides (isolate/python-spares.ts, isolate/isolate-runner.ts); this only predicts, and errs
 * toward "boot": a wrong "boot" costs an allowance, which is capped (once per slot and Anima per 60 s); a
 * wrong "no boot" makes an honest Anima's call boot on its own share, and the judge may demote it.
 *
 * Invariants:
 *  - Only what the host sent, and the outcomes it got, count: nothing the process says.
 *  - A process sent a Python call at a memory limit keeps a spare interpreter there (unless spares are
 *    off). Any Python request may take it: a describe does, and a call the host thinks warm may not be
 *    (its tool asked to be recycled, its isolate left the warm pool: the host sees neither). So the spare
 *    counts as missing while a Python request at that limit is in flight, and after the last one ends for
 *    the process's refill delay plus a boot's bound (`PYTHON_BOOT_GRACE_MS`).
 *  - That refill delay mirrors the process's churn backoff from above: every Python request counts as a
 *    spare taken and thrown away at once (a recycle is the tool's to ask, unseen), each doubling the
 *    delay up to `SPARE_INTERPRETER_MAX_DELAY_MS`; the count is forgotten only after
 *    `SPARE_CHURN_FORGOTTEN_MS` with no Python request sent, in flight or ended. The process counts at most
 *    one churn per spare taken, in a request, so its delay is never longer than this one.
 *  - A tool is warm (its call needs no interpreter) after a call of it by that Anima ended ok, while no
 *    other call of it is in flight there. A call that failed (Timeout, MemoryLimit, a crash, a stop…) may
 *    have lost its interpreter: the tool is not warm until one ends ok. At most `WARM_TOOLS_KEPT` tools
 *    are held, oldest dropped first: a dropped one costs at most one allowance, wrongly granted.
 *  - A describe's isolate waits for its tool's first call: only the last describe sent, once it ended ok,
 *    for `DESCRIBED_KEPT_MS` from when it was sent, and for one call (the process keeps one at a time).
 */
export class InterpretersSent {
  /** Memory limits at which a Python call was sent: the process keeps a spare there. */
  private readonly called = new Set<number>();
  /** Python requests in flight, by memory limit. */
  private readonly inFlight = new Map<number, number>();
  /** Until when the spare at a memory limit may still be missing, after a request there ended. */
  private readonly missingUntil = new Map<number, number>();
  /** Calls in flight by tool (Anima, bundle hash, memory limit). */
  private readonly callsInFlight = new Map<string, number>();
  /** Tools whose last call ended ok, oldest first. */
  private readonly warm = new Set<string>();
  /** The last describe sent, unless a call of its tool was sent since; `kept` once it ended ok. */
  private described: { tool: string; sentAt: number; kept: boolean } | undefined;
  /** The churn count taken as the process's (see the invariants), and when it last could have grown. */
  private churns = 0;
  private lastChurnAt = Number.NEGATIVE_INFINITY;
  private pythonInFlight = 0;

  /** @param spares whether the process keeps a spare interpreter (`PythonInterpreterSettings.spare`) */
  constructor(private readonly spares: boolean) {}

  /** Notes `request`, sent now: whether it is a Python tool's that must boot an interpreter there first. */
  sent(request: SandboxRequest, now: number): SentRequest {
    if (!isPythonBundle(request.bundle.code)) return NOT_PYTHON;
    const limit = request.memoryLimitMb;
    const bundleTool = `${request.bundle.hash}\0${limit}`;
    const spareThere = this.spareThere(limit, now);
    this.noteSent(limit, now);
    if (request.op === "describe") {
      const described = { tool: bundleTool, sentAt: now, kept: false };
      this.described = described;
      return {
        needsBoot: !spareThere,
        ended: (outcome, endedAt) => {
          described.kept = outcome?.ok === true;
          this.noteEnded(limit, endedAt);
        },
      };
    }
    const tool = `${request.context.anima}\0${bundleTool}`;
    const warm = this.warm.has(tool) && !this.callsInFlight.has(tool);
    const described = this.described?.tool === bundleTool && this.described.kept && now - this.described.sentAt < DESCRIBED_KEPT_MS;
    if (this.described?.tool === bundleTool) this.described = undefined;
    this.called.add(limit);
    this.callsInFlight.set(tool, (this.callsInFlight.get(tool) ?? 0) + 1);
    return {
      needsBoot: !(warm || described || spareThere),
      ended: (outcome, endedAt) => {
        countDown(this.callsInFlight, tool);
        this.warm.delete(tool);
        if (outcome?.ok) this.warm.add(tool);
        if (this.warm.size > WARM_TOOLS_KEPT) this.warm.delete(this.warm.values().next().value!);
        this.noteEnded(limit, endedAt);
      },
    };
  }

  /** `anima`'s warm isolates were dropped in this process (`SandboxProcess.forgetAnima`). */
  forgetAnima(anima: string): void {
    for (const tool of this.warm) if (tool.startsWith(`${anima}\0`)) this.warm.delete(tool);
  }

  private spareThere(limit: number, now: number): boolean {
    return this.spares && this.called.has(limit) && !this.inFlight.has(limit) && now >= (this.missingUntil.get(limit) ?? now);
  }

  private noteSent(limit: number, now: number): void {
    if (this.pythonInFlight === 0 && now - this.lastChurnAt >= SPARE_CHURN_FORGOTTEN_MS) this.churns = 0;
    this.churns = Math.min(this.churns + 1, 30); // far past the delay's cap: the count stays a small integer
    this.lastChurnAt = Math.max(this.lastChurnAt, now);
    this.pythonInFlight++;
    this.inFlight.set(limit, (this.inFlight.get(limit) ?? 0) + 1);
  }

  private noteEnded(limit: number, now: number): void {
    this.lastChurnAt = Math.max(this.lastChurnAt, now);
    this.pythonInFlight--;
    countDown(this.inFlight, limit);
    for (const [at, until] of this.missingUntil) if (until <= now) this.missingUntil.delete(at);
    const refillDelayMs = Math.min(SPARE_INTERPRETER_DELAY_MS * 2 ** this.churns, SPARE_INTERPRETER_MAX_DELAY_MS);
    this.missingUntil.set(limit, Math.max(this.missingUntil.get(limit) ?? now, now + refillDelayMs + PYTHON_BOOT_GRACE_MS));
  }
}

function countDown<K>(counts: Map<K, number>, key: K): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}
