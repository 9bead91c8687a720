import { MAX_TIMER_MS } from "../registry/profile.js";
/**
 * Every default of background jobs, in one place: the worker's settings (`JobWorkerSettings`, which
 * `JobServiceOptions.worker` takes), the service's, and a submit's. Durations are in ms. A setting that is
 * not given takes the value here; the three that scale with the lease are functions of the lease in force.
 * Each option's own documentation names its default and refers here; nothing else states a default value.
 * The host's own options have theirs in `HOST_DEFAULTS` (src/host-defaults.ts).
 */
export const JOB_DEFAULTS = {
  // ---- a submitted job -------------------------------------------------------------------------------
  /** Timeout of a job whose profile has no `timeout_seconds`: 1,800,000 ms (30 min, AnimaWorks' background subprocess timeout). */
  timeoutMs: 1_800_000,
  /** Priority among the Anima's own queued jobs: 0. */
  priority: 0,
  /** Runs a job may get: 1 (a run lost to a crash is not retried; a profile's `retry` raises it). */
  maxAttempts: 1,
  /** Delay before the first retry of a lost run, doubled for each further one: 1,000 ms. */
  retryBackoffMs: 1_000,

  // ---- the worker --------------------------------------------------------------------------------------
  /** Jobs one worker runs at once: 4. */
  concurrency: 4,
  /** Running jobs per Anima, counted across every worker sharing the store: 2. */
  perAnimaConcurrency: 2,
  /** Lease of a running job: 30,000 ms. A job whose worker stops renewing it for this long is recovered. */
  leaseMs: 30_000,
  /** How often held leases are renewed (and a cancel made elsewhere is seen): 2,000 ms, or a third of a shorter lease. */
  heartbeatIntervalMs: (leaseMs: number): number => Math.min(2_000, leaseMs / 3),
  /** How often the store is asked for work submitted elsewhere: 1,000 ms (stores that push changes wake a worker sooner). */
  pollIntervalMs: 1_000,
  /** How often expired leases are recovered and missing notices re-written: half the lease (15,000 ms). */
  maintenanceIntervalMs: (leaseMs: number): number => leaseMs / 2,
  /**
   * After a cancel, a lost lease or a shutdown: how long a running tool may wrap up (it sees `isCancelled()`)
   * before the run's stop signal aborts and its isolate is stopped; and, after that, how long a runner that
   * does not end is waited for before the worker records the job and frees its slot: 2,000 ms.
   */
  cancelGraceMs: 2_000,
  /** A finished job without a notice for this long is taken to have lost its writer: one lease (30,000 ms). */
  noticeGraceMs: (leaseMs: number): number => leaseMs,
  /** Finished jobs older than this are deleted: 604,800,000 ms (7 days). */
  retentionMs: 604_800_000,
  /** How often the retention purge runs: 3,600,000 ms (1 hour). */
  purgeIntervalMs: 3_600_000,
  /** Completion notices are written: true. */
  notices: true,
  /** How often a worker running until drained looks at the queue while it has nothing to do: 1,000 ms. */
  idleCheckIntervalMs: 1_000,
  /** On a graceful stop, how long running jobs may go on before they are aborted: 600,000 ms (AnimaWorks' shutdown drain). */
  drainTimeoutMs: 600_000,

  // ---- callers -------------------------------------------------------------------------------------
  /** How often `JobService.wait` looks at the job: 250 ms. */
  waitPollIntervalMs: 250,
} as const;

// The longest duration a Node timer can hold (2^31 − 1 ms; it treats anything longer as 1 ms): the cap on
// every timed setting, the same as for an action's timeout_seconds.
export { MAX_TIMER_MS };

/** A duration in ms that Node timers can hold, > 0 (≥ 0 with `allowZero`); throws a TypeError naming the option. */
export function duration(value: number | undefined, fallback: number, name: string, allowZero = false): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0 || (value === 0 && !allowZero) || value > MAX_TIMER_MS) {
    throw new TypeError(
      `${name} must be a ${allowZero ? "" : "positive "}number of ms${allowZero ? ", 0 or more," : ""} up to 2,147,483,647, got ${String(value)}`,
    );
  }
  return value;
}
