import { LISTED_TEXT_CHARS, listedColumns } from "./limits.js";
import { type JobRow, rowToJob, rowToListedJob } from "./sqlite-schema.js";
import type { Job } from "./store.js";

/**
 * How the PostgreSQL job store (postgres-store.ts) keeps texts PostgreSQL cannot hold, and reads rows:
 * whole, or as a listing's.
 */

/**
 * The columns of a listing (`list`, `pendingNotices`), in `rowToJob`'s names: every long text at most its
 * first `LISTED_TEXT_CHARS` characters (`left` counts characters, as the SQLite store's `substr` does), so
 * that what a listing reads is bounded by its length, not by what the jobs hold (limits.ts); the whole
 * sizes beside (`rowToListedJob`).
 */
export const PG_LISTED_COLUMNS = listedColumns(
  (column) => `left(${column}, ${LISTED_TEXT_CHARS}) AS ${column}`,
  (column) => `octet_length(${column})`,
);

/**
 * PostgreSQL text cannot hold U+0000 ("invalid byte sequence for encoding UTF8: 0x00"), and a tool's result,
 * error or progress message may: such an outcome was never recorded, so the finished run was retried (its
 * side effects again) and ended interrupted, its result lost. The store writes these texts through
 * `toPgText`: one holding U+0000 is kept as `NUL_MARK` and its JSON string literal (JSON writes U+0000 as
 * \u0000), which `fromPgText` reads back exactly; so is one that starts with `NUL_MARK` itself, so that every
 * text reads back as written. Any other text is kept as it is. `NUL_MARK` is U+FDD0, one of the
 * noncharacters Unicode sets aside for a program's internal use: a text from before this encoding that
 * starts with it and then a JSON string would be misread, nothing else.
 */
const NUL_MARK = "\uFDD0";

/** The text columns a job's outcome and progress write, which `toPgText` encodes. */
const ENCODED_COLUMNS = ["result", "error_message", "error_hint", "progress_message"] as const;

export function toPgText(text: string): string;
export function toPgText(text: string | null): string | null;
export function toPgText(text: string | null): string | null {
  if (text === null || !(text.includes("\u0000") || text.startsWith(NUL_MARK))) return text;
  return NUL_MARK + JSON.stringify(text);
}

/**
 * A text `toPgText` wrote, as it was. `cut`: the text may be a listing's first characters of one
 * (`PG_LISTED_COLUMNS`): an encoded one is then read as far as its literal is whole.
 */
export function fromPgText(text: string, cut = false): string {
  if (!text.startsWith(NUL_MARK)) return text;
  const literal = text.slice(NUL_MARK.length);
  const whole = parsedString(literal);
  if (whole !== undefined || !cut) return whole ?? text;
  // Cut inside the literal, maybe inside an escape (\uXXXX is the longest, 6 characters): close it after
  // the last whole character.
  for (let drop = 0; drop <= 6 && drop < literal.length; drop++) {
    const read = parsedString(`${literal.slice(0, literal.length - drop)}"`);
    if (read !== undefined) return read;
  }
  return text;
}

function parsedString(literal: string): string | undefined {
  try {
    const value: unknown = JSON.parse(literal);
    return typeof value === "string" ? value : undefined;
  } catch {
    return undefined;
  }
}

/** A row as written, its encoded texts read back (`cut`: a listing's row). Changes and returns `row`. */
export function decodePgRow<R extends Partial<Record<(typeof ENCODED_COLUMNS)[number], string | null>>>(row: R, cut = false): R {
  for (const column of ENCODED_COLUMNS) {
    const value = row[column];
    if (typeof value === "string") (row as Record<string, unknown>)[column] = fromPgText(value, cut);
  }
  return row;
}

/** A row of the store as its job (`rowToJob`), its texts read back. */
export function pgRowToJob(row: JobRow): Job {
  return rowToJob(decodePgRow(row));
}

/** A listing's row (`PG_LISTED_COLUMNS`) as its job (`rowToListedJob`), its texts read back as far as they were listed. */
export function pgRowToListedJob(row: JobRow): Job {
  return rowToListedJob(decodePgRow(row, true));
}
