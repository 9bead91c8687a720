import { ToolHostError } from "../errors.js";
import { JOB_DEFAULTS } from "./defaults.js";
import { checkJobArgsBytes } from "./limits.js";
import type { Job, JobOutcome, JobProgress, SubmitJobInput } from "./store.js";

/**
 * What both job stores accept and how they write it (store.ts holds the JobStore interface): a submit checked
 * and completed with its defaults, the same work under an idempotency key, progress as stored, an outcome
 * as the columns both write. One copy, so that the two stores refuse and record alike.
 */

/** Checks and completes a submit with defaults. Throws `InvalidArguments` naming the bad field. */
export function normaliseSubmit(input: SubmitJobInput): Required<Omit<SubmitJobInput, "idempotencyKey">> & {
  idempotencyKey: string | undefined;
} {
  for (const field of ["anima", "tool", "action", "schemaName", "bundleHash"] as const) {
    const value: unknown = input[field];
    if (typeof value !== "string" || value.trim() === "") {
      throw new ToolHostError("InvalidArguments", `job ${field} must be a non-empty string`);
    }
    // PostgreSQL text cannot hold U+0000: refused in both stores alike, where the caller can act on it.
    if (value.includes("\u0000")) throw new ToolHostError("InvalidArguments", `job ${field} must not contain U+0000`);
  }
  if (typeof input.argsJson !== "string") throw new ToolHostError("InvalidArguments", "job argsJson must be JSON text");
  try {
    JSON.parse(input.argsJson);
  } catch {
    throw new ToolHostError("InvalidArguments", "job argsJson is not valid JSON");
  }
  checkJobArgsBytes(input.argsJson);
  const key = input.idempotencyKey;
  if (key !== undefined && (typeof key !== "string" || key === "" || key.length > 200 || key.includes("\u0000"))) {
    throw new ToolHostError("InvalidArguments", "idempotencyKey must be a string of 1 to 200 characters, without U+0000");
  }
  return {
    anima: input.anima,
    tool: input.tool,
    action: input.action,
    schemaName: input.schemaName,
    argsJson: input.argsJson,
    bundleHash: input.bundleHash,
    priority: integer(input.priority, JOB_DEFAULTS.priority, "priority", -1_000_000, INT32_MAX),
    idempotencyKey: key,
    maxAttempts: integer(input.maxAttempts, JOB_DEFAULTS.maxAttempts, "maxAttempts", 1, INT32_MAX),
    retryBackoffMs: integer(input.retryBackoffMs, JOB_DEFAULTS.retryBackoffMs, "retryBackoffMs", 0),
    timeoutMs: integer(input.timeoutMs, JOB_DEFAULTS.timeoutMs, "timeoutMs", 1),
  };
}

/**
 * The largest priority and attempt count: PostgreSQL keeps them as 32-bit integers (SQLite would take any),
 * so both stores refuse what one could not store, with the same error.
 */
const INT32_MAX = 2_147_483_647;

function integer(value: number | undefined, fallback: number, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max.toLocaleString("en-US")}`;
    throw new ToolHostError("InvalidArguments", `${name} must be an integer ${range}, got ${String(value)}`, `give ${name} a whole number ${range}`);
  }
  return value;
}

/**
 * Whether an Anima name or job id given to a read or a cancel holds U+0000: such a one names no job (a
 * submit refuses it, `normaliseSubmit`). The PostgreSQL store answers so before asking the server, whose
 * text cannot hold it (a raw "invalid byte sequence" error otherwise), as the SQLite store answers by looking.
 */
export function namesNoJob(...names: string[]): boolean {
  return names.some((name) => name.includes("\u0000"));
}

/**
 * The job an idempotency key already names, when a new submit asks for the same work under it; reusing a
 * key for other work (another action or other arguments) is `InvalidArguments`.
 */
export function sameWork(existing: Job, job: ReturnType<typeof normaliseSubmit>): Job {
  const same = existing.tool === job.tool && existing.action === job.action && existing.schemaName === job.schemaName && existing.argsJson === job.argsJson;
  if (!same) {
    throw new ToolHostError(
      "InvalidArguments",
      `idempotency key "${job.idempotencyKey}" was already used for job ${existing.id} with different work`,
      "use a new key for a different action or arguments",
    );
  }
  return existing;
}

/** Progress as stored: the fraction clamped to 0..1; the message cut, since a runaway one must not bloat the store. */
export function normaliseProgress(progress: JobProgress): JobProgress {
  const fraction = Number.isFinite(progress.fraction) ? Math.min(1, Math.max(0, progress.fraction)) : 0;
  return { fraction, message: String(progress.message ?? "").slice(0, 1_000) };
}

/** An outcome as the columns both stores write (`result_structured`: 1/0, `result_bytes`: UTF-8 bytes; null without a result). */
export function outcomeColumns(outcome: JobOutcome): {
  result: string | null;
  resultStructured: number | null;
  resultBytes: number | null;
  errorType: string | null;
  errorMessage: string | null;
  errorFault: string | null;
  errorHint: string | null;
} {
  const error = outcome.status === "succeeded" ? undefined : outcome.error;
  const result = outcome.status === "failed" ? undefined : outcome.result;
  return {
    result: result ?? null,
    resultStructured: result === undefined ? null : outcome.status !== "failed" && outcome.structured === true ? 1 : 0,
    resultBytes: result === undefined ? null : Buffer.byteLength(result),
    errorType: error?.type ?? null,
    errorMessage: error?.message ?? null,
    errorFault: error?.fault ?? null,
    errorHint: error?.hint ?? null,
  };
}
