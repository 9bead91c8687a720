import type { PoolClient } from "pg";
import { ToolHostError } from "../errors.js";

/**
 * Schema of the PostgreSQL job store, in its own PostgreSQL schema (default `animaworks_tool`), versioned
 * in `schema_version`. Migration N takes version N-1 to N. They run in one transaction holding an
 * advisory lock, so that several workers starting at once against an empty database apply them once.
 * Never edit a shipped migration: append a new one.
 *
 * Columns mirror the SQLite store's (sqlite-schema.ts), so both read back through the same `rowToJob`:
 * times are epoch ms in `bigint` (read as numbers), `cancel_requested` is 0/1.
 */
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
];

export const PG_SCHEMA_VERSION = MIGRATIONS.length;

/** Advisory lock keys (one namespace for this project): migrations, and claims (see the store). */
export const MIGRATION_LOCK = 0x61770001;
export const CLAIM_LOCK = 0x61770002;

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
