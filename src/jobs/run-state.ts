import { monotonicMs } from "../clock.js";
import { ToolHostError } from "../errors.js";
import type { Job, JobLease, JobProgress, JobStore } from "./store.js";

/** Why the worker stopped a run before its runner finished. The first reason decides the outcome. */
export type StopReason = "cancel" | "timeout" | "lease-lost" | "shutdown";

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
  reason: StopReason | undefined;
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
  requestStop(reason: StopReason): void {
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
export function stopErrorFor(reason: StopReason, job: Job): ToolHostError {
  const message =
    reason === "timeout"
      ? `job exceeded its timeout of ${job.timeoutMs} ms`
      : reason === "cancel"
        ? "job cancelled by request"
        : reason === "lease-lost"
          ? "job lease lost to another worker"
          : "worker shutting down";
  return new ToolHostError(reason === "timeout" ? "Timeout" : "ExecutionError", message);
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
