import { formatLogRecord } from "../config.js";
import type { LogRecord } from "../host-options.js";
import type { NoticeFailures } from "./notice-failures.js";
import { JOB_DEFAULTS, duration } from "./defaults.js";
import type { ToolHostError } from "../errors.js";
import type { Job, JobError, JobStore } from "./store.js";

/**
 * What a job worker (worker.ts) is given: its runner's contract, its settings with their defaults
 * (`JOB_DEFAULTS`), and what it reports.
 */

/**
 * How a runner's work ended. `structured`: `result` is the JSON of an object the tool returned (default
 * false: text). `partial`: what the tool returned after it was asked to stop (it saw `isCancelled()` and
 * wrapped up), kept as a cancelled job's result.
 */
export type JobRunResult =
  { ok: true; result: string; structured?: boolean } | { ok: false; error: JobError; partial?: { result: string; structured?: boolean } };

/** What a runner gets besides its job. */
export interface JobRunContext {
  /**
   * The run's one stop signal, with its reason (a `ToolHostError`): aborted at the job's deadline
   * (`Timeout`), or once the grace after a cancel, a lost lease or a shutdown ran out (`ExecutionError`).
   * Pass it down to the call; the layers below stop on it and time nothing of their own for this job.
   */
  signal: AbortSignal;
  /** When `signal` aborts at the latest (the job's deadline), in `monotonicMs()` time (src/clock.ts). */
  deadline: number;
  /**
   * Once the run was asked to stop (cancel, deadline, lost lease, shutdown): why, as the `ToolHostError` the
   * signal will carry; undefined until then. The tool's `isCancelled()`; it may wrap up until `signal` aborts.
   */
  stopRequested(): ToolHostError | undefined;
  /** Progress for `jobs show`; `fraction` is clamped to 0..1. Cheap to call often: writes are coalesced. */
  reportProgress: (fraction: number, message?: string) => void;
}

/** Does the work of one job (e.g. calls the tool in an isolate). Must end once `signal` aborts. */
export type JobRunner = (job: Job, context: JobRunContext) => Promise<JobRunResult>;

/** A worker's tunable settings (`JobServiceOptions.worker`). Every default is in `JOB_DEFAULTS` (defaults.ts). */
export interface JobWorkerSettings {
  /** Jobs this worker runs at once; a whole number ≥ 1, or Infinity. @default 4 */
  concurrency?: number;
  /** Running jobs per Anima, counted across every worker sharing the store; ≥ 1. @default 2 */
  perAnimaConcurrency?: number;
  /** Lease length, ms. A job whose worker stops renewing for this long is recovered. @default 30,000 */
  leaseMs?: number;
  /** How often held leases are renewed (and cancels made elsewhere seen), ms; shorter than the lease. @default 2,000, or leaseMs / 3 if less */
  heartbeatIntervalMs?: number;
  /** How often the store is asked for work submitted elsewhere, ms. @default 1,000 */
  pollIntervalMs?: number;
  /** How often expired leases are recovered and missing notices re-written, ms. @default leaseMs / 2 */
  maintenanceIntervalMs?: number;
  /**
   * After a cancel, a lost lease or a shutdown, how long the tool may wrap up (it sees `isCancelled()`)
   * before the run's signal aborts; and how long after that a runner that has not ended is waited for
   * before the job is recorded and its slot freed, ms (0 or more). @default 2,000
   */
  cancelGraceMs?: number;
  /** A finished job without a notice for this long is taken to have lost its writer; its notice is re-written, ms. @default leaseMs */
  noticeGraceMs?: number;
  /** Finished jobs older than this are deleted, ms; `Infinity` keeps them. @default 604,800,000 (7 days) */
  retentionMs?: number;
  /** How often the retention purge runs, ms. @default 3,600,000 (1 hour) */
  purgeIntervalMs?: number;
  /** Write completion notices. @default true */
  notices?: boolean;
  /** How often a worker running until drained looks at the queue while it has nothing to do, ms. @default 1,000 */
  idleCheckIntervalMs?: number;
  /** Lease owner id; unique per worker. @default `<hostname>:<pid>:<random>` */
  workerId?: string;
  /** Receives the worker's log lines (one as each job starts and ends, and warnings). @default stderr */
  onLog?: (record: LogRecord) => void;
}

export interface JobWorkerOptions extends JobWorkerSettings {
  store: JobStore;
  runJob: JobRunner;
  /** The directory of an Anima, where its completion notices go. */
  animaDirOf: (anima: string) => string;
  /** Notices that could not be written, logged once per Anima and failure; shared by a service's workers. Default: this worker's own. */
  noticeFailures?: NoticeFailures;
}

export interface WorkerRunOptions {
  /** Return once nothing is queued or running in the whole store. @default false */
  untilDrained?: boolean;
  /** Graceful stop: claim nothing more, let running jobs finish (up to `drainTimeoutMs`), then return. */
  signal?: AbortSignal;
  /** Stop now: running jobs are stopped (with the grace) and their leases handed back. */
  abortRunning?: AbortSignal;
  /** How long a graceful stop lets running jobs go on before they are stopped, ms. @default 600,000 */
  drainTimeoutMs?: number;
  /**
   * Until drained: called when the store looks drained; the worker leaves only if it resolves true, else
   * it goes on. `drained` looks again. (JobService removes its worker record here before a last look.)
   * @default leave at once
   */
  mayLeave?: (drained: () => Promise<boolean>) => Promise<boolean>;
}

export interface WorkerStats {
  /** Runs this worker started. */
  started: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  /** Runs whose outcome this worker did not record (lease lost, or given back at shutdown). */
  released: number;
}

export type ResolvedSettings = Required<Omit<JobWorkerSettings, "workerId">>;

/** Fills in `JOB_DEFAULTS` and checks every setting; throws a TypeError naming the bad one. */
export function resolveWorkerSettings(settings: JobWorkerSettings): ResolvedSettings {
  const d = JOB_DEFAULTS;
  const leaseMs = duration(settings.leaseMs, d.leaseMs, "leaseMs");
  const resolved: ResolvedSettings = {
    concurrency: count(settings.concurrency, d.concurrency, "concurrency"),
    perAnimaConcurrency: count(settings.perAnimaConcurrency, d.perAnimaConcurrency, "perAnimaConcurrency"),
    leaseMs,
    heartbeatIntervalMs: duration(settings.heartbeatIntervalMs, d.heartbeatIntervalMs(leaseMs), "heartbeatIntervalMs"),
    pollIntervalMs: duration(settings.pollIntervalMs, d.pollIntervalMs, "pollIntervalMs"),
    maintenanceIntervalMs: duration(settings.maintenanceIntervalMs, d.maintenanceIntervalMs(leaseMs), "maintenanceIntervalMs"),
    cancelGraceMs: duration(settings.cancelGraceMs, d.cancelGraceMs, "cancelGraceMs", true),
    noticeGraceMs: duration(settings.noticeGraceMs, d.noticeGraceMs(leaseMs), "noticeGraceMs"),
    retentionMs: retention(settings.retentionMs, d.retentionMs),
    purgeIntervalMs: duration(settings.purgeIntervalMs, d.purgeIntervalMs, "purgeIntervalMs"),
    notices: settings.notices ?? d.notices,
    idleCheckIntervalMs: duration(settings.idleCheckIntervalMs, d.idleCheckIntervalMs, "idleCheckIntervalMs"),
    // A record's message may be a tool's text: escaped as every text sink escapes it (config.ts formatLogRecord).
    onLog: settings.onLog ?? ((r) => process.stderr.write(`${formatLogRecord(r)}\n`)),
  };
  if (resolved.heartbeatIntervalMs >= leaseMs) throw new TypeError("heartbeatIntervalMs must be shorter than leaseMs");
  return resolved;
}

/** Not a timer, so any positive age works; Infinity keeps finished jobs forever. */
function retention(value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (Number.isNaN(value) || value <= 0) throw new TypeError(`retentionMs must be a positive number of ms, got ${String(value)}`);
  return value;
}

/** A whole number of jobs ≥ 1, or Infinity for "no limit". */
function count(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!(Number.isSafeInteger(value) || value === Number.POSITIVE_INFINITY) || value < 1) {
    throw new TypeError(`${name} must be a whole number ≥ 1 (or Infinity), got ${String(value)}`);
  }
  return value;
}
