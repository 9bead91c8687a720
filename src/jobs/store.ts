import { createHash, randomBytes } from "node:crypto";
import { DEFAULT_FAULT, type ErrorInfo, ToolHostError, isErrorType, isFault } from "../errors.js";

/**
 * The seam between background-job callers (CLI `submit`/`jobs`, the worker) and where jobs are kept.
 * Callers only ever see `JobStore`; the embedded SQLite store is one implementation, and a distributed
 * backend can be added beside it without touching them. Every implementation must pass the contract
 * suite in `test/jobs/contract.ts`, which is the executable form of the promises written here.
 *
 * All methods are async even where the embedded store could answer synchronously, because a networked
 * backend cannot.
 */

export const JOB_STATUSES = ["queued", "running", "succeeded", "failed", "cancelled", "interrupted"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Statuses a job never leaves. */
export const TERMINAL_STATUSES: readonly JobStatus[] = ["succeeded", "failed", "cancelled", "interrupted"];

export function isTerminal(status: JobStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

/**
 * Why a job did not succeed: the host's one error shape (src/errors.ts). Stores keep its type and message
 * (a hint is folded into the message when the job's run is recorded).
 */
export type JobError = ErrorInfo;

export interface JobProgress {
  /** 0 to 1 inclusive. */
  fraction: number;
  message: string;
}

export interface Job {
  /** 12 lowercase hex characters, like AnimaWorks' task ids. The one id for status, cancel and notice. */
  id: string;
  anima: string;
  tool: string;
  action: string;
  /** `{tool}_{action}` as the tool's schema names it. */
  schemaName: string;
  /** The validated arguments as JSON text, exactly as submitted. */
  argsJson: string;
  /** sha256 of the tool bundle current at submit time; the job runs that version (see `putBundle`). */
  bundleHash: string;
  /** Among this Anima's queued jobs, higher runs first. Integer. It never puts one Anima ahead of another. */
  priority: number;
  idempotencyKey?: string;
  status: JobStatus;
  /** Runs started so far: `claim` adds one. Never exceeds `maxAttempts`. */
  attempts: number;
  /** Most runs this job may get. 1 means a run lost to a crash is not retried (status `interrupted`). */
  maxAttempts: number;
  /** Delay before the first retry after a lost run, doubled for each further retry, ms. */
  retryBackoffMs: number;
  /** Longest a single run may take before it is aborted and the job fails with `Timeout`, ms. */
  timeoutMs: number;
  /** Epoch ms. */
  submittedAt: number;
  /** Epoch ms of the latest run's start. */
  startedAt?: number;
  /** Epoch ms at which the job reached a terminal status. */
  finishedAt?: number;
  /** A queued job is not claimed before this epoch ms (set by a retry's backoff). */
  notBefore?: number;
  /**
   * The runner's result as text: a succeeded job's output, or what a cancelled job's tool returned when it
   * saw `isCancelled()` and wrapped up (its partial result; the job stays `cancelled`).
   */
  result?: string;
  /**
   * Whether `result` is the JSON of an object the tool returned (a direct call's `structured` form: `-j`
   * shows it as an object, MCP as `structuredContent`) or text. Absent for a job recorded before stores
   * kept it: its text is then read as an object when it parses as one (view.ts `jobOutputValue`).
   */
  resultStructured?: boolean;
  error?: JobError;
  progress?: JobProgress;
  /** Worker id holding the lease of a running job. */
  leaseOwner?: string;
  /** Epoch ms after which the lease is void and the job may be recovered. */
  leaseExpiresAt?: number;
  /** Set by `requestCancel` on a running job; the worker sees it when it renews the lease. */
  cancelRequested: boolean;
  /** Epoch ms at which the completion notice was written (terminal jobs only). */
  notifiedAt?: number;
  /**
   * Set on a job read by `list` or `pendingNotices`, which never read a job's long texts whole (a listing
   * of many jobs must not cost a host every argument and result they hold): `argsJson` (which may then not
   * parse), `result`, the error's message and hint and the progress message are each at most
   * `LISTED_TEXT_CHARS` (4,096, limits.ts) characters from their start, and this gives the whole sizes.
   * `get` reads a job whole.
   */
  listed?: {
    /** UTF-8 bytes of the whole `argsJson`. */
    argsBytes: number;
    /** UTF-8 bytes of the whole `result`, when it has one. */
    resultBytes?: number;
  };
}

export interface SubmitJobInput {
  anima: string;
  tool: string;
  action: string;
  schemaName: string;
  /** JSON text of the validated arguments. Must parse as JSON; at most `MAX_JOB_ARGS_BYTES` (1 MiB, limits.ts). */
  argsJson: string;
  /** Hash of a bundle already stored with `putBundle`. */
  bundleHash: string;
  /** Integer; higher runs first. Default: 0 (`JOB_DEFAULTS`, defaults.ts, as the other defaults here). */
  priority?: number;
  /**
   * Per Anima: a second submit with the same key returns the first job instead of queueing another, for as
   * long as that job is kept (see `purgeFinished`). Reusing a key for different work is an error.
   */
  idempotencyKey?: string;
  /** Default: 1 (a run lost to a crash is not retried). Integer ≥ 1. */
  maxAttempts?: number;
  /** Default: 1,000 ms. First retry delay, doubled per further retry. */
  retryBackoffMs?: number;
  /** Default: 1,800,000 ms (30 min, AnimaWorks' background subprocess timeout). */
  timeoutMs?: number;
}

export interface SubmitResult {
  job: Job;
  /** False when an idempotency key matched an existing job, which is returned unchanged. */
  created: boolean;
}

export interface ListJobsOptions {
  /** Only jobs in this status (or these statuses). Default: all. */
  status?: JobStatus | readonly JobStatus[];
  /** Most jobs returned, newest first: 1 to `MAX_LISTED_JOBS` (1,000; more is `InvalidArguments`). Default: 100. */
  limit?: number;
}

export interface ClaimRequest {
  /** Worker id that will hold the leases. */
  owner: string;
  /** Lease length, ms. The owner must renew before it runs out or the job may be recovered. */
  leaseMs: number;
  /** Most jobs claimed by this call. */
  limit: number;
  /** Most running jobs per Anima across every worker sharing the store. Default: no limit. */
  perAnimaLimit?: number;
}

/** Proof of a claim. Writes about a running job must present it; a stale one (lost lease) is refused. */
export interface JobLease {
  id: string;
  owner: string;
  /** The job's `attempts` when claimed: fences off a run whose lease expired and was claimed again. */
  attempt: number;
}

export interface LeaseState {
  /** False when the lease was lost: the job was recovered, completed or claimed by someone else. */
  held: boolean;
  cancelRequested: boolean;
}

/**
 * How a run ended, as the store records it. `structured` (default false): `result` is the JSON of an object
 * the tool returned. A cancelled job keeps a `result` when its tool returned one after seeing the cancel.
 */
export type JobOutcome =
  | { status: "succeeded"; result: string; structured?: boolean }
  | { status: "failed"; error: JobError }
  | { status: "cancelled"; error?: JobError; result?: string; structured?: boolean };

export interface RecoveryResult {
  /** Running jobs whose lease expired and that have attempts left: queued again after their backoff. */
  requeued: Job[];
  /** Running jobs whose lease expired that reached a terminal status (`interrupted`, or `cancelled` if asked). */
  ended: Job[];
}

export interface QueueStatus {
  /** Queued jobs, including those waiting for a retry backoff. */
  queued: number;
  /** Queued jobs that may be claimed now (per-Anima limits aside). */
  runnable: number;
  running: number;
  /** Earliest `notBefore` among queued jobs that are not yet runnable, epoch ms. */
  nextNotBefore?: number;
}

export interface PurgeResult {
  jobs: number;
  bundles: number;
}

/** What a store that can push changes tells its subscribers (see `JobStore.subscribe`). */
export type StoreEvent =
  /** A job was submitted (or requeued): an idle worker should look for work. */
  | { type: "runnable" }
  /** A cancel was requested for running job `id`: the worker running it should abort it now. */
  | { type: "cancel"; id: string };

export interface JobStore {
  /** Records a job durably (committed to stable storage) before the promise resolves. */
  submit(input: SubmitJobInput): Promise<SubmitResult>;
  /** The job if it exists and belongs to `anima`; another Anima's job is indistinguishable from none. */
  get(anima: string, id: string): Promise<Job | undefined>;
  /** The Anima's jobs, newest first, their long texts cut (see `Job.listed`). */
  list(anima: string, options?: ListJobsOptions): Promise<Job[]>;
  /**
   * Atomically moves up to `limit` runnable queued jobs to `running` under leases for `owner`; a job is
   * never handed to two claimers. Order: across Animas, the one served least recently first (round-robin,
   * whatever the priorities: a tenant cannot jump ahead of others); within an Anima, highest priority
   * first, then oldest.
   */
  claim(request: ClaimRequest): Promise<Job[]>;
  /** Extends each still-held lease to now + `leaseMs` (0 gives it up now). Results align with `leases`. */
  renewLeases(leases: readonly JobLease[], leaseMs: number): Promise<LeaseState[]>;
  /** Records progress of a running job; false when the lease is no longer held. */
  reportProgress(lease: JobLease, progress: JobProgress): Promise<boolean>;
  /** Finishes a running job; undefined (and no change) when the lease is no longer held. */
  complete(lease: JobLease, outcome: JobOutcome): Promise<Job | undefined>;
  /**
   * A queued job becomes `cancelled` at once; a running one gets `cancelRequested` (its worker aborts it);
   * a finished one is left as is. Returns the job after the change, or undefined if the Anima has no such job.
   */
  requestCancel(anima: string, id: string): Promise<Job | undefined>;
  /** Handles running jobs whose lease expired: retry with backoff while attempts remain, else `interrupted`. */
  recoverExpiredLeases(): Promise<RecoveryResult>;
  /**
   * Terminal jobs whose notice is not yet written, finished at least `minAgeMs` ago and not postponed past
   * now (`postponeNotices`): those never postponed first, oldest first; then those whose postponement ran
   * out, in that order. Long texts cut (`Job.listed`). `includePostponed`: postponed ones too, whenever
   * they are due (a worker about to leave tries them once more: worker.ts).
   */
  pendingNotices(options: PendingNoticesOptions): Promise<Job[]>;
  markNotified(ids: readonly string[]): Promise<void>;
  /**
   * These jobs' notices could not be written: each is left out of `pendingNotices` for `NOTICE_RETRY`'s
   * backoff (1 s after its first failure, doubling with each further one, at most 10 min), so that notices
   * that keep failing (a notice folder that is a link) never hold back others behind them.
   */
  postponeNotices(ids: readonly string[]): Promise<void>;
  /** Deletes terminal jobs finished more than `olderThanMs` ago, and bundles no kept job uses. */
  purgeFinished(olderThanMs: number): Promise<PurgeResult>;
  /** Stores a bundle under its content hash (sha256 of `code`, hex); storing it again is harmless. */
  putBundle(hash: string, code: string): Promise<void>;
  getBundle(hash: string): Promise<string | undefined>;
  queueStatus(): Promise<QueueStatus>;
  /**
   * Optional: calls `listener` on changes made by any instance sharing the store (other workers, other
   * machines), so that workers need not wait for their next poll. Events are hints: a listener acts by
   * reading the store (claim, renew), never on the event alone, and polling stays as the safety net.
   * Resolves once listening; the returned function stops it.
   */
  subscribe?(listener: (event: StoreEvent) => void): Promise<() => Promise<void>>;
  /** Finishes pending writes and releases the store. */
  close(): Promise<void>;
}

/** 12 lowercase hex characters (48 random bits), the id format AnimaWorks users know. */
export function newJobId(): string {
  // Random bytes are drawn 4 KiB at a time: one randomBytes call per id cost more than the insert itself.
  if (idPoolOffset + 6 > idPool.length) {
    idPool = randomBytes(4_096);
    idPoolOffset = 0;
  }
  idPoolOffset += 6;
  return idPool.toString("hex", idPoolOffset - 6, idPoolOffset);
}

let idPool = Buffer.alloc(0);
let idPoolOffset = 0;

export function leaseOf(job: Job): JobLease {
  if (job.status !== "running" || job.leaseOwner === undefined) {
    throw new ToolHostError("InvalidArguments", `job ${job.id} is ${job.status}, not running under a lease`);
  }
  return { id: job.id, owner: job.leaseOwner, attempt: job.attempts };
}

/** What `JobStore.pendingNotices` reads. */
export interface PendingNoticesOptions {
  minAgeMs: number;
  limit: number;
  /** Also notices postponed past now (`postponeNotices`). Default: false. */
  includePostponed?: boolean;
}

/**
 * When a notice that could not be written is tried again (`postponeNotices`): `firstMs` after its first
 * failure, doubling with each further one, at most `maxMs`. Short at first, so that a folder put right is
 * seen within a few maintenance passes; bounded, so that one that stays wrong costs a try per 10 min.
 */
export const NOTICE_RETRY = { firstMs: 1_000, maxMs: 600_000 } as const;

/** Delay before the retry that follows `attempts` runs: backoff × 2^(attempts−1), capped at one hour. */
export function retryDelayMs(retryBackoffMs: number, attempts: number): number {
  return Math.min(3_600_000, retryBackoffMs * 2 ** Math.max(0, attempts - 1));
}

/** Why a job whose lease expired with no attempts left ends `interrupted`. */
export function interruptedMessage(attempts: number, maxAttempts: number): string {
  return (
    `interrupted: the worker running attempt ${attempts} of ${maxAttempts} stopped ` +
    `(its lease expired)${maxAttempts > 1 ? "; no attempts left" : "; this job is not retried"}`
  );
}

/** Bundles are content-addressed: `hash` must be the sha256 of `code` (hex). */
export function checkBundleHash(hash: string, code: string): void {
  if (createHash("sha256").update(code).digest("hex") !== hash) {
    throw new ToolHostError("InvalidArguments", `bundle hash ${hash} is not the sha256 of its code`);
  }
}

/**
 * A job's error as read back from storage, checked: an unknown type (e.g. from a newer host) reads as
 * ExecutionError, a missing or unknown fault (a row written before faults were stored) as the type's usual one.
 */
export function toJobError(row: { error_type: unknown; error_message: unknown; error_fault: unknown; error_hint: unknown }): JobError {
  const type = isErrorType(row.error_type) ? row.error_type : "ExecutionError";
  const error: JobError = {
    type,
    message: typeof row.error_message === "string" ? row.error_message : "",
    fault: isFault(row.error_fault) ? row.error_fault : DEFAULT_FAULT[type],
  };
  if (typeof row.error_hint === "string" && row.error_hint !== "") error.hint = row.error_hint;
  return error;
}

/** The PostgreSQL server a job store URL names, without its password: for messages. */
export function describeServer(url: string): string {
  try {
    const parsed = new URL(url);
    const user = parsed.username ? `${decodeURIComponent(parsed.username)}@` : "";
    return `postgres://${user}${parsed.host}${parsed.pathname}`;
  } catch {
    return "the job database (its URL does not parse)";
  }
}
