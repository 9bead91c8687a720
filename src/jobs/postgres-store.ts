import type pg from "pg";
import { ToolHostError } from "../errors.js";
import { checkSchemaName } from "./postgres-schema.js";
import { JobDatabase, closedError } from "./postgres-pool.js";
import { StoreNotifications } from "./postgres-notify.js";
import { listen } from "./postgres-connection.js";
import { type UnfinishedJobLimits, checkUnfinishedLimits, listLimit, resolveUnfinishedLimits } from "./limits.js";
import type { JobRow } from "./sqlite-schema.js";
import { PG_LISTED_COLUMNS, pgRowToJob, pgRowToListedJob, toPgText } from "./postgres-rows.js";
import {
  type ClaimRequest,
  type Job,
  type JobLease,
  type JobError,
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
  type StoreEvent,
  JOB_STATUSES,
  NOTICE_RETRY,
  checkBundleHash,
  describeServer,
  interruptedMessage,
  newJobId,
  retryDelayMs,
} from "./store.js";
import { namesNoJob, normaliseProgress, normaliseSubmit, outcomeColumns, sameWork } from "./store-writes.js";

export interface PostgresJobStoreOptions extends UnfinishedJobLimits {
  /** `postgres://user:password@host:port/database`. */
  url: string;
  /** PostgreSQL schema holding the store's tables; created if missing. Default: "animaworks_tool". */
  schema?: string;
  /** Connections this store opens at most. Default: 4. */
  maxConnections?: number;
  /** Longest wait for a connection (to the server, or a free one from the pool), ms. Default: 5,000. */
  connectTimeoutMs?: number;
  /** Clock, epoch ms. Default: `Date.now`. Tests pass a fake one. */
  now?: () => number;
}

/**
 * A `JobStore` on PostgreSQL, shared by workers on many machines (the same contract as the SQLite store;
 * test/jobs/contract.ts runs against both).
 *
 * Exclusivity: claims run in a transaction holding a transaction-scoped advisory lock, so that claims of
 * all workers are serialised: the round-robin turns and the per-Anima limits are counted across workers,
 * and a job is never handed to two of them. Every other write is a single statement fenced by the lease
 * (id, owner, attempt) or by the job's status, so it needs no lock of its own.
 *
 * Durability: a write resolves after PostgreSQL committed it (`synchronous_commit` as the server has it;
 * its default, `on`, waits for the WAL flush).
 */
export class PostgresJobStore implements JobStore {
  private readonly db: JobDatabase;
  private readonly clock: () => number;
  private readonly schema: string;
  private readonly notifications: StoreNotifications;
  private readonly limits: Required<UnfinishedJobLimits>;

  constructor(private readonly options: PostgresJobStoreOptions) {
    this.limits = resolveUnfinishedLimits(options);
    this.schema = checkSchemaName(options.schema ?? "animaworks_tool");
    this.clock = options.now ?? Date.now;
    this.db = new JobDatabase({
      url: options.url,
      schema: this.schema,
      ...(options.maxConnections !== undefined ? { maxConnections: options.maxConnections } : {}),
      ...(options.connectTimeoutMs !== undefined ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
    });
    this.notifications = new StoreNotifications(this.db, this.schema);
  }

  /** Opens the pool and creates or migrates the schema. Every method calls it; call it to fail early. */
  open(): Promise<void> {
    return this.db.open();
  }

  async submit(input: SubmitJobInput): Promise<SubmitResult> {
    const job = normaliseSubmit(input);
    for (let tries = 0; ; tries++) {
      try {
        // Without an idempotency key, one statement (one round trip, its own transaction): the insert only
        // happens if the bundle is stored and the Anima's bounds hold (submit_job, postgres-schema.ts), and the
        // notification goes out when it commits.
        if (job.idempotencyKey === undefined) return await this.db.run((client) => this.insert(client, job, false));
        return await this.db.transaction(async (client) => {
          const existing = await one(client, "SELECT * FROM jobs WHERE anima = $1 AND idempotency_key = $2", [job.anima, job.idempotencyKey]);
          return existing ? { job: sameWork(pgRowToJob(existing), job), created: false } : this.insert(client, job, true);
        });
      } catch (error) {
        // A 48-bit id collided, or another submit with the same idempotency key won the race (the unique
        // index, or submit_job's look after the Anima's lock, which a Busy must not pre-empt): again (the
        // second time finds its job).
        if (tries < 5 && isUniqueViolation(error)) continue;
        throw error;
      }
    }
  }

  /** Inserts a job; `inTransaction`: the caller commits later, so the notification goes with it. */
  private async insert(client: pg.PoolClient, job: ReturnType<typeof normaliseSubmit>, inTransaction: boolean): Promise<SubmitResult> {
    const now = this.clock();
    const id = newJobId();
    // Not every submit of a burst notifies (see postgres-notify.ts): one that does not is followed by one soon.
    const notify = this.notifications.submitNotifies(inTransaction);
    const argsBytes = Buffer.byteLength(job.argsJson);
    const submitted = await client.query<{ outcome: string; unfinished_jobs: number; unfinished_args_bytes: number }>(
      "SELECT * FROM submit_job($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
      [
        id,
        job.anima,
        job.tool,
        job.action,
        job.schemaName,
        job.argsJson,
        job.bundleHash,
        job.priority,
        job.idempotencyKey ?? null,
        job.maxAttempts,
        job.retryBackoffMs,
        job.timeoutMs,
        now,
        argsBytes,
        this.limits.maxUnfinishedJobsPerAnima,
        this.limits.maxUnfinishedArgsBytesPerAnima,
        notify ? this.notifications.channel : null,
      ],
    );
    const row = submitted.rows[0];
    if (row?.outcome === "no-bundle") throw new ToolHostError("NotFound", `bundle ${job.bundleHash} is not stored`, "putBundle before submitting");
    if (row?.outcome !== "queued") {
      checkUnfinishedLimits(job.anima, { jobs: row?.unfinished_jobs ?? 0, argsBytes: row?.unfinished_args_bytes ?? 0 }, argsBytes, this.limits);
      throw new ToolHostError("ExecutionError", `the job store answered a submit with "${String(row?.outcome)}"`, undefined, "host");
    }
    if (!notify) this.notifications.soon();
    const created: Job = { ...job, id, status: "queued", attempts: 0, submittedAt: now, cancelRequested: false };
    if (job.idempotencyKey === undefined) delete created.idempotencyKey;
    return { job: created, created: true };
  }

  async get(anima: string, id: string): Promise<Job | undefined> {
    if (namesNoJob(anima, id)) return undefined;
    const row = await this.db.queryOne("SELECT * FROM jobs WHERE id = $1", [id]);
    return row && row.anima === anima ? pgRowToJob(row) : undefined;
  }

  async list(anima: string, options: ListJobsOptions = {}): Promise<Job[]> {
    const limit = listLimit(options.limit);
    if (namesNoJob(anima)) return [];
    const statuses = options.status === undefined ? [...JOB_STATUSES] : [options.status].flat();
    const rows = await this.db.queryRows(`SELECT ${PG_LISTED_COLUMNS} FROM jobs WHERE anima = $1 AND status = ANY($2) ORDER BY seq DESC LIMIT $3`, [
      anima,
      statuses,
      limit,
    ]);
    return rows.map(pgRowToListedJob);
  }

  /**
   * One round trip: `claim_jobs` (postgres-schema.ts) takes the claim lock on the server, picks the jobs
   * in round-robin order, moves them to `running` and records the turns, in claim order.
   */
  async claim(request: ClaimRequest): Promise<Job[]> {
    if (request.limit <= 0) return [];
    const now = this.clock();
    const perAnima = Number.isFinite(request.perAnimaLimit ?? Number.POSITIVE_INFINITY) ? (request.perAnimaLimit as number) : 2_147_483_647;
    const rows = await this.db.queryRows("SELECT * FROM claim_jobs($1, $2, $3, $4, $5)", [request.owner, now, now + request.leaseMs, request.limit, perAnima]);
    return rows.map(pgRowToJob);
  }

  async renewLeases(leases: readonly JobLease[], leaseMs: number): Promise<LeaseState[]> {
    if (leases.length === 0) return [];
    const expires = this.clock() + leaseMs;
    // One statement for the whole batch; each lease is matched by its position (the same job may appear
    // under several owners or attempts, and only the one that holds it is renewed).
    const rows = await this.db.queryRows<{ n: number; cancel_requested: number }>(
      `UPDATE jobs j SET lease_expires_at = $4
         FROM unnest($1::text[], $2::text[], $3::int[]) WITH ORDINALITY AS l(id, owner, attempt, n)
        WHERE j.id = l.id AND j.status = 'running' AND j.lease_owner = l.owner AND j.attempts = l.attempt
        RETURNING l.n, j.cancel_requested`,
      [leases.map((l) => l.id), leases.map((l) => l.owner), leases.map((l) => l.attempt), expires],
    );
    const held = new Map(rows.map((row) => [Number(row.n), row.cancel_requested !== 0]));
    return leases.map((_, index) => {
      const cancelRequested = held.get(index + 1);
      return cancelRequested === undefined ? { held: false, cancelRequested: false } : { held: true, cancelRequested };
    });
  }

  async reportProgress(lease: JobLease, progress: JobProgress): Promise<boolean> {
    const { fraction, message } = normaliseProgress(progress);
    const result = await this.db.run((client) =>
      client.query(`UPDATE jobs SET progress_fraction = $4, progress_message = $5 WHERE ${LEASE_MATCH}`, [
        lease.id,
        lease.owner,
        lease.attempt,
        fraction,
        toPgText(message),
      ]),
    );
    return result.rowCount === 1;
  }

  async complete(lease: JobLease, outcome: JobOutcome): Promise<Job | undefined> {
    const c = outcomeColumns(outcome);
    const row = await this.db.queryOne(
      `UPDATE jobs SET status = $4, finished_at = $5, result = $6, result_structured = $7, error_type = $8, error_message = $9,
         error_fault = $10, error_hint = $11, result_bytes = $12, lease_owner = NULL, lease_expires_at = NULL
       WHERE ${LEASE_MATCH} RETURNING *`,
      [
        lease.id,
        lease.owner,
        lease.attempt,
        outcome.status,
        this.clock(),
        toPgText(c.result),
        c.resultStructured,
        c.errorType,
        toPgText(c.errorMessage),
        c.errorFault,
        toPgText(c.errorHint),
        c.resultBytes,
      ],
    );
    return row ? pgRowToJob(row) : undefined;
  }

  async requestCancel(anima: string, id: string): Promise<Job | undefined> {
    if (namesNoJob(anima, id)) return undefined;
    return this.db.transaction(async (client) => {
      const row = await one(client, "SELECT * FROM jobs WHERE id = $1 FOR UPDATE", [id]);
      if (!row || row.anima !== anima) return undefined;
      if (row.status === "queued") {
        return pgRowToJob(
          (await one(client, "UPDATE jobs SET status = 'cancelled', finished_at = $1, not_before = 0 WHERE seq = $2 RETURNING *", [
            this.clock(),
            row.seq,
          ])) as JobRow,
        );
      }
      if (row.status === "running") {
        await this.notifications.send(client, `cancel:${row.id}`);
        return pgRowToJob((await one(client, "UPDATE jobs SET cancel_requested = 1 WHERE seq = $1 RETURNING *", [row.seq])) as JobRow);
      }
      return pgRowToJob(row);
    });
  }

  recoverExpiredLeases(): Promise<RecoveryResult> {
    return this.db.transaction(async (client) => {
      const now = this.clock();
      const result: RecoveryResult = { requeued: [], ended: [] };
      // SKIP LOCKED: a job another worker is recovering (or completing) right now is left to it.
      const expired = await client.query<JobRow>("SELECT * FROM jobs WHERE status = 'running' AND lease_expires_at <= $1 ORDER BY seq FOR UPDATE SKIP LOCKED", [
        now,
      ]);
      const endLost = async (row: JobRow, status: "cancelled" | "interrupted", error: JobError | null) =>
        pgRowToJob(
          (await one(
            client,
            `UPDATE jobs SET status = $2, finished_at = $3, error_type = $4, error_message = $5, error_fault = $6, lease_owner = NULL,
               lease_expires_at = NULL WHERE seq = $1 RETURNING *`,
            [row.seq, status, now, error?.type ?? null, toPgText(error?.message ?? null), error?.fault ?? null],
          )) as JobRow,
        );
      if (expired.rows.some((row) => row.cancel_requested === 0 && row.attempts < row.max_attempts)) await this.notifications.send(client, "runnable");
      for (const row of expired.rows) {
        if (row.cancel_requested !== 0) {
          result.ended.push(await endLost(row, "cancelled", null));
        } else if (row.attempts < row.max_attempts) {
          const notBefore = now + retryDelayMs(row.retry_backoff_ms, row.attempts);
          const requeued = await one(
            client,
            "UPDATE jobs SET status = 'queued', not_before = $1, lease_owner = NULL, lease_expires_at = NULL WHERE seq = $2 RETURNING *",
            [notBefore, row.seq],
          );
          result.requeued.push(pgRowToJob(requeued as JobRow));
        } else {
          result.ended.push(
            await endLost(row, "interrupted", { type: "ExecutionError", message: interruptedMessage(row.attempts, row.max_attempts), fault: "host" }),
          );
        }
      }
      return result;
    });
  }

  async pendingNotices(options: PendingNoticesOptions): Promise<Job[]> {
    const now = this.clock();
    const rows = await this.db.queryRows(
      `SELECT ${PG_LISTED_COLUMNS} FROM jobs WHERE finished_at IS NOT NULL AND notified_at IS NULL AND notice_retry_at <= $1 AND finished_at <= $2
        ORDER BY notice_retry_at, finished_at, seq LIMIT $3`,
      [options.includePostponed ? Number.MAX_SAFE_INTEGER : now, now - options.minAgeMs, options.limit],
    );
    return rows.map(pgRowToListedJob);
  }

  async postponeNotices(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    // The delay doubles per failure from firstMs (the shift is capped well past maxMs, and below overflow).
    await this.db.run((client) =>
      client.query(
        `UPDATE jobs SET notice_failures = notice_failures + 1, notice_retry_at = $2 + LEAST($3::bigint, $4::bigint << LEAST(notice_failures, 30))
          WHERE id = ANY($1) AND notified_at IS NULL`,
        [[...ids], this.clock(), NOTICE_RETRY.maxMs, NOTICE_RETRY.firstMs],
      ),
    );
  }

  async markNotified(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.db.run((client) => client.query("UPDATE jobs SET notified_at = $1 WHERE id = ANY($2) AND notified_at IS NULL", [this.clock(), [...ids]]));
  }

  purgeFinished(olderThanMs: number): Promise<PurgeResult> {
    return this.db.transaction(async (client) => {
      const cutoff = this.clock() - olderThanMs;
      const jobs = (await client.query("DELETE FROM jobs WHERE finished_at IS NOT NULL AND finished_at < $1", [cutoff])).rowCount ?? 0;
      // A bundle stored moments ago for a submit still on its way must survive: only bundles untouched
      // for as long as the retention period and used by no kept job go.
      const bundles =
        (await client.query("DELETE FROM bundles b WHERE touched_at < $1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.bundle_hash = b.hash)", [cutoff]))
          .rowCount ?? 0;
      return { jobs, bundles };
    });
  }

  async putBundle(hash: string, code: string): Promise<void> {
    checkBundleHash(hash, code);
    await this.db.run((client) =>
      client.query("INSERT INTO bundles (hash, code, touched_at) VALUES ($1, $2, $3) ON CONFLICT (hash) DO UPDATE SET touched_at = EXCLUDED.touched_at", [
        hash,
        code,
        this.clock(),
      ]),
    );
  }

  async getBundle(hash: string): Promise<string | undefined> {
    return (await this.db.queryOne<{ code: string }>("SELECT code FROM bundles WHERE hash = $1", [hash]))?.code;
  }

  async queueStatus(): Promise<QueueStatus> {
    const now = this.clock();
    const row = (
      await this.db.run((client) =>
        client.query<{ queued: number; runnable: number; running: number; next: number | null }>(
          `SELECT
           (SELECT COUNT(*)::int FROM jobs WHERE status = 'queued') AS queued,
           (SELECT COUNT(*)::int FROM jobs WHERE status = 'queued' AND not_before <= $1) AS runnable,
           (SELECT COUNT(*)::int FROM jobs WHERE status = 'running') AS running,
           (SELECT MIN(not_before) FROM jobs WHERE status = 'queued' AND not_before > $1) AS next`,
          [now],
        ),
      )
    ).rows[0] as { queued: number; runnable: number; running: number; next: number | null };
    const status: QueueStatus = { queued: row.queued, runnable: row.runnable, running: row.running };
    if (row.next !== null) status.nextNotBefore = row.next;
    return status;
  }

  /** Wakes `listener` on submits and cancels (postgres-connection.ts `listen`). */
  async subscribe(listener: (event: StoreEvent) => void): Promise<() => Promise<void>> {
    if (this.db.closed) throw closedError();
    await this.open();
    return listen(
      { url: this.options.url, connectTimeoutMs: this.options.connectTimeoutMs ?? 5_000, channel: this.notifications.channel, closed: () => this.db.closed },
      listener,
    );
  }

  async close(): Promise<void> {
    if (this.db.closed) return;
    this.db.closed = true;
    await this.notifications.flush();
    await this.db.end();
  }
}

const LEASE_MATCH = "id = $1 AND status = 'running' AND lease_owner = $2 AND attempts = $3";

async function one(client: pg.PoolClient, sql: string, values: unknown[]): Promise<JobRow | undefined> {
  return (await client.query<JobRow>(sql, values)).rows[0];
}

function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: string } | undefined)?.code === "23505";
}

export { describeServer };
