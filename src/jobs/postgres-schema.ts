import type { PoolClient } from "pg";
import { ToolHostError } from "../errors.js";
import { storedSizes } from "./limits.js";

/**
 * Schema of the PostgreSQL job store, in its own PostgreSQL schema (default `animaworks_tool`), versioned
 * in `schema_version`. Migration N takes version N-1 to N. They run in one transaction holding an
 * advisory lock, so that several workers starting at once against an empty database apply them once.
 * Never edit a shipped migration: append a new one.
 *
 * Columns mirror the SQLite store's (sqlite-schema.ts), so both read back through the same `rowToJob`:
 * times are epoch ms in `bigint` (read as numbers), `cancel_requested` is 0/1.
 */
/** Advisory lock keys (one namespace for this project): migrations, claims and one Anima's submits (see the store). */
export const MIGRATION_LOCK = 0x61770001;
export const CLAIM_LOCK = 0x61770002;
export const SUBMIT_LOCK = 0x61770003;

/**
 * A submit in one round trip (see PostgresJobStore.submit), refused ('no-bundle', 'full') with nothing written
 * unless the bundle is stored and the Anima's unfinished jobs stay within the bounds passed (limits.ts).
 * The Anima's submits take turns from the lock to their commit, and each statement of a VOLATILE function
 * reads a fresh snapshot (under READ COMMITTED, which every connection of the store runs whatever the
 * server's default: postgres-pool.ts): the count sees every submit of hers committed before, so
 * concurrent submits cannot pass a bound together. Returns the unfinished jobs and their
 * argument bytes before this one, and notifies `p_channel` (unless null) when it queued the job.
 */
const SUBMIT_JOB_FUNCTION = `
  CREATE OR REPLACE FUNCTION submit_job(p_id text, p_anima text, p_tool text, p_action text, p_schema_name text, p_args_json text,
    p_bundle_hash text, p_priority integer, p_idempotency_key text, p_max_attempts integer, p_retry_backoff_ms bigint,
    p_timeout_ms bigint, p_now bigint, p_args_bytes bigint, p_max_jobs bigint, p_max_args_bytes bigint, p_channel text)
  RETURNS TABLE (outcome text, unfinished_jobs bigint, unfinished_args_bytes bigint)
  LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $submit$
  DECLARE
    n bigint;
    total bigint;
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM bundles WHERE hash = p_bundle_hash) THEN
      RETURN QUERY SELECT 'no-bundle'::text, 0::bigint, 0::bigint;
      RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(${SUBMIT_LOCK}, hashtext(current_schema() || '/' || p_anima));
    -- Each status through its own partial index, not the Anima's whole history.
    SELECT COUNT(*), COALESCE(SUM(u.args_bytes), 0) INTO n, total FROM (
      SELECT j.args_bytes FROM jobs j WHERE j.anima = p_anima AND j.status = 'queued'
      UNION ALL
      SELECT j.args_bytes FROM jobs j WHERE j.anima = p_anima AND j.status = 'running') u;
    IF n >= p_max_jobs OR total + p_args_bytes > p_max_args_bytes THEN
      RETURN QUERY SELECT 'full'::text, n, total;
      RETURN;
    END IF;
    INSERT INTO jobs (id, anima, tool, action, schema_name, args_json, bundle_hash, priority, idempotency_key, status, max_attempts,
      retry_backoff_ms, timeout_ms, submitted_at, args_bytes)
    VALUES (p_id, p_anima, p_tool, p_action, p_schema_name, p_args_json, p_bundle_hash, p_priority, p_idempotency_key, 'queued',
      p_max_attempts, p_retry_backoff_ms, p_timeout_ms, p_now, p_args_bytes);
    IF p_channel IS NOT NULL THEN
      PERFORM pg_notify(p_channel, 'runnable');
    END IF;
    RETURN QUERY SELECT 'queued'::text, n, total;
  END
  $submit$;
  `;

/** A job's argument bytes as submit_job's count reads them (its columns unqualified: no variable shares their names). */
const PG_ARGS_BYTES = storedSizes((column) => `octet_length(${column})`).argsBytes;

/**
 * submit_job as migration 8 makes it (otherwise as above): after the Anima's lock, a job under the same idempotency key (one
 * committed by a racing submit while this one waited for the lock) raises unique_violation, before the
 * bounds are counted. The store's submit runs again on it (postgres-store.ts) and its lookup then finds
 * that job: the answer SQLite gives, where submits take turns whole. Before, the store looked the key up
 * before the lock, so a racing resubmit of an Anima at her bound was refused as Busy instead. A raise,
 * not a new outcome: a process of an older build still running reads it as it read the unique index's.
 * The count measures arguments whose size an older build left unknown (limits.ts `storedSizes`).
 */
const SUBMIT_JOB_FUNCTION_V8 = `
  CREATE OR REPLACE FUNCTION submit_job(p_id text, p_anima text, p_tool text, p_action text, p_schema_name text, p_args_json text,
    p_bundle_hash text, p_priority integer, p_idempotency_key text, p_max_attempts integer, p_retry_backoff_ms bigint,
    p_timeout_ms bigint, p_now bigint, p_args_bytes bigint, p_max_jobs bigint, p_max_args_bytes bigint, p_channel text)
  RETURNS TABLE (outcome text, unfinished_jobs bigint, unfinished_args_bytes bigint)
  LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $submit$
  DECLARE
    n bigint;
    total bigint;
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM bundles WHERE hash = p_bundle_hash) THEN
      RETURN QUERY SELECT 'no-bundle'::text, 0::bigint, 0::bigint;
      RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(${SUBMIT_LOCK}, hashtext(current_schema() || '/' || p_anima));
    IF p_idempotency_key IS NOT NULL AND EXISTS (SELECT 1 FROM jobs j WHERE j.anima = p_anima AND j.idempotency_key = p_idempotency_key) THEN
      RAISE unique_violation USING MESSAGE = 'a job of this Anima already has this idempotency key';
    END IF;
    -- Each status through its own partial index, not the Anima's whole history; args_bytes 0 (a job an
    -- older build wrote) is measured (limits.ts storedSizes).
    SELECT COUNT(*), COALESCE(SUM(u.args_bytes), 0) INTO n, total FROM (
      SELECT ${PG_ARGS_BYTES} AS args_bytes FROM jobs j WHERE j.anima = p_anima AND j.status = 'queued'
      UNION ALL
      SELECT ${PG_ARGS_BYTES} AS args_bytes FROM jobs j WHERE j.anima = p_anima AND j.status = 'running') u;
    IF n >= p_max_jobs OR total + p_args_bytes > p_max_args_bytes THEN
      RETURN QUERY SELECT 'full'::text, n, total;
      RETURN;
    END IF;
    INSERT INTO jobs (id, anima, tool, action, schema_name, args_json, bundle_hash, priority, idempotency_key, status, max_attempts,
      retry_backoff_ms, timeout_ms, submitted_at, args_bytes)
    VALUES (p_id, p_anima, p_tool, p_action, p_schema_name, p_args_json, p_bundle_hash, p_priority, p_idempotency_key, 'queued',
      p_max_attempts, p_retry_backoff_ms, p_timeout_ms, p_now, p_args_bytes);
    IF p_channel IS NOT NULL THEN
      PERFORM pg_notify(p_channel, 'runnable');
    END IF;
    RETURN QUERY SELECT 'queued'::text, n, total;
  END
  $submit$;
  `;

/**
 * Claims in one round trip (see PostgresJobStore.claim): the lock is taken on the server and held only
 * while this runs, never across the network. Round-robin as the SQLite store does it step by step: the
 * k-th job of every Anima comes before the (k+1)-th of any; within a round, the Anima served longest ago
 * (lowest turn) first, ties by its oldest runnable job; each Anima's jobs by priority, then age; an
 * Anima's running jobs count against its limit. Each served Anima's turn becomes the last turn handed
 * out plus the position of its last job in this claim.
 * `columns` lists the table's columns, in order, as the table had them when the migration ran.
 */
function claimJobsFunction(create: "CREATE FUNCTION" | "CREATE OR REPLACE FUNCTION", columns: string): string {
  return `
  ${create} claim_jobs(p_owner text, p_now bigint, p_expires bigint, p_limit integer, p_per_anima integer)
  RETURNS SETOF jobs LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $claim$
  DECLARE
    last_turn bigint;
  BEGIN
    PERFORM pg_advisory_xact_lock(${CLAIM_LOCK}, hashtext(current_schema()));
    SELECT COALESCE(MAX(turn), 0) INTO last_turn FROM anima_turns;
    -- Work proportional to the Animas with queued jobs and the jobs claimed, not to the backlog: the
    -- Animas by a skip scan of the queued index, then each Anima's first jobs through the same index.
    RETURN QUERY
    WITH RECURSIVE animas AS (
      (SELECT j.anima FROM jobs j WHERE j.status = 'queued' ORDER BY j.anima LIMIT 1)
      UNION ALL
      SELECT (SELECT j.anima FROM jobs j WHERE j.status = 'queued' AND j.anima > a.anima ORDER BY j.anima LIMIT 1)
        FROM animas a WHERE a.anima IS NOT NULL),
    running AS (
      SELECT anima, COUNT(*)::integer AS n FROM jobs WHERE status = 'running' GROUP BY anima),
    queued AS (
      SELECT q.seq, a.anima, q.rank FROM animas a CROSS JOIN LATERAL (
        SELECT j.seq, row_number() OVER (ORDER BY j.priority DESC, j.seq) AS rank FROM jobs j
         WHERE j.status = 'queued' AND j.anima = a.anima AND j.not_before <= p_now
         ORDER BY j.priority DESC, j.seq LIMIT p_limit) q
      WHERE a.anima IS NOT NULL),
    eligible AS (
      SELECT q.seq, q.anima, q.rank, COALESCE(t.turn, 0) AS turn,
             min(q.seq) FILTER (WHERE q.rank = 1) OVER (PARTITION BY q.anima) AS head
        FROM queued q LEFT JOIN anima_turns t ON t.anima = q.anima LEFT JOIN running r ON r.anima = q.anima
       WHERE q.rank <= LEAST(p_limit, p_per_anima - COALESCE(r.n, 0))),
    chosen AS (
      SELECT seq, anima, row_number() OVER (ORDER BY rank, turn, head) AS pos FROM eligible
       ORDER BY rank, turn, head LIMIT p_limit),
    turns AS (
      INSERT INTO anima_turns (anima, turn)
      SELECT anima, last_turn + MAX(pos) FROM chosen GROUP BY anima
      ON CONFLICT (anima) DO UPDATE SET turn = EXCLUDED.turn),
    claimed AS (
      UPDATE jobs j SET status = 'running', attempts = j.attempts + 1, started_at = p_now, lease_owner = p_owner,
             lease_expires_at = p_expires, progress_fraction = NULL, progress_message = NULL
        FROM chosen c WHERE j.seq = c.seq AND j.status = 'queued'
      RETURNING j.*, c.pos)
    SELECT ${columns}
      FROM claimed ORDER BY pos;
  END
  $claim$;
  `;
}

/**
 * The jobs table's columns as claim_jobs returns them, after each migration that added some (claim_jobs
 * returns the table's row type, so each such migration redefines it). Each list is its predecessor plus
 * what its migration added: a migration's SQL never changes once released.
 */
const JOB_COLUMNS_V2 = `seq, id, anima, tool, action, schema_name, args_json, bundle_hash, priority, idempotency_key, status,
           attempts, max_attempts, retry_backoff_ms, timeout_ms, submitted_at, started_at, finished_at, not_before,
           result, error_type, error_message, progress_fraction, progress_message, lease_owner, lease_expires_at,
           cancel_requested, notified_at`;
const JOB_COLUMNS_V3 = `${JOB_COLUMNS_V2}, error_fault, error_hint`;
const JOB_COLUMNS_V4 = `${JOB_COLUMNS_V3}, result_structured`;
const JOB_COLUMNS_V5 = `${JOB_COLUMNS_V4}, args_bytes, result_bytes`;
const JOB_COLUMNS_V7 = `${JOB_COLUMNS_V5}, notice_failures, notice_retry_at`;

const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE bundles (
    hash text PRIMARY KEY,
    code text NOT NULL,
    touched_at bigint NOT NULL
  );
  CREATE TABLE jobs (
    seq bigserial PRIMARY KEY,
    id text NOT NULL UNIQUE,
    anima text NOT NULL,
    tool text NOT NULL,
    action text NOT NULL,
    schema_name text NOT NULL,
    args_json text NOT NULL,
    bundle_hash text NOT NULL REFERENCES bundles (hash),
    priority integer NOT NULL,
    idempotency_key text,
    status text NOT NULL CHECK (status IN ('queued','running','succeeded','failed','cancelled','interrupted')),
    attempts integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL,
    retry_backoff_ms bigint NOT NULL,
    timeout_ms bigint NOT NULL,
    submitted_at bigint NOT NULL,
    started_at bigint,
    finished_at bigint,
    not_before bigint NOT NULL DEFAULT 0,
    result text,
    error_type text,
    error_message text,
    progress_fraction double precision,
    progress_message text,
    lease_owner text,
    lease_expires_at bigint,
    cancel_requested smallint NOT NULL DEFAULT 0,
    notified_at bigint
  );
  CREATE UNIQUE INDEX jobs_idempotency ON jobs (anima, idempotency_key) WHERE idempotency_key IS NOT NULL;
  CREATE INDEX jobs_queued ON jobs (anima, priority DESC, seq) WHERE status = 'queued';
  CREATE INDEX jobs_running ON jobs (anima) WHERE status = 'running';
  CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE status = 'running';
  CREATE INDEX jobs_by_anima ON jobs (anima, seq);
  CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
  CREATE INDEX jobs_unnotified ON jobs (finished_at) WHERE finished_at IS NOT NULL AND notified_at IS NULL;
  CREATE INDEX jobs_bundle ON jobs (bundle_hash);
  CREATE TABLE anima_turns (
    anima text PRIMARY KEY,
    turn bigint NOT NULL
  );
  `,
  claimJobsFunction("CREATE FUNCTION", JOB_COLUMNS_V2),
  // An error's fault and hint, so a job keeps its ErrorInfo whole (errors.ts). claim_jobs returns the
  // table's row type, so it is redefined with the new columns.
  `
  ALTER TABLE jobs ADD COLUMN error_fault text, ADD COLUMN error_hint text;
  ` + claimJobsFunction("CREATE OR REPLACE FUNCTION", JOB_COLUMNS_V3),
  // Whether the result is an object's JSON (1) or text (0), so a job's result reads as a direct call's
  // does; NULL for results recorded before (view.ts reads those from their text). claim_jobs again.
  `
  ALTER TABLE jobs ADD COLUMN result_structured smallint;
  ` + claimJobsFunction("CREATE OR REPLACE FUNCTION", JOB_COLUMNS_V4),
  // The UTF-8 sizes of a job's arguments and result, so that listings and the per-Anima bounds (limits.ts)
  // need not read them; NULL result_bytes: no result. claim_jobs again.
  `
  ALTER TABLE jobs ADD COLUMN args_bytes bigint NOT NULL DEFAULT 0, ADD COLUMN result_bytes bigint;
  UPDATE jobs SET args_bytes = octet_length(args_json), result_bytes = octet_length(result);
  ` + claimJobsFunction("CREATE OR REPLACE FUNCTION", JOB_COLUMNS_V5),
  // Submits bounded per Anima (limits.ts), in one round trip.
  SUBMIT_JOB_FUNCTION,
  // Notices that could not be written are tried again with a backoff (store.ts NOTICE_RETRY): how often
  // each failed, and when it is due again (0: never failed). Pending notices are read due first, through
  // an index in that order; it replaces jobs_unnotified (by finish time alone: a read of the due ones
  // would walk past every postponed one).
  // claim_jobs again.
  `
  ALTER TABLE jobs ADD COLUMN notice_failures integer NOT NULL DEFAULT 0, ADD COLUMN notice_retry_at bigint NOT NULL DEFAULT 0;
  DROP INDEX IF EXISTS jobs_unnotified;
  CREATE INDEX IF NOT EXISTS jobs_notices_due ON jobs (notice_retry_at, finished_at, seq) WHERE finished_at IS NOT NULL AND notified_at IS NULL;
  ` + claimJobsFunction("CREATE OR REPLACE FUNCTION", JOB_COLUMNS_V7),
  // An idempotent resubmit racing the first submit finds its job, also at the Anima's bound.
  SUBMIT_JOB_FUNCTION_V8,
];

export const PG_SCHEMA_VERSION = MIGRATIONS.length;

/** A PostgreSQL identifier for the store's schema: lower-case letters, digits and underscores only. */
export function checkSchemaName(name: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) {
    throw new ToolHostError("InvalidArguments", `job store schema name "${name}" must be 1–63 lower-case letters, digits or underscores`);
  }
  return name;
}

export async function migratePostgres(client: PoolClient, schema: string): Promise<void> {
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [MIGRATION_LOCK, schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${schema}.schema_version (version integer NOT NULL)`);
    const found = await client.query<{ version: number }>(`SELECT version FROM ${schema}.schema_version`);
    const current = found.rows[0]?.version ?? 0;
    if (current > PG_SCHEMA_VERSION) {
      throw new ToolHostError(
        "LoadError",
        `job store schema version ${current} is newer than this host understands (${PG_SCHEMA_VERSION})`,
        "upgrade animaworks-tool on this machine, or point it at another job database",
      );
    }
    await client.query(`SET LOCAL search_path TO ${schema}`);
    for (let version = current; version < PG_SCHEMA_VERSION; version++) await client.query(MIGRATIONS[version] as string);
    if (found.rows.length === 0) await client.query(`INSERT INTO ${schema}.schema_version (version) VALUES ($1)`, [PG_SCHEMA_VERSION]);
    else if (current !== PG_SCHEMA_VERSION) await client.query(`UPDATE ${schema}.schema_version SET version = $1`, [PG_SCHEMA_VERSION]);
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  }
}
