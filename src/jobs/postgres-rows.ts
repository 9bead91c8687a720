import { LISTED_TEXT_CHARS } from "./limits.js";

/**
 * How the PostgreSQL job store reads rows beyond `SELECT *` (postgres-store.ts).
 *
 * The columns of a listing (`list`, `pendingNotices`), in `rowToJob`'s names: every long text at most its
 * first `LISTED_TEXT_CHARS` characters (`left` counts characters, as the SQLite store's `substr` does), so
 * that what a listing reads is bounded by its length, not by what the jobs hold (limits.ts); the whole
 * sizes beside (`rowToListedJob`).
 */
export const PG_LISTED_COLUMNS = (() => {
  const cut = (column: string) => `left(${column}, ${LISTED_TEXT_CHARS}) AS ${column}`;
  return [
    "seq, id, anima, tool, action, schema_name",
    cut("args_json"),
    "bundle_hash, priority, idempotency_key, status, attempts, max_attempts, retry_backoff_ms, timeout_ms",
    "submitted_at, started_at, finished_at, not_before",
    cut("result"),
    "result_structured, error_type",
    cut("error_message"),
    "error_fault",
    cut("error_hint"),
    "progress_fraction",
    cut("progress_message"),
    "lease_owner, lease_expires_at, cancel_requested, notified_at, args_bytes, result_bytes",
  ].join(", ");
})();
