import { monotonicMs } from "../../clock.js";

/**
 * The host's side of a deadline. isolated-vm's own `timeout` stops ordinary busy code, but some work
 * cannot be interrupted (an isolate retrying failed buffer allocations spends its time in full GCs and
 * never services the interrupt; an isolate that hit V8's out-of-memory handler is parked forever), and
 * then the promise isolated-vm returned never settles. A `CallGuard` makes sure a call always ends:
 *
 *  - at the deadline (or when the prelude or a catastrophe asks) it `halt`s: records why, disposes the
 *    isolate, and gives isolated-vm `STOP_GRACE_MS` to return;
 *  - past that grace it abandons the call: `unlessAbandoned` rejects with `Abandoned`, and whatever the
 *    isolate returns later is only cleaned up.
 *
 * An abandoned isolate's thread may be lost for good; isolated-vm reports that through its
 * catastrophic-error callback, which the runner turns into `onUnrecoverable`.
 *
 * This is where a call's deadline is kept, next to the isolate. It is not a second deadline: a caller
 * with a deadline of its own (a background job's worker) passes the time left until it as the request's
 * timeout, and its stop signal reaches the guard as `halt("Aborted")` (in a sandbox process, through the
 * pool's `abort` message). The pool's kill timer is only the last resort for a process that does not answer.
 */
/**
 * Why the host stopped an isolate call: its deadline, its memory limit, or its caller giving up
 * (`Executor.call`'s signal). Not a job's stop (src/jobs/run-state.ts `JobStopReason`).
 */
export type IsolateStopReason = "Timeout" | "MemoryLimit" | "Aborted";

/** Time isolated-vm gets to return after the host disposed an isolate, in ms. */
export const STOP_GRACE_MS = 300;

/** Anything `halt` can dispose: a pooled isolate, or one still being set up. */
export interface Disposable {
  disposeByHost(): void;
}

export class Abandoned extends Error {
  constructor() {
    super("the isolate did not return after it was stopped");
  }
}

export class CallGuard {
  stopReason: IsolateStopReason | undefined;
  /** The isolate serving this call, once there is one. */
  target: Disposable | undefined;
  readonly abandoned: Promise<void>;
  private abandonNow!: () => void;
  private readonly deadlineTimer: NodeJS.Timeout;
  private graceTimer: NodeJS.Timeout | undefined;

  constructor(timeoutMs: number) {
    this.abandoned = new Promise<void>((resolve) => {
      this.abandonNow = resolve;
    });
    this.deadlineTimer = setTimeout(() => this.halt("Timeout"), timeoutMs);
  }

  /** Stops the call as `reason` (the first reason wins). */
  halt(reason: IsolateStopReason): void {
    this.stopReason ??= reason;
    this.target?.disposeByHost();
    this.graceTimer ??= setTimeout(() => this.abandonNow(), STOP_GRACE_MS);
  }

  /** The isolate is known to be lost (isolated-vm said so): end the call now. */
  abandon(reason: IsolateStopReason): void {
    this.stopReason ??= reason;
    this.target?.disposeByHost();
    this.abandonNow();
  }

  finish(): void {
    clearTimeout(this.deadlineTimer);
    if (this.graceTimer) clearTimeout(this.graceTimer);
  }
}

/**
 * Time left until `deadline` (`monotonicMs()` time), as an isolated-vm `timeout`: at least 1 ms, since
 * isolated-vm reads 0 as no timeout at all (run_with_timeout.h).
 */
export function remainingMs(deadline: number): number {
  return Math.max(1, Math.ceil(deadline - monotonicMs()));
}

/**
 * `work`, unless the guard abandons the call first; then rejects with `Abandoned`, and `late` receives
 * the value if `work` ever fulfils (so that a late isolate can still be released).
 */
export function unlessAbandoned<T>(work: Promise<T>, guard: CallGuard, late?: (value: T) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    work.then(
      (value) => {
        if (settled) late?.(value);
        else {
          settled = true;
          resolve(value);
        }
      },
      (error: unknown) => {
        if (!settled) {
          settled = true;
          reject(error);
        }
      },
    );
    void guard.abandoned.then(() => {
      if (!settled) {
        settled = true;
        reject(new Abandoned());
      }
    });
  });
}

/**
 * Counts entries into isolates (isolated-vm operations) that have not returned. After a runner closed,
 * one still pending is an isolate isolated-vm could not stop: it holds a thread of this process, and a
 * process in that state cannot exit normally (Node's exit waits for that thread, or crashes on it).
 */
export class EntryTracker {
  pending = 0;
  private waiters: Array<() => void> = [];

  track<T>(work: Promise<T>): Promise<T> {
    this.pending++;
    const done = () => {
      if (--this.pending === 0) for (const wake of this.waiters.splice(0)) wake();
    };
    work.then(done, done);
    return work;
  }

  /** Resolves true once nothing is pending, or false after `maxWaitMs`. */
  settled(maxWaitMs: number): Promise<boolean> {
    if (this.pending === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(this.pending === 0), maxWaitMs);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }
}

/**
 * A run that a function stops at once (its guard halts it as "Aborted"), also before the run made its
 * guard: `start` is given the callback through which the run hands its guard over.
 */
export function stoppable<T>(start: (onGuard: (guard: CallGuard) => void) => Promise<T>): { outcome: Promise<T>; stop: () => void } {
  let guard: CallGuard | undefined;
  let stopped = false;
  const stop = (): void => {
    stopped = true;
    guard?.halt("Aborted");
  };
  const outcome = start((created) => {
    guard = created;
    if (stopped) created.halt("Aborted");
  });
  return { outcome, stop };
}

/** `run`'s outcome, the run stopped when `signal` aborts (at once if it has). */
export function stoppedBy<T>(signal: AbortSignal | undefined, run: { outcome: Promise<T>; stop: () => void }): Promise<T> {
  if (!signal) return run.outcome;
  if (signal.aborted) run.stop();
  else signal.addEventListener("abort", run.stop, { once: true });
  return run.outcome.finally(() => signal.removeEventListener("abort", run.stop));
}
