import type { LogRecord } from "../config.js";
import type { Job, JobError, JobStore } from "./store.js";

export type JobRunResult = { ok: true; result: string } | { ok: false; error: JobError };

export interface JobRunContext {
  /** Aborted when the job is cancelled, times out, loses its lease or the scheduler shuts down. */
  signal: AbortSignal;
  /** Progress for `jobs show`; `fraction` is clamped to 0..1. Cheap to call often: writes are coalesced. */
  reportProgress(fraction: number, message?: string): void;
}

/** Does the work of one job (e.g. calls the tool in an isolate). Must honour `signal`. */
export type JobRunner = (job: Job, context: JobRunContext) => Promise<JobRunResult>;

export interface JobSchedulerOptions {
  store: JobStore;
  runJob: JobRunner;
  /** The directory of an Anima, where its completion notices go. */
  animaDirOf: (anima: string) => string;
  /** Jobs this scheduler runs at once. Default: 4. Minimum: 1. */
  concurrency?: number;
  /** Running jobs per Anima, counted across every worker sharing the store. Default: 2. Minimum: 1. */
  perAnimaConcurrency?: number;
  /** Lease length, ms. A job whose worker stops renewing for this long is recovered. Default: 30,000. */
  leaseMs?: number;
  /** How often held leases are renewed (and remote cancel requests seen), ms. Default: leaseMs / 3. */
  heartbeatIntervalMs?: number;
  /** How often the store is asked for work submitted elsewhere, ms. Default: 1,000. */
  pollIntervalMs?: number;
  /** How often expired leases are recovered and missing notices re-written, ms. Default: leaseMs / 2. */
  maintenanceIntervalMs?: number;
  /** After aborting a run, how long to wait for the runner before giving up on it and freeing its slot, ms. Default: 5,000. */
  cancelGraceMs?: number;
  /** A finished job without a notice for this long is taken to have lost its writer; its notice is re-written, ms. Default: leaseMs. */
  noticeGraceMs?: number;
  /** Finished jobs older than this are deleted, ms. Default: 604,800,000 (7 days). `Infinity` keeps them. */
  retentionMs?: number;
  /** How often the retention purge runs, ms. Default: 3,600,000 (1 hour). */
  purgeIntervalMs?: number;
  /** Write completion notices. Default: true. */
  notices?: boolean;
  /** Lease owner id; unique per scheduler. Default: `<hostname>:<pid>:<random>`. */
  workerId?: string;
  /** Receives the scheduler's warnings. Default: write to stderr. */
  onLog?: (record: LogRecord) => void;
}

export interface SchedulerStats {
  /** Runs this scheduler started. */
  started: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  /** Runs whose outcome this scheduler did not record (lease lost, or given back at shutdown). */
  released: number;
}

export type ResolvedSchedulerOptions = Required<Omit<JobSchedulerOptions, "workerId">>;

/** Fills in defaults and checks every option; throws a TypeError naming the bad one. */
export function resolveSchedulerOptions(options: JobSchedulerOptions): ResolvedSchedulerOptions {
  const leaseMs = positive(options.leaseMs, 30_000, "leaseMs");
  const resolved: ResolvedSchedulerOptions = {
    store: options.store,
    runJob: options.runJob,
    animaDirOf: options.animaDirOf,
    concurrency: count(options.concurrency, 4, "concurrency"),
    perAnimaConcurrency: count(options.perAnimaConcurrency, 2, "perAnimaConcurrency"),
    leaseMs,
    heartbeatIntervalMs: positive(options.heartbeatIntervalMs, leaseMs / 3, "heartbeatIntervalMs"),
    pollIntervalMs: positive(options.pollIntervalMs, 1_000, "pollIntervalMs"),
    maintenanceIntervalMs: positive(options.maintenanceIntervalMs, leaseMs / 2, "maintenanceIntervalMs"),
    cancelGraceMs: positive(options.cancelGraceMs, 5_000, "cancelGraceMs"),
    noticeGraceMs: positive(options.noticeGraceMs, leaseMs, "noticeGraceMs"),
    retentionMs: retention(options.retentionMs),
    purgeIntervalMs: positive(options.purgeIntervalMs, 3_600_000, "purgeIntervalMs"),
    notices: options.notices ?? true,
    onLog: options.onLog ?? ((r) => process.stderr.write(`[${r.level}] ${r.logger}: ${r.message}\n`)),
  };
  if (resolved.heartbeatIntervalMs >= leaseMs) throw new TypeError("heartbeatIntervalMs must be shorter than leaseMs");
  return resolved;
}

/** A duration in ms that Node timers can hold (they treat anything over 2^31−1 as 1 ms). */
function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0 || value > 2_147_483_647) {
    throw new TypeError(`${name} must be a positive number of ms up to 2,147,483,647, got ${String(value)}`);
  }
  return value;
}

/** Not a timer, so any positive age works; Infinity keeps finished jobs forever. */
function retention(value: number | undefined): number {
  if (value === undefined) return 7 * 24 * 3_600_000;
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
