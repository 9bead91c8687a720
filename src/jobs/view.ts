import { type ErrorInfo, ToolHostError, type WireError, wireError } from "../errors.js";
import { joinReportLines, oneLine } from "../terminal-text.js";
import { JOB_STATUSES, type Job, type JobStatus } from "./store.js";

/**
 * How jobs look to their Animas: the JSON shape of `jobs … --json` and the library's `jobView`, and the
 * text of `jobs list|show|wait`. Field names follow the CLI's envelopes (`job_id`, `error_type`); times
 * are ISO 8601 in UTC. Lease internals (owner, expiry) stay inside the host.
 */
export interface JobView {
  job_id: string;
  anima: string;
  tool: string;
  action: string;
  schema: string;
  status: JobStatus;
  /** The validated arguments, as the job will receive them (without anima_dir). */
  args: unknown;
  priority: number;
  attempts: number;
  max_attempts: number;
  timeout_seconds: number;
  submitted_at: string;
  started_at?: string;
  finished_at?: string;
  progress?: { fraction: number; message: string };
  error?: WireError;
  /** Size of the recorded result (a cancelled job's partial one too), UTF-8 bytes; absent without one. */
  result_bytes?: number;
  /** The result is an object (`jobs result -j` gives it as one), not text. */
  result_structured?: boolean;
  cancel_requested: boolean;
  idempotency_key?: string;
  /** True once the completion notice `state/background_notifications/<job_id>.md` was written. */
  notice_written: boolean;
}

export function jobView(job: Job): JobView {
  const view: JobView = {
    job_id: job.id,
    anima: job.anima,
    tool: job.tool,
    action: job.action,
    schema: job.schemaName,
    status: job.status,
    args: parseArgs(job.argsJson),
    priority: job.priority,
    attempts: job.attempts,
    max_attempts: job.maxAttempts,
    timeout_seconds: job.timeoutMs / 1000,
    submitted_at: iso(job.submittedAt),
    cancel_requested: job.cancelRequested,
    notice_written: job.notifiedAt !== undefined,
  };
  if (job.startedAt !== undefined) view.started_at = iso(job.startedAt);
  if (job.finishedAt !== undefined) view.finished_at = iso(job.finishedAt);
  if (job.progress) view.progress = { fraction: job.progress.fraction, message: job.progress.message };
  if (job.error) view.error = wireError(job.error);
  if (job.result !== undefined) {
    view.result_bytes = Buffer.byteLength(job.result);
    view.result_structured = jobOutputValue(job) !== job.result;
  }
  if (job.idempotencyKey !== undefined) view.idempotency_key = job.idempotencyKey;
  return view;
}

/**
 * Why a finished job has no result, as a CLI error: its own error when it failed, else ExecutionError
 * (exit 1) for a cancelled or interrupted job, which did not raise but did not finish either.
 */
export function jobFailure(job: Job): ErrorInfo {
  if (job.status === "cancelled") {
    const partial = job.result !== undefined ? "; what the tool returned when it stopped is kept as its partial result (output)" : "";
    return { type: "ExecutionError", fault: "caller", message: `job ${job.id} was cancelled before it finished${partial}` };
  }
  if (job.error) return job.error;
  return { type: "ExecutionError", fault: "host", message: `job ${job.id} ended ${job.status}` };
}

/**
 * A job's recorded result as a direct call's `-j` gives it (cli/output.ts): the object for an object
 * result, else the text; undefined without a result. A job recorded before stores kept which it was reads
 * as an object when its text is an object's JSON (what the host wrote for one).
 */
export function jobOutputValue(job: Job): string | Record<string, unknown> | undefined {
  if (job.result === undefined) return undefined;
  if (job.resultStructured === false) return job.result;
  return objectOf(job.result) ?? job.result;
}

/** The plain object `text` holds as JSON, else undefined (as execution/result-check.ts reads a result). */
function objectOf(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** AnimaWorks' words for statuses (`list_background_tasks`), accepted by `--status` beside ours. */
const STATUS_ALIASES: Record<string, JobStatus> = { pending: "queued", completed: "succeeded" };

/** `--status` values (each may be a comma list) as statuses; throws InvalidArguments naming a bad one. */
export function parseStatuses(values: readonly string[]): JobStatus[] {
  const statuses = new Set<JobStatus>();
  for (const word of values
    .flatMap((v) => v.split(","))
    .map((w) => w.trim().toLowerCase())
    .filter(Boolean)) {
    const status = STATUS_ALIASES[word] ?? (JOB_STATUSES as readonly string[]).find((s) => s === word);
    if (!status) throw new ToolHostError("InvalidArguments", `unknown job status "${word}"`, `statuses: ${JOB_STATUSES.join(", ")}`);
    statuses.add(status as JobStatus);
  }
  return [...statuses];
}

export function jobsTable(jobs: readonly Job[]): string {
  if (jobs.length === 0) return "No jobs.";
  const rows = jobs.map((job) => [job.id, job.status, `${job.tool} ${job.action}`, iso(job.submittedAt), detail(job)]);
  const header = ["ID", "STATUS", "ACTION", "SUBMITTED", ""];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] as number)))
      .join("  ")
      .trimEnd();
  // A cell holds text the tool wrote (its error's message, a progress message): a line break in it
  // would print table rows of its own ("ffffffffffff  succeeded  bank transfer").
  return joinReportLines([line(header), ...rows.map(line)]);
}

export function jobText(job: Job): string {
  const lines = [
    `Job ${job.id}: ${job.status}${job.cancelRequested && job.status === "running" ? " (cancel requested)" : ""}`,
    `  action:     ${job.tool} ${job.action} (schema ${job.schemaName})`,
    `  arguments:  ${job.argsJson}`,
    `  priority:   ${job.priority}`,
    `  attempts:   ${job.attempts} of ${job.maxAttempts}`,
    `  timeout:    ${job.timeoutMs / 1000} s`,
    `  submitted:  ${iso(job.submittedAt)}`,
  ];
  if (job.startedAt !== undefined) lines.push(`  started:    ${iso(job.startedAt)}`);
  if (job.finishedAt !== undefined) lines.push(`  finished:   ${iso(job.finishedAt)}`);
  if (job.progress) lines.push(`  progress:   ${percent(job.progress.fraction)}${job.progress.message ? ` ${job.progress.message}` : ""}`);
  if (job.error) lines.push(`  error:      ${job.error.type}: ${job.error.message}`);
  if (job.result !== undefined) {
    const what = job.status === "succeeded" ? "result:    " : "partial result:";
    lines.push(`  ${what} ${Buffer.byteLength(job.result)} bytes (animaworks-tool jobs result ${job.id})`);
  }
  if (job.idempotencyKey !== undefined) lines.push(`  idempotency key: ${job.idempotencyKey}`);
  if (job.notifiedAt !== undefined) lines.push(`  notice:     state/background_notifications/${job.id}.md`);
  return joinReportLines(lines);
}

/** One plain line per change while waiting (stderr is not a terminal). */
export function progressLine(job: Job): string {
  const extra = detail(job);
  return oneLine(`job ${job.id}: ${job.status}${extra ? ` ${extra}` : ""}`);
}

/** A one-line bar for a terminal, `widthChars` cells wide. */
export function progressBar(job: Job, widthChars = 24): string {
  const fraction = job.status === "succeeded" ? 1 : (job.progress?.fraction ?? 0);
  const filled = Math.round(Math.min(1, Math.max(0, fraction)) * widthChars);
  const bar = `[${"#".repeat(filled)}${"-".repeat(widthChars - filled)}]`;
  const message = job.progress?.message ? ` ${job.progress.message}` : "";
  return oneLine(`${bar} ${percent(fraction).padStart(4)} ${job.status}${job.status === "running" ? message : ""}  (job ${job.id})`);
}

function detail(job: Job): string {
  if (job.status === "running") {
    const progress = job.progress ? `${percent(job.progress.fraction)}${job.progress.message ? ` ${job.progress.message}` : ""}` : "";
    return [progress, job.cancelRequested ? "(cancel requested)" : ""].filter(Boolean).join(" ");
  }
  if (job.error && job.status !== "succeeded") return `${job.error.type}: ${job.error.message}`;
  return "";
}

function percent(fraction: number): string {
  return `${Math.round(fraction * 100)}%`;
}

function iso(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

function parseArgs(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
