import type Database from "better-sqlite3";
import { ToolHostError } from "../errors.js";
import { LISTED_TEXT_CHARS, listedColumns } from "./limits.js";
import { JOB_STATUSES, type Job, type JobStatus, toJobError } from "./store.js";

/**
 * Schema of the embedded job store, versioned with `PRAGMA user_version`. Migration N takes a database at
 * version N-1 to N; they run inside one write transaction at open, so two processes opening a new file
 * at once cannot both apply them. Never edit a shipped migration: append a new one.
 */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE bundles (
    hash TEXT PRIMARY KEY,
    code TEXT NOT NULL,
    touched_at INTEGER NOT NULL
  );
  CREATE TABLE jobs (
    seq INTEGER PRIMARY KEY,            -- insertion order: "oldest first" and "newest first"
    id TEXT NOT NULL UNIQUE,
    anima TEXT NOT NULL,
    tool TEXT NOT NULL,
    action TEXT NOT NULL,
    schema_name TEXT NOT NULL,
    args_json TEXT NOT NULL,
    bundle_hash TEXT NOT NULL REFERENCES bundles (hash),
    priority INTEGER NOT NULL,
    idempotency_key TEXT,
    status TEXT NOT NULL CHECK (status IN ('queued','running','succeeded','failed','cancelled','interrupted')),
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    retry_backoff_ms INTEGER NOT NULL,
    timeout_ms INTEGER NOT NULL,
    submitted_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    not_before INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    error_type TEXT,
    error_message TEXT,
    progress_fraction REAL,
    progress_message TEXT,
    lease_owner TEXT,
    lease_expires_at INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    notified_at INTEGER
  );
  CREATE UNIQUE INDEX jobs_idempotency ON jobs (anima, idempotency_key) WHERE idempotency_key IS NOT NULL;
  -- Partial indexes keep the hot queries proportional to queued/running work, not to history.
  CREATE INDEX jobs_queued ON jobs (anima, priority DESC, seq) WHERE status = 'queued';
  CREATE INDEX jobs_running ON jobs (anima) WHERE status = 'running';
  CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE status = 'running';
  CREATE INDEX jobs_by_anima ON jobs (anima, seq);
  CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
  CREATE INDEX jobs_unnotified ON jobs (finished_at) WHERE finished_at IS NOT NULL AND notified_at IS NULL;
  CREATE INDEX jobs_bundle ON jobs (bundle_hash);
  -- Round-robin state shared by every worker: the claim turn at which each Anima was last served.
  CREATE TABLE anima_turns (
    anima TEXT PRIMARY KEY,
    turn INTEGER NOT NULL
  );
  `,
  // An error's fault and hint, so a job keeps its ErrorInfo whole (errors.ts).
  `
  ALTER TABLE jobs ADD COLUMN error_fault TEXT;
  ALTER TABLE jobs ADD COLUMN error_hint TEXT;
  `,
  // Whether the result is an object's JSON (1) or text (0), so a job's result reads as a direct call's
  // does; NULL for results recorded before (view.ts reads those from their text).
  `
  ALTER TABLE jobs ADD COLUMN result_structured INTEGER;
  `,
  // The UTF-8 sizes of a job's arguments and result, so that listings and the per-Anima bounds (limits.ts)
  // need not read them; NULL result_bytes: no result.
  `
  ALTER TABLE jobs ADD COLUMN args_bytes INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE jobs ADD COLUMN result_bytes INTEGER;
  UPDATE jobs SET args_bytes = length(CAST(args_json AS BLOB)), result_bytes = length(CAST(result AS BLOB));
  `,
  // Notices that could not be written are tried again with a backoff (store.ts NOTICE_RETRY): how often
  // each failed, and when it is due again (0: never failed). Pending notices are read due first, through
  // an index in that order; it replaces jobs_unnotified (by finish time alone: a read of the due ones
  // would walk past every postponed one).
  `
  ALTER TABLE jobs ADD COLUMN notice_failures INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE jobs ADD COLUMN notice_retry_at INTEGER NOT NULL DEFAULT 0;
  DROP INDEX IF EXISTS jobs_unnotified;
  CREATE INDEX IF NOT EXISTS jobs_notices_due ON jobs (notice_retry_at, finished_at, seq) WHERE finished_at IS NOT NULL AND notified_at IS NULL;
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

export function migrate(db: Database.Database): void {
  db.transaction(() => {
    const current = db.pragma("user_version", { simple: true }) as number;
    if (current > SCHEMA_VERSION) {
      throw new ToolHostError(
        "LoadError",
        `job store schema version ${current} is newer than this host understands (${SCHEMA_VERSION})`,
        "upgrade animaworks-tool, or point it at another job database",
      );
    }
    for (let version = current; version < SCHEMA_VERSION; version++) db.exec(MIGRATIONS[version]!);
    if (current !== SCHEMA_VERSION) db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
}

export interface JobRow {
  seq: number;
  id: string;
  anima: string;
  tool: string;
  action: string;
  schema_name: string;
  args_json: string;
  bundle_hash: string;
  priority: number;
  idempotency_key: string | null;
  status: string;
  attempts: number;
  max_attempts: number;
  retry_backoff_ms: number;
  timeout_ms: number;
  submitted_at: number;
  started_at: number | null;
  finished_at: number | null;
  not_before: number;
  result: string | null;
  /** 1: `result` is an object's JSON; 0: text; null (or absent, in a row read before the migration): not recorded. */
  result_structured?: number | null;
  error_type: string | null;
  error_message: string | null;
  error_fault: string | null;
  error_hint: string | null;
  progress_fraction: number | null;
  progress_message: string | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  cancel_requested: number;
  notified_at: number | null;
  /** UTF-8 bytes of the whole arguments (absent in a row read before the migration that added it). */
  args_bytes?: number;
  /** UTF-8 bytes of the whole result; null without one. */
  result_bytes?: number | null;
  /** Failed tries to write the notice, and when it is tried again (epoch ms; 0: due). */
  notice_failures?: number;
  notice_retry_at?: number;
}

export function rowToJob(row: JobRow): Job {
  const job: Job = {
    id: row.id,
    anima: row.anima,
    tool: row.tool,
    action: row.action,
    schemaName: row.schema_name,
    argsJson: row.args_json,
    bundleHash: row.bundle_hash,
    priority: row.priority,
    status: toStatus(row.status),
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    retryBackoffMs: row.retry_backoff_ms,
    timeoutMs: row.timeout_ms,
    submittedAt: row.submitted_at,
    cancelRequested: row.cancel_requested !== 0,
  };
  if (row.idempotency_key !== null) job.idempotencyKey = row.idempotency_key;
  if (row.started_at !== null) job.startedAt = row.started_at;
  if (row.finished_at !== null) job.finishedAt = row.finished_at;
  if (row.not_before > 0) job.notBefore = row.not_before;
  if (row.result !== null) job.result = row.result;
  if (row.result !== null && row.result_structured !== null && row.result_structured !== undefined) job.resultStructured = row.result_structured !== 0;
  if (row.error_type !== null) job.error = toJobError(row);
  if (row.progress_fraction !== null) {
    job.progress = { fraction: row.progress_fraction, message: row.progress_message ?? "" };
  }
  if (row.lease_owner !== null) job.leaseOwner = row.lease_owner;
  if (row.lease_expires_at !== null) job.leaseExpiresAt = row.lease_expires_at;
  if (row.notified_at !== null) job.notifiedAt = row.notified_at;
  return job;
}

/** A row of a listing (`LISTED_COLUMNS`): its texts may be cut, and `listed` gives their whole sizes. */
export function rowToListedJob(row: JobRow): Job {
  const job = rowToJob(row);
  job.listed = { argsBytes: row.args_bytes ?? Buffer.byteLength(row.args_json) };
  if (typeof row.result_bytes === "number") job.listed.resultBytes = row.result_bytes;
  return job;
}

/**
 * The columns of a listing (`list`, `pendingNotices`), in `rowToJob`'s names: every long text whole when
 * it is short, else its first `LISTED_TEXT_CHARS` characters, so that what a listing reads is bounded by
 * its length, not by what the jobs hold (limits.ts). The test is on bytes, which are at least as many as
 * characters. (SQLite's substr stops at a U+0000 in the text: a cut text that holds one is cut there.)
 */
export const LISTED_COLUMNS = listedColumns(
  (column, bytes = textBytes(column)) =>
    `CASE WHEN ${bytes} <= ${LISTED_TEXT_CHARS} THEN ${column} ELSE substr(${column}, 1, ${LISTED_TEXT_CHARS}) END AS ${column}`,
  textBytes,
);

/** SQL for the UTF-8 bytes of a text column. */
export function textBytes(column: string): string {
  return `length(CAST(${column} AS BLOB))`;
}

function toStatus(value: string): JobStatus {
  // The CHECK constraint keeps anything else out; this guards a hand-edited database.
  if ((JOB_STATUSES as readonly string[]).includes(value)) return value as JobStatus;
  throw new ToolHostError("LoadError", `job store holds an unknown job status "${value}"`);
}
