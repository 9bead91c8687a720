import { setTimeout as delay } from "node:timers/promises";
import { monotonicMs } from "../clock.js";
import { ToolHostError } from "../errors.js";
import type { Job, JobLease, JobOutcome, JobProgress, JobStore } from "./store.js";
import type { JobRunResult } from "./worker-settings.js";

/**
 * Why the worker stopped a job's run before its runner finished. The first reason decides the outcome.
 * Not an isolate call's stop (src/isolation/isolate/call-guard.ts `IsolateStopReason`).
 */
export type JobStopReason = "cancel" | "timeout" | "lease-lost" | "shutdown";

/**
 * One job running in a worker, and the one timer that walks it to its end. A run is stopped in two steps:
 *
 *  1. `requestStop(reason)`: the tool is told (`stopRequested`, its `isCancelled()`) and may wrap up;
 *  2. the run's `signal` aborts, with a `ToolHostError` saying why (`Timeout` at the deadline, else an
 *     `ExecutionError` naming the cancel, the lost lease or the shutdown): the call is stopped (the
 *     executor disposes its isolate). This is the only deadline of the job: the runner passes the signal
 *     down, and the layers below stop on it instead of timing the job themselves.
 *
 * The signal aborts at the job's deadline (`job.timeoutMs` after the run started, no grace: a deadline
 * is a deadline), or `graceMs` after a stop was requested, whichever comes first. A runner that still has
 * not ended `graceMs` after that is abandoned (`onAbandon`): the worker records the job and frees its slot.
 */
export class JobRun {
  readonly lease: JobLease;
  /** When the signal aborts at the latest, in `monotonicMs()` time. */
  readonly deadline: number;
  reason: JobStopReason | undefined;
  /** Why the run was asked to stop, as the job records it; what the signal carries once it aborts. */
  stopError: ToolHostError | undefined;
  /** The newest progress not yet written; a write in flight sends it when it lands. */
  pendingProgress: JobProgress | undefined;
  progressInFlight = false;
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private ended = false;

  constructor(
    readonly job: Job,
    lease: JobLease,
    private readonly graceMs: number,
    private readonly onAbandon: () => void,
  ) {
    this.lease = lease;
    this.deadline = monotonicMs() + job.timeoutMs;
    this.timer = setTimeout(() => this.requestStop("timeout"), job.timeoutMs);
  }

  /** The run's stop signal (see the class). */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** True once a stop was requested: the tool should wrap up. */
  get stopRequested(): boolean {
    return this.reason !== undefined;
  }

  /** Asks the run to stop (the first reason wins); its signal aborts after the grace, or now at the deadline. */
  requestStop(reason: JobStopReason): void {
    if (this.reason !== undefined || this.ended) return;
    this.reason = reason;
    this.stopError = stopErrorFor(reason, this.job);
    if (reason === "timeout") return this.stopNow();
    const untilDeadline = this.deadline - monotonicMs();
    this.arm(Math.min(this.graceMs, untilDeadline), () => this.stopNow());
  }

  /** The runner finished (or was abandoned): nothing more happens to this run. */
  end(): void {
    this.ended = true;
    clearTimeout(this.timer);
  }

  private stopNow(): void {
    if (this.ended) return;
    this.controller.abort(this.stopError);
    this.arm(this.graceMs, () => {
      this.end();
      this.onAbandon();
    });
  }

  private arm(ms: number, then: () => void): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(then, Math.max(0, ms));
  }
}

/** What a run's stop signal carries, and so what the job records when it ends that way. */
export function stopErrorFor(reason: JobStopReason, job: Job): ToolHostError {
  const message =
    reason === "timeout"
      ? `job exceeded its timeout of ${job.timeoutMs} ms`
      : reason === "cancel"
        ? "job cancelled by request"
        : reason === "lease-lost"
          ? "job lease lost to another worker"
          : "worker shutting down";
  // A deadline is the tool's to meet; a cancel is its caller's doing; a lost lease or a shutdown is the host's.
  return reason === "timeout"
    ? new ToolHostError("Timeout", message)
    : new ToolHostError("ExecutionError", message, undefined, reason === "cancel" ? "caller" : "host");
}

/**
 * What a run's end means for its job: the outcome to record, or `undefined` when the run no longer owns
 * the job (its lease was lost, or it is handed back at a shutdown: someone else records it).
 */
export function outcomeOf(run: JobRun, ended: JobRunResult | "abandoned"): JobOutcome | undefined {
  const { reason } = run;
  const succeeded = ended !== "abandoned" && ended.ok;
  if (reason === "lease-lost" || (reason === "shutdown" && !succeeded)) return undefined;
  // A deadline is a deadline: a result that arrives after it does not count.
  if (reason === "timeout" && run.stopError) return { status: "failed", error: run.stopError.toInfo() };
  // Cancelled too late to matter: the work finished, so report it as it is.
  if (ended !== "abandoned" && ended.ok) return { status: "succeeded", result: ended.result, structured: ended.structured === true };
  if (reason === "cancel") {
    // What the tool returned once it saw the cancel is the job's partial result: kept, the job still cancelled.
    const partial = ended !== "abandoned" ? ended.partial : undefined;
    return partial ? { status: "cancelled", result: partial.result, structured: partial.structured === true } : { status: "cancelled" };
  }
  if (ended === "abandoned") throw new Error("a run was abandoned without having been stopped");
  return { status: "failed", error: ended.error };
}

/** A runner's result as the worker trusts it: anything but the two declared shapes is the host's failure. */
export function checkedRunResult(value: JobRunResult): JobRunResult {
  if (value && value.ok === true && typeof value.result === "string") return { ok: true, result: value.result, structured: value.structured === true };
  if (value && value.ok === false && value.error) {
    const partial = value.partial;
    if (partial === undefined || typeof partial?.result !== "string") return { ok: false, error: value.error };
    return { ok: false, error: value.error, partial: { result: partial.result, structured: partial.structured === true } };
  }
  return { ok: false, error: { type: "ExecutionError", fault: "host", message: "the job runner returned an invalid result" } };
}

/** Waits before each new try of a failed outcome write, ms; the last one repeats. */
const RECORD_RETRY_DELAYS_MS = [100, 250, 500, 1_000, 2_000];

/**
 * Writes a run's outcome, trying again while a networked store is unreachable (a server restart, which
 * on a busy machine takes more than a few seconds) for up to `retryForMs` (the lease: a job whose lease
 * ran out may be recovered by anyone meanwhile). The write is fenced by the lease (owner and attempt),
 * so trying again is always safe: a job recovered meanwhile refuses it. It keeps a finished job from
 * ending `interrupted`. Resolves to the recorded job, `undefined` when the lease was lost, or the last
 * error when it gave up (the lease then expires and recovery decides: retry or interrupted).
 */
export async function completeRun(
  store: JobStore,
  run: JobRun,
  outcome: JobOutcome,
  giveUp: () => boolean,
  retryForMs: number,
): Promise<Job | undefined | { failed: unknown }> {
  const until = Date.now() + retryForMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await store.complete(run.lease, outcome);
    } catch (error) {
      const retryInMs = RECORD_RETRY_DELAYS_MS[Math.min(attempt, RECORD_RETRY_DELAYS_MS.length - 1)] as number;
      if (giveUp() || Date.now() + retryInMs > until) return { failed: error };
      await delay(retryInMs);
    }
  }
}

/**
 * Writes a run's progress with at most one write in flight: a tool may report as often as it likes, and
 * the store sees the newest value without a queue of stale ones.
 */
export function saveProgress(run: JobRun, progress: JobProgress, store: JobStore, onError: (error: unknown) => void): void {
  run.pendingProgress = progress;
  if (run.progressInFlight) return;
  const send = (): void => {
    const next = run.pendingProgress;
    if (!next) return;
    run.pendingProgress = undefined;
    run.progressInFlight = true;
    store
      .reportProgress(run.lease, next)
      .catch(onError)
      .finally(() => {
        run.progressInFlight = false;
        send();
      });
  };
  send();
}
