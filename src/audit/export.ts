import type { AuditEvent, AuditKind, AuditRecord } from "./audit-log.js";

/**
 * The audit records as an auditor takes them away (`audit events`, docs/audit-records.md): JSON lines
 * (every field, as stored) or CSV (a fixed column set). Much of a record is tool-controlled text (a path,
 * a tool's name, a load error), so each form holds one record per line whatever the text is, and
 * holds no character the CLI's terminal-safe output (cli/output.ts `terminalSafe`) would alter: what is
 * written is what an auditor's tools parse.
 */

/** Every record kind, in the order docs/audit-records.md lists them (checked against `AuditKind` below). */
export const AUDIT_KINDS = [
  "call_start",
  "call",
  "capability",
  "credential",
  "load_error",
  "sandbox_crash",
  "refusal",
  "policy_change",
  "trail",
  "audit_gap",
  "trail_truncated",
  "trail_head_lost",
  "trail_rewritten",
  "reload",
] as const satisfies readonly AuditKind[];

// A kind added to AuditEvent must be added above (and to the docs): this line stops compiling until it is.
const everyKind: Exclude<AuditKind, (typeof AUDIT_KINDS)[number]> extends never ? true : never = true;
void everyKind;

/** The outcomes records carry (`call`: ok/error; `capability`: ok/denied/error; `credential`: ok/missing/denied). */
export const AUDIT_OUTCOMES = ["ok", "error", "denied", "missing"] as const;

/**
 * The CSV columns, in order. Some hold one of several fields, whichever the record's kind has:
 * `operation` a capability's operation, a credential's name, a call's schema, a refusal's command, a
 * policy change's scope or a reload's change; `target` a capability's or refusal's target, a credential's
 * source, a load error's or reload's origin, or a truncated trail's file; `reason` a reason or a message
 * (an `audit_gap`'s says how many records were lost, a `trail_truncated`'s where the files and the head
 * end); `policy` a denial's policy, or the hash a policy change moved to.
 */
export const CSV_COLUMNS = [
  "ts",
  "seq",
  "kind",
  "anima",
  "tool",
  "callId",
  "outcome",
  "operation",
  "target",
  "errorType",
  "reason",
  "policy",
  "version",
  "jobId",
  "durationMs",
] as const;

export type CsvColumn = (typeof CSV_COLUMNS)[number];

/** Fields each column takes, first present wins. */
const COLUMN_FIELDS: Record<CsvColumn, readonly string[]> = {
  ts: ["ts"],
  seq: ["seq"],
  kind: ["kind"],
  anima: ["anima"],
  tool: ["tool"],
  callId: ["callId"],
  outcome: ["outcome"],
  operation: ["operation", "name", "schema", "command", "scope", "change"],
  target: ["target", "source", "origin"],
  errorType: ["errorType"],
  reason: ["reason", "message"],
  policy: ["policy", "to"],
  version: ["version"],
  jobId: ["jobId"],
  durationMs: ["durationMs"],
};

/** The value of each CSV column for a record (undefined: the record has none). */
export function columnValues(record: AuditRecord): Record<CsvColumn, unknown> {
  const fields = record as unknown as Record<string, unknown>;
  const values = {} as Record<CsvColumn, unknown>;
  for (const column of CSV_COLUMNS) values[column] = COLUMN_FIELDS[column].map((field) => fields[field]).find((value) => value !== undefined);
  // The count is the point of a gap record; it has no column of its own.
  if (record.kind === "audit_gap") values.reason = `${String(record.lost)} records lost: ${String(record.reason)}`;
  if (record.kind === "trail_truncated") {
    values.target = record.trail;
    values.reason = `the files end at seq ${String(record.fileSeq)} (${String(record.fileSizeBytes)} bytes), the head at seq ${String(record.headSeq)} (${String(record.headSizeBytes)} bytes)`;
  }
  if (record.kind === "trail_rewritten") {
    values.target = record.trail;
    values.reason = `the files run to seq ${String(record.fileSeq)}, but their seq ${String(record.headSeq)} is not the head's record`;
  }
  if (record.kind === "trail_head_lost" || record.kind === "trail_rewritten") {
    values.target = record.trail;
    values.reason = `no readable head; the files ended at seq ${String(record.fileSeq)}`;
  }
  return values;
}

/**
 * Characters written as `\uXXXX` (the escape the audit log itself applies to control characters, so a
 * stored record is unchanged by it): C0 controls (newlines and tabs too), DEL, C1 controls, the Unicode
 * line and paragraph separators (lines to some readers) and bidirectional overrides (which disguise text).
 */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function escapeUnsafe(text: string): string {
  return text.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/**
 * A cell a spreadsheet would run as a formula starts with one of these (OWASP's CSV injection list, with
 * the full-width forms some spreadsheets take alike); a cell starting with `'` is marked too, so that
 * dropping one leading `'` always gives the value back.
 */
const FORMULA_START = /^[=+\-@\t\r'\uff1d\uff0b\uff0d\uff20]/;

/**
 * One CSV cell (RFC 4180): empty for no value; a number as it is; anything else as text, unsafe
 * characters escaped, a `'` put before a formula-like start, always in double quotes (also safe for
 * spreadsheets that split on `;`), inner quotes doubled.
 */
export function csvCell(value: unknown): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  const raw = textOf(value);
  let text = escapeUnsafe(raw);
  // A leading tab or CR is escaped already; it is guarded all the same, as the rule reads.
  if (FORMULA_START.test(raw) || FORMULA_START.test(text)) text = `'${text}`;
  return `"${text.replaceAll('"', '""')}"`;
}

/** The header line, without its newline. */
export function csvHeader(): string {
  return CSV_COLUMNS.join(",");
}

/** One record as one CSV line, without its newline. */
export function csvRow(record: AuditRecord): string {
  const values = columnValues(record);
  return CSV_COLUMNS.map((column) => csvCell(values[column])).join(",");
}

/**
 * One record as one JSON line, without its newline: every field as stored. JSON.stringify escapes C0
 * controls; the other unsafe characters are escaped here, inside strings (where alone they can stand),
 * so the line parses back to the very same record.
 */
export function jsonlLine(record: AuditRecord): string {
  return escapeUnsafe(JSON.stringify(record));
}

export type ExportFormat = "jsonl" | "csv";

/** Text handed to `write` at a time, about: a million records are written in pieces, never as one string. */
const CHUNK_CHARS = 64 * 1024;

/** Writes `records` in `format` (CSV with its header line) through `write`, in chunks of whole lines ending in `\n`. */
export function writeRecords(records: Iterable<AuditRecord>, format: ExportFormat, write: (chunk: string) => void): number {
  let count = 0;
  for (const chunk of recordChunks(records, format, (n) => (count = n))) write(chunk);
  return count;
}

/** `records` in `format` (CSV with its header line), in chunks of whole lines ending in `\n`; `counted` hears the records' number at the end. */
export function* recordChunks(records: Iterable<AuditRecord>, format: ExportFormat, counted?: (count: number) => void): Generator<string> {
  let lines: string[] = format === "csv" ? [csvHeader()] : [];
  let size = 0;
  let count = 0;
  const line = format === "csv" ? csvRow : jsonlLine;
  for (const record of records) {
    const text = line(record);
    lines.push(text);
    size += text.length + 1;
    count++;
    if (size >= CHUNK_CHARS) {
      yield `${lines.join("\n")}\n`;
      lines = [];
      size = 0;
    }
  }
  if (lines.length > 0) yield `${lines.join("\n")}\n`;
  counted?.(count);
}

/**
 * How loud a record is in an export (the OpenTelemetry severity): denials, refusals, sandbox crashes and
 * protocol violations, lost records, truncated trails and lost heads are warnings; everything else, failed calls too (a tool's
 * failure is not the operator's alarm), is information.
 */
export function auditSeverity(event: AuditEvent): "WARN" | "INFO" {
  if (
    event.kind === "refusal" ||
    event.kind === "sandbox_crash" ||
    event.kind === "audit_gap" ||
    event.kind === "trail_truncated" ||
    event.kind === "trail_head_lost" ||
    event.kind === "trail_rewritten"
  )
    return "WARN";
  return "outcome" in event && event.outcome === "denied" ? "WARN" : "INFO";
}

/** A value as text: strings as they are, anything else as JSON (a list of layers, a number that is not finite). */
function textOf(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return JSON.stringify(value) ?? "";
}

/** One line saying what a record is: its kind, who, what, on what, and how it ended (an export's body). */
export function recordSummary(record: AuditRecord): string {
  const values = columnValues(record);
  const who = [values.anima, values.tool]
    .filter((part) => part !== undefined)
    .map(textOf)
    .join("/");
  const parts = [record.kind, who, values.operation, values.target, values.outcome, values.errorType];
  if (record.kind === "policy_change") parts.push(`${record.from ?? "(first seen)"} → ${record.to}`);
  if (record.kind === "audit_gap" || record.kind === "trail_truncated" || record.kind === "trail_head_lost" || record.kind === "trail_rewritten")
    parts.push(values.reason);
  return parts
    .filter((part) => part !== undefined && part !== "")
    .map(textOf)
    .join(" ");
}
