import { ToolHostError } from "../errors.js";
import type { Job, JobLease, JobProgress, JobStore } from "./store.js";

/** Why the scheduler stopped a run before its runner finished. The first reason decides the outcome. */
export type AbortReason = "cancel" | "timeout" | "lease-lost" | "shutdown";

/** A job running in this scheduler. */
export interface ActiveRun {
  job: Job;
  lease: JobLease;
  controller: AbortController;
  reason: AbortReason | undefined;
  settle: () => void;
  graceTimer: NodeJS.Timeout | undefined;
  /** The newest progress not yet written; a write in flight sends it when it lands. */
  pendingProgress: JobProgress | undefined;
  progressInFlight: boolean;
}

/** What the runner's abort signal carries, and so what the job records when it ends that way. */
export function abortError(reason: AbortReason, job: Job): ToolHostError {
  const message =
    reason === "timeout"
      ? `job exceeded its timeout of ${job.timeoutMs} ms`
      : reason === "cancel"
        ? "job cancelled by request"
        : reason === "lease-lost"
          ? "job lease lost to another worker"
          : "scheduler shutting down";
  return new ToolHostError(reason === "timeout" ? "Timeout" : "ExecutionError", message);
}

/**
 * Writes a run's progress with at most one write in flight: a tool may report as often as it likes, and
 * the store sees the newest value without a queue of stale ones.
 */
export function saveProgress(run: ActiveRun, progress: JobProgress, store: JobStore, onError: (error: unknown) => void): void {
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
