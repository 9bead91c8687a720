import { ToolHostError } from "../errors.js";

/**
 * What one Anima's jobs may cost the host they share with every other Anima: the store keeps a job's
 * arguments from its submit until 7 days after it ends, and a shared daemon or worker reads them. A direct
 * call's arguments may be far larger (up to 64 MiB, `MAX_ARGUMENTS_BYTES`: room for a 10 MiB memory write
 * however JSON escapes it) because they live only for that call; a job's are written to the store, read
 * back by every worker that claims it, and stay there long after.
 *
 * Both stores enforce the same numbers (the JobStore contract, test/jobs/contract/, holds them).
 */

/**
 * Most bytes of one job's arguments (UTF-8 JSON): 1 MiB. Ample for what a long-running action takes (URLs,
 * queries, paths, options); a larger input belongs in a file the tool reads itself, or in a direct call.
 */
export const MAX_JOB_ARGS_BYTES = 1024 * 1024;

/**
 * Most unfinished (queued or running) jobs one Anima may have at once: 1,000. Workers run 2 of an Anima's
 * jobs at a time; a backlog past this is a runaway loop, not work anyone waits for.
 */
export const MAX_UNFINISHED_JOBS_PER_ANIMA = 1_000;

/** Most bytes of arguments one Anima's unfinished jobs may hold together: 64 MiB (64 jobs at the per-job limit). */
export const MAX_UNFINISHED_ARGS_BYTES_PER_ANIMA = 64 * 1024 * 1024;

/** The per-Anima bounds a store holds at submit: a store option, so that tests can make them small. */
export interface UnfinishedJobLimits {
  /** Default: `MAX_UNFINISHED_JOBS_PER_ANIMA` (1,000). */
  maxUnfinishedJobsPerAnima?: number;
  /** Default: `MAX_UNFINISHED_ARGS_BYTES_PER_ANIMA` (64 MiB). */
  maxUnfinishedArgsBytesPerAnima?: number;
}

/** The bounds with their defaults; a TypeError naming a bad one. */
export function resolveUnfinishedLimits(limits: UnfinishedJobLimits): Required<UnfinishedJobLimits> {
  const resolved = {
    maxUnfinishedJobsPerAnima: limits.maxUnfinishedJobsPerAnima ?? MAX_UNFINISHED_JOBS_PER_ANIMA,
    maxUnfinishedArgsBytesPerAnima: limits.maxUnfinishedArgsBytesPerAnima ?? MAX_UNFINISHED_ARGS_BYTES_PER_ANIMA,
  };
  for (const [name, value] of Object.entries(resolved)) {
    if (!Number.isSafeInteger(value) || value < 1) throw new TypeError(`${name} must be a whole number ≥ 1, got ${String(value)}`);
  }
  return resolved;
}

/**
 * Whether one more job of `argsBytes` keeps an Anima with `unfinished` jobs within `limits`; if not, why it
 * is refused: `Busy` (retry later), the caller's (the Anima queued them; no operator action makes room),
 * naming the bound and how to make room.
 */
export function checkUnfinishedLimits(
  anima: string,
  unfinished: { jobs: number; argsBytes: number },
  argsBytes: number,
  limits: Required<UnfinishedJobLimits>,
): void {
  const n = (value: number) => value.toLocaleString("en-US");
  const hint = "wait for some of them to finish, or cancel queued ones (animaworks-tool jobs list --status queued; jobs cancel ID)";
  if (unfinished.jobs >= limits.maxUnfinishedJobsPerAnima) {
    throw new ToolHostError(
      "Busy",
      `Anima "${anima}" has ${n(unfinished.jobs)} jobs queued or running, the most one Anima may have (${n(limits.maxUnfinishedJobsPerAnima)}): this job was not queued`,
      hint,
      "caller",
    );
  }
  if (unfinished.argsBytes + argsBytes > limits.maxUnfinishedArgsBytesPerAnima) {
    throw new ToolHostError(
      "Busy",
      `Anima "${anima}"'s queued and running jobs hold ${n(unfinished.argsBytes)} bytes of arguments, and this job's ${n(argsBytes)} would pass ` +
        `the limit of ${n(limits.maxUnfinishedArgsBytesPerAnima)} bytes per Anima: it was not queued`,
      hint,
      "caller",
    );
  }
}

/** Most jobs one listing returns (`jobs list --limit`, MCP `list_jobs`' `limit`): 1,000. Default: 100. */
export const MAX_LISTED_JOBS = 1_000;
export const DEFAULT_LISTED_JOBS = 100;

/**
 * Longest a long text of a job (its arguments' JSON, result, error message and hint, progress message) is
 * read by a listing (`list`, `pendingNotices`), in characters from its start: 4,096. A tool's error message
 * (at most 4,000 characters) and a notice's 200-character excerpt fit; `get` reads a job whole. So one
 * listing reads at most `MAX_LISTED_JOBS` × 5 texts of this length, whatever the jobs hold.
 */
export const LISTED_TEXT_CHARS = 4_096;

/**
 * SQL for a job's whole argument and result sizes, from the columns that keep them, given the store's SQL
 * for a text column's UTF-8 bytes (`textBytes`). A job written by a process of an older build (one still
 * running after the migration that added the columns) has args_bytes 0, the column's default, and
 * result_bytes NULL beside its result: unknown sizes, since arguments' JSON is never empty (0 is never a
 * real size) and a result always has one. Those are measured from the stored text itself, so that listings
 * cut such a job's texts and say so, and the per-Anima bound counts its arguments; only those rows pay for it.
 */
export function storedSizes(textBytes: (column: string) => string): { argsBytes: string; resultBytes: string } {
  return {
    argsBytes: `CASE WHEN args_bytes > 0 THEN args_bytes ELSE ${textBytes("args_json")} END`,
    resultBytes: `COALESCE(result_bytes, ${textBytes("result")})`,
  };
}

/**
 * A listing's columns in the stores' row names, each long text through `cut` (a store's SQL for "this
 * column's first `LISTED_TEXT_CHARS` characters"; `bytes`: SQL for its whole size, where the store keeps
 * one), and the whole sizes as `storedSizes` gives them (`textBytes`: the store's SQL for a text's UTF-8
 * bytes). One list for both stores, so that a column added to jobs is listed by both or by neither.
 */
export function listedColumns(cut: (column: string, bytes?: string) => string, textBytes: (column: string) => string): string {
  const sizes = storedSizes(textBytes);
  return [
    "seq, id, anima, tool, action, schema_name",
    cut("args_json", sizes.argsBytes),
    "bundle_hash, priority, idempotency_key, status, attempts, max_attempts, retry_backoff_ms, timeout_ms",
    "submitted_at, started_at, finished_at, not_before",
    cut("result", sizes.resultBytes),
    "result_structured, error_type",
    cut("error_message"),
    "error_fault",
    cut("error_hint"),
    "progress_fraction",
    cut("progress_message"),
    "lease_owner, lease_expires_at, cancel_requested, notified_at",
    `${sizes.argsBytes} AS args_bytes, ${sizes.resultBytes} AS result_bytes`,
  ].join(", ");
}

/** UTF-8 bytes of a job's arguments; `InvalidArguments` (the caller's) over `MAX_JOB_ARGS_BYTES`. */
export function checkJobArgsBytes(argsJson: string): number {
  const bytes = Buffer.byteLength(argsJson);
  if (bytes > MAX_JOB_ARGS_BYTES) {
    throw new ToolHostError(
      "InvalidArguments",
      `the job's arguments are ${bytes.toLocaleString("en-US")} bytes of JSON, over the ${MAX_JOB_ARGS_BYTES.toLocaleString("en-US")}-byte (1 MiB) limit of a background job`,
      "pass a large input as a file the tool reads (its path as the argument), or run the action directly (a direct call takes up to 64 MiB)",
      "caller",
    );
  }
  return bytes;
}

/** A listing's `limit`, checked: a whole number from 1 to `MAX_LISTED_JOBS` (default 100), else `InvalidArguments`. */
export function listLimit(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_LISTED_JOBS;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LISTED_JOBS) {
    throw new ToolHostError(
      "InvalidArguments",
      `a job listing's limit must be a whole number from 1 to ${MAX_LISTED_JOBS.toLocaleString("en-US")}, got ${String(limit)}`,
      "list fewer jobs at once, or narrow the listing by status",
    );
  }
  return limit;
}
