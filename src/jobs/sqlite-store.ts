import { chmodSync, existsSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { ToolHostError } from "../errors.js";
import { GroupCommit } from "./group-commit.js";
import { type ClaimStatements, claimJobs, prepareClaim } from "./sqlite-claim.js";
import { type JobRow, LISTED_COLUMNS, migrate, rowToJob, rowToListedJob, textBytes } from "./sqlite-schema.js";
import { checkIntegrity, jobStoreError } from "./sqlite-errors.js";
import { type UnfinishedJobLimits, checkUnfinishedLimits, listLimit, resolveUnfinishedLimits, storedSizes } from "./limits.js";
import {
  type ClaimRequest,
  type Job,
  type JobLease,
  type JobOutcome,
  type JobProgress,
  type JobStore,
  type LeaseState,
  type ListJobsOptions,
  type PendingNoticesOptions,
  type PurgeResult,
  type QueueStatus,
  type RecoveryResult,
  type SubmitJobInput,
  type SubmitResult,
  JOB_STATUSES,
  NOTICE_RETRY,
  checkBundleHash,
  interruptedMessage,
  newJobId,
  retryDelayMs,
} from "./store.js";
import { normaliseProgress, normaliseSubmit, outcomeColumns, sameWork } from "./store-writes.js";

export interface SqliteJobStoreOptions extends UnfinishedJobLimits {
  /** Database file. Created, with its folder, if missing (mode 0600: job arguments may be private). */
  path: string;
  /** How long a write waits for another process holding the write lock before failing, ms. Default: 5,000. */
  busyTimeoutMs?: number;
  /** Clock, epoch ms. Default: `Date.now`. Tests pass a fake one to move leases and backoffs without sleeping. */
  now?: () => number;
}

/**
 * The embedded default `JobStore`: one SQLite file in WAL mode that several worker processes may share.
 *
 * Durability: `synchronous = FULL` for every write that changes what runs (submit, claim, complete, cancel,
 * recovery, purge, bundles). In WAL mode NORMAL skips the fsync at commit, and SQLite documents that such a
 * commit "might roll back following a power loss": a job whose submit had returned would vanish, and a
 * lost claim would let a job run twice. FULL fsyncs the WAL at each commit, so a returned submit survives
 * power loss. Lease renewals, progress and notice marks commit with NORMAL: losing them to a power cut only
 * shortens a lease or loses a progress line, both harmless since every worker died with the power anyway.
 * The fsync cost is shared by group commit (see group-commit.ts).
 *
 * Exclusivity: every write, claims included, runs in a `BEGIN IMMEDIATE` transaction, which takes the
 * database's single write lock before reading; two processes therefore never both see a job as queued.
 */
export class SqliteJobStore implements JobStore {
  private readonly db: Database.Database;
  private readonly writes: GroupCommit;
  private readonly clock: () => number;
  private readonly limits: Required<UnfinishedJobLimits>;
  private readonly sql: ReturnType<typeof prepare>;
  private readonly claimSql: ClaimStatements;
  private closed = false;

  /** The database file: every error this store gives names it (sqlite-errors.ts). */
  private readonly path: string;

  /** Opens (or creates) the database; a damaged file is refused here, with what to do (`checkIntegrity`). */
  constructor(options: SqliteJobStoreOptions) {
    this.path = options.path;
    this.limits = resolveUnfinishedLimits(options);
    let db: Database.Database | undefined;
    try {
      const isNew = !existsSync(options.path);
      mkdirSync(dirname(options.path), { recursive: true });
      db = new Database(options.path, { timeout: options.busyTimeoutMs ?? 5_000 });
      if (isNew) chmodSync(options.path, 0o600); // SQLite gives the -wal and -shm files the same mode
      db.pragma("journal_mode = WAL");
      if (!isNew) checkIntegrity(db, options.path);
      db.pragma("synchronous = FULL");
      db.pragma("foreign_keys = ON");
      migrate(db);
      this.db = db;
      this.writes = new GroupCommit(db);
      this.sql = prepare(db);
      this.claimSql = prepareClaim(db);
    } catch (error) {
      db?.close();
      throw jobStoreError(error, options.path);
    }
    this.clock = options.now ?? Date.now;
  }

  async submit(input: SubmitJobInput): Promise<SubmitResult> {
    const job = normaliseSubmit(input);
    return this.write(true, () => {
      if (job.idempotencyKey !== undefined) {
        const existing = this.sql.byIdempotencyKey.get(job.anima, job.idempotencyKey) as JobRow | undefined;
        if (existing) return { job: sameWork(rowToJob(existing), job), created: false };
      }
      if (!this.sql.bundleExists.get(job.bundleHash)) {
        throw new ToolHostError("NotFound", `bundle ${job.bundleHash} is not stored`, "putBundle before submitting");
      }
      // Inside the write transaction: no other submit can come between this count and the insert.
      const argsBytes = Buffer.byteLength(job.argsJson);
      checkUnfinishedLimits(job.anima, this.sql.unfinished.get(job.anima, job.anima) as { jobs: number; argsBytes: number }, argsBytes, this.limits);
      const now = this.clock();
      for (let tries = 0; ; tries++) {
        try {
          const id = newJobId();
          this.sql.insert.run({ ...job, idempotencyKey: job.idempotencyKey ?? null, argsBytes, id, now });
          const created: Job = { ...job, id, status: "queued", attempts: 0, submittedAt: now, cancelRequested: false };
          if (job.idempotencyKey === undefined) delete created.idempotencyKey;
          return { job: created, created: true };
        } catch (error) {
          // 48-bit ids collide rarely but not never in a long-lived store: draw again.
          if (tries < 5 && isUniqueViolation(error, "jobs.id")) continue;
          throw error;
        }
      }
    });
  }

  async get(anima: string, id: string): Promise<Job | undefined> {
    return this.read(() => {
      const row = this.sql.byId.get(id) as JobRow | undefined;
      return row && row.anima === anima ? rowToJob(row) : undefined;
    });
  }

  async list(anima: string, options: ListJobsOptions = {}): Promise<Job[]> {
    return this.read(() => {
      const statuses = options.status === undefined ? JOB_STATUSES : [options.status].flat();
      const limit = listLimit(options.limit);
      const rows = this.sql.listByAnima.all(anima, JSON.stringify(statuses), limit) as JobRow[];
      return rows.map(rowToListedJob);
    });
  }

  claim(request: ClaimRequest): Promise<Job[]> {
    return this.write(true, () => claimJobs(this.claimSql, request, this.clock()));
  }

  renewLeases(leases: readonly JobLease[], leaseMs: number): Promise<LeaseState[]> {
    return this.write(false, () => {
      const expires = this.clock() + leaseMs;
      return leases.map((lease) => {
        const row = this.sql.renew.get({ ...lease, expires }) as { cancel_requested: number } | undefined;
        return row ? { held: true, cancelRequested: row.cancel_requested !== 0 } : { held: false, cancelRequested: false };
      });
    });
  }

  reportProgress(lease: JobLease, progress: JobProgress): Promise<boolean> {
    const { fraction, message } = normaliseProgress(progress);
    return this.write(false, () => this.sql.progress.run({ ...lease, fraction, message }).changes === 1);
  }

  complete(lease: JobLease, outcome: JobOutcome): Promise<Job | undefined> {
    return this.write(true, () => {
      const row = this.sql.complete.get({ ...lease, status: outcome.status, now: this.clock(), ...outcomeColumns(outcome) }) as JobRow | undefined;
      return row ? rowToJob(row) : undefined;
    });
  }

  requestCancel(anima: string, id: string): Promise<Job | undefined> {
    return this.write(true, () => {
      const row = this.sql.byId.get(id) as JobRow | undefined;
      if (!row || row.anima !== anima) return undefined;
      if (row.status === "queued") return rowToJob(this.sql.cancelQueued.get(this.clock(), row.seq) as JobRow);
      if (row.status === "running") return rowToJob(this.sql.flagCancel.get(row.seq) as JobRow);
      return rowToJob(row);
    });
  }

  recoverExpiredLeases(): Promise<RecoveryResult> {
    return this.write(true, () => {
      const now = this.clock();
      const result: RecoveryResult = { requeued: [], ended: [] };
      for (const row of this.sql.expiredLeases.all(now) as JobRow[]) {
        if (row.cancel_requested !== 0) {
          result.ended.push(rowToJob(this.sql.endLost.get({ seq: row.seq, status: "cancelled", now, type: null, message: null, fault: null }) as JobRow));
        } else if (row.attempts < row.max_attempts) {
          const notBefore = now + retryDelayMs(row.retry_backoff_ms, row.attempts);
          result.requeued.push(rowToJob(this.sql.requeue.get(notBefore, row.seq) as JobRow));
        } else {
          const message = interruptedMessage(row.attempts, row.max_attempts);
          const ended = this.sql.endLost.get({ seq: row.seq, status: "interrupted", now, type: "ExecutionError", message, fault: "host" });
          result.ended.push(rowToJob(ended as JobRow));
        }
      }
      return result;
    });
  }

  async pendingNotices(options: PendingNoticesOptions): Promise<Job[]> {
    return this.read(() => {
      const now = this.clock();
      // @now bounds only notice_retry_at: past every postponement when postponed notices are wanted too.
      const retryBy = options.includePostponed ? Number.MAX_SAFE_INTEGER : now;
      return (this.sql.unnotified.all({ now: retryBy, finishedBy: now - options.minAgeMs, limit: options.limit }) as JobRow[]).map(rowToListedJob);
    });
  }

  postponeNotices(ids: readonly string[]): Promise<void> {
    return this.write(false, () => {
      const now = this.clock();
      for (const id of ids) this.sql.postponeNotice.run({ id, now, ...NOTICE_RETRY });
    });
  }

  markNotified(ids: readonly string[]): Promise<void> {
    return this.write(false, () => {
      const now = this.clock();
      for (const id of ids) this.sql.markNotified.run(now, id);
    });
  }

  purgeFinished(olderThanMs: number): Promise<PurgeResult> {
    return this.write(true, () => {
      const cutoff = this.clock() - olderThanMs;
      const jobs = this.sql.purgeJobs.run(cutoff).changes;
      // A bundle stored moments ago for a submit still on its way must survive: only bundles untouched
      // for as long as the retention period and used by no kept job go.
      const bundles = this.sql.purgeBundles.run(cutoff).changes;
      return { jobs, bundles };
    });
  }

  async putBundle(hash: string, code: string): Promise<void> {
    checkBundleHash(hash, code);
    return this.write(true, () => {
      this.sql.putBundle.run(hash, code, this.clock());
    });
  }

  async getBundle(hash: string): Promise<string | undefined> {
    return this.read(() => (this.sql.getBundle.get(hash) as { code: string } | undefined)?.code);
  }

  async queueStatus(): Promise<QueueStatus> {
    return this.read(() => {
      const now = this.clock();
      const row = this.sql.queueStatus.get({ now }) as { queued: number; runnable: number; running: number; next: number | null };
      const status: QueueStatus = { queued: row.queued, runnable: row.runnable, running: row.running };
      if (row.next !== null) status.nextNotBefore = row.next;
      return status;
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.writes.flush();
    this.closed = true;
    this.db.close();
  }

  private write<T>(durable: boolean, write: () => T): Promise<T> {
    if (this.closed) return Promise.reject(closedError());
    return this.writes.run(durable, write).catch((error: unknown) => {
      throw jobStoreError(error, this.path);
    });
  }

  private read<T>(read: () => T): T {
    if (this.closed) throw closedError();
    try {
      return read();
    } catch (error) {
      throw jobStoreError(error, this.path);
    }
  }
}

function closedError(): ToolHostError {
  return new ToolHostError("ExecutionError", "the job store is closed");
}

function isUniqueViolation(error: unknown, column: string): boolean {
  return error instanceof Error && (error as { code?: string }).code === "SQLITE_CONSTRAINT_UNIQUE" && error.message.includes(column);
}

const ARGS_BYTES = storedSizes(textBytes).argsBytes;

const LEASE_MATCH = "id = @id AND status = 'running' AND lease_owner = @owner AND attempts = @attempt";

function prepare(db: Database.Database) {
  const s = (sql: string) => db.prepare(sql);
  return {
    byId: s("SELECT * FROM jobs WHERE id = ?"),
    byIdempotencyKey: s("SELECT * FROM jobs WHERE anima = ? AND idempotency_key = ?"),
    bundleExists: s("SELECT 1 FROM bundles WHERE hash = ?"),
    // Each status through its own partial index, not the Anima's whole history (which SQLite picks without
    // statistics, jobs_by_anima).
    // A size an older build left unknown is measured (storedSizes).
    unfinished: s(`SELECT COUNT(*) AS jobs, COALESCE(SUM(args_bytes), 0) AS argsBytes FROM (
        SELECT ${ARGS_BYTES} AS args_bytes FROM jobs INDEXED BY jobs_queued WHERE anima = ? AND status = 'queued'
        UNION ALL SELECT ${ARGS_BYTES} AS args_bytes FROM jobs INDEXED BY jobs_running WHERE anima = ? AND status = 'running')`),
    insert: s(`INSERT INTO jobs (id, anima, tool, action, schema_name, args_json, args_bytes, bundle_hash, priority, idempotency_key,
        status, max_attempts, retry_backoff_ms, timeout_ms, submitted_at)
      VALUES (@id, @anima, @tool, @action, @schemaName, @argsJson, @argsBytes, @bundleHash, @priority, @idempotencyKey,
        'queued', @maxAttempts, @retryBackoffMs, @timeoutMs, @now)`),
    listByAnima: s(`SELECT ${LISTED_COLUMNS} FROM jobs WHERE anima = ? AND status IN (SELECT value FROM json_each(?))
      ORDER BY seq DESC LIMIT ?`),
    renew: s(`UPDATE jobs SET lease_expires_at = @expires WHERE ${LEASE_MATCH} RETURNING cancel_requested`),
    progress: s(`UPDATE jobs SET progress_fraction = @fraction, progress_message = @message WHERE ${LEASE_MATCH}`),
    complete: s(`UPDATE jobs SET status = @status, finished_at = @now, result = @result, result_structured = @resultStructured,
        result_bytes = @resultBytes, error_type = @errorType,
        error_message = @errorMessage, error_fault = @errorFault, error_hint = @errorHint, lease_owner = NULL, lease_expires_at = NULL
      WHERE ${LEASE_MATCH} RETURNING *`),
    cancelQueued: s("UPDATE jobs SET status = 'cancelled', finished_at = ?, not_before = 0 WHERE seq = ? RETURNING *"),
    flagCancel: s("UPDATE jobs SET cancel_requested = 1 WHERE seq = ? RETURNING *"),
    expiredLeases: s("SELECT * FROM jobs WHERE status = 'running' AND lease_expires_at <= ? ORDER BY seq"),
    requeue: s(`UPDATE jobs SET status = 'queued', not_before = ?, lease_owner = NULL, lease_expires_at = NULL
      WHERE seq = ? RETURNING *`),
    endLost: s(`UPDATE jobs SET status = @status, finished_at = @now, error_type = @type, error_message = @message, error_fault = @fault,
        lease_owner = NULL, lease_expires_at = NULL WHERE seq = @seq RETURNING *`),
    unnotified: s(`SELECT ${LISTED_COLUMNS} FROM jobs INDEXED BY jobs_notices_due
      WHERE finished_at IS NOT NULL AND notified_at IS NULL AND notice_retry_at <= @now AND finished_at <= @finishedBy
      ORDER BY notice_retry_at, finished_at, seq LIMIT @limit`),
    // The delay doubles per failure from firstMs (the shift is capped well past maxMs, and below overflow).
    postponeNotice: s(`UPDATE jobs SET notice_failures = notice_failures + 1,
        notice_retry_at = @now + MIN(@maxMs, @firstMs << MIN(notice_failures, 30)) WHERE id = @id AND notified_at IS NULL`),
    markNotified: s("UPDATE jobs SET notified_at = ? WHERE id = ? AND notified_at IS NULL"),
    purgeJobs: s("DELETE FROM jobs WHERE finished_at IS NOT NULL AND finished_at < ?"),
    purgeBundles: s(`DELETE FROM bundles WHERE touched_at < ?
      AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.bundle_hash = bundles.hash)`),
    putBundle: s(`INSERT INTO bundles (hash, code, touched_at) VALUES (?, ?, ?)
      ON CONFLICT (hash) DO UPDATE SET touched_at = excluded.touched_at`),
    getBundle: s("SELECT code FROM bundles WHERE hash = ?"),
    queueStatus: s(`SELECT
        (SELECT COUNT(*) FROM jobs WHERE status = 'queued') AS queued,
        (SELECT COUNT(*) FROM jobs WHERE status = 'queued' AND (not_before <= @now OR typeof(not_before) <> 'integer')) AS runnable,
        (SELECT COUNT(*) FROM jobs WHERE status = 'running') AS running,
        (SELECT MIN(not_before) FROM jobs WHERE status = 'queued' AND typeof(not_before) = 'integer' AND not_before > @now) AS next`),
  };
}
