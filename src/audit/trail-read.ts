import { closeSync, readSync } from "node:fs";
import { type AuditRecord, type AuditQuery, AuditReadTooLarge, matches } from "./audit-log.js";
import type { RecordRuns } from "./record-order.js";
import { MAX_LINE_BYTES, openTrailForReadOrNone } from "./trail-file.js";

/**
 * Reading a trail's records for `read` (jsonl-audit-log.ts) in a long-running host: the daemon reads an
 * Anima's trails for whoever asks (`audit events`, `audit`), and a trail at its rotation bound is 40 MB.
 * Parsed in one piece, one read held the shared event loop ~0.4 s, every other Anima's calls waiting
 * (red team: audit_read_stall). So a read is paced (`Pacer`): the event loop gets a turn at least every
 * `LINES_PER_TURN` lines and every `BYTES_PER_TURN` bytes of trail read, a few milliseconds of work.
 *
 * A file is read in `CHUNK_BYTES` chunks, never as one string: what a read holds besides the records it
 * keeps is a chunk and its lines. A line longer than `MAX_LINE_BYTES` is not a record (the writer bounds
 * every record far below it; verify reports such a line broken), and its bytes are never held.
 */

/** Lines read between two turns of the event loop, at most: ≈ 2–4 ms of parsing. */
export const LINES_PER_TURN = 2_000;
/** Bytes of trail read between two turns of the event loop, at most (long lines, lines skipped unparsed). */
export const BYTES_PER_TURN = 512 * 1024;
/** Files opened between two turns of the event loop, at most (an audit folder of many Animas is many small files). */
const FILES_PER_TURN = 64;
/** Bytes read from a file at once. */
const CHUNK_BYTES = 1024 * 1024;

/** Counts work done since the event loop's last turn, and gives it one when the bound is reached. */
export class Pacer {
  private lines = 0;
  private bytes = 0;
  private files = 0;

  /** Counts `lines`, `bytes` and `files` done; true when the event loop is owed a turn (`turn`). */
  spent(lines: number, bytes: number, files = 0): boolean {
    this.lines += lines;
    this.bytes += bytes;
    this.files += files;
    return this.lines >= LINES_PER_TURN || this.bytes >= BYTES_PER_TURN || this.files >= FILES_PER_TURN;
  }

  readonly turn = async (): Promise<void> => {
    this.lines = 0;
    this.bytes = 0;
    this.files = 0;
    await new Promise((resolve) => setImmediate(resolve));
  };
}

/** What `read` takes of a trail's lines: the query, and the text a line must hold to be parsed at all. */
export interface LineFilter {
  query: AuditQuery;
  /** Texts that every line kept holds as written (`"kind":"…"`): a line without one is not parsed. */
  mustHold: readonly string[];
  /** Records the read may hold in all: one more rejects it (`AuditReadTooLarge`). */
  maxRecords: number;
}

/**
 * The records of one trail matching `filter`, its generations (oldest first) read in order, appended to
 * `runs`. Every generation is opened before any is read: a writer rotating the trail meanwhile (the read
 * yields to it) renames files under the read, never shifting a generation into one not yet read.
 */
export async function readTrailRecords(generations: readonly string[], filter: LineFilter, runs: RecordRuns, pacer: Pacer): Promise<void> {
  if (pacer.spent(0, 0, generations.length)) await pacer.turn();
  const fds: number[] = [];
  try {
    for (const generation of generations) {
      // Non-blocking, regular files only (trail-file.ts): a FIFO or directory in a trail's place reads as
      // no records here, never a hang (verify reports it broken).
      const fd = openTrailForReadOrNone(generation);
      if (fd !== undefined) fds.push(fd);
    }
    runs.startTrail();
    for (const fd of fds) {
      await linesOf(fd, pacer, (line) => {
        const record = recordOf(line, filter);
        if (record === undefined) return;
        if (runs.size >= filter.maxRecords) throw new AuditReadTooLarge(filter.maxRecords);
        runs.push(record);
      });
    }
  } finally {
    for (const fd of fds) closeSync(fd);
  }
}

/** The record a line holds if it matches `filter`. */
function recordOf(line: string, filter: LineFilter): AuditRecord | undefined {
  if (line.trim() === "") return undefined;
  // The writer writes `"kind":"…"` exactly (JSON.stringify); a line written otherwise is skipped here as
  // it would be after parsing.
  for (const text of filter.mustHold) if (!line.includes(text)) return undefined;
  let record: AuditRecord;
  try {
    record = JSON.parse(line) as AuditRecord;
  } catch {
    return undefined; // a torn line after a crash: skip it (verify reports it)
  }
  // Not a JSON object (`null`, a number…): not a record (verify reports it).
  if (typeof record !== "object" || record === null || Array.isArray(record)) return undefined;
  if (typeof record.seq !== "number") record.unverified = true;
  return matches(record, filter.query) ? record : undefined;
}

/**
 * Calls `visit` with each line of the open file `fd` (without its newline; the last one also when no
 * newline ends it), as the file's UTF-8 text split at "\n" would give them. Chunks are decoded up to
 * their last newline only: a newline byte never sits inside a character, so each line decodes as it
 * would in the whole file's text.
 */
async function linesOf(fd: number, pacer: Pacer, visit: (line: string) => void): Promise<void> {
  const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  /** The start of a line that runs past the chunks read so far. */
  let carry: Buffer[] = [];
  let carryBytes = 0;
  /** The line being read is longer than MAX_LINE_BYTES: skipped up to its newline. */
  let oversize = false;
  for (;;) {
    const read = readSync(fd, chunk, 0, CHUNK_BYTES, null);
    if (read === 0) break;
    const last = chunk.lastIndexOf(0x0a, read - 1);
    if (last < 0) {
      if (!oversize && carryBytes + read <= MAX_LINE_BYTES) {
        carry.push(Buffer.from(chunk.subarray(0, read)));
        carryBytes += read;
      } else [carry, carryBytes, oversize] = [[], 0, true];
      if (pacer.spent(0, read)) await pacer.turn();
      continue;
    }
    // The line that began in earlier chunks ends at the chunk's first newline.
    let start = 0;
    if (oversize || carryBytes > 0) {
      const first = chunk.indexOf(0x0a);
      if (!oversize && carryBytes + first <= MAX_LINE_BYTES) visit(Buffer.concat([...carry, chunk.subarray(0, first)]).toString("utf8"));
      [carry, carryBytes, oversize] = [[], 0, false];
      start = first + 1;
    }
    // Lines within one chunk: each shorter than the chunk, so than MAX_LINE_BYTES.
    const lines = start <= last ? chunk.toString("utf8", start, last).split("\n") : [];
    for (const line of lines) {
      visit(line);
      if (pacer.spent(1, line.length + 1)) await pacer.turn();
    }
    if (last + 1 < read) {
      carry = [Buffer.from(chunk.subarray(last + 1, read))];
      carryBytes = read - last - 1;
    }
  }
  if (carryBytes > 0 && !oversize) visit(Buffer.concat(carry).toString("utf8"));
}
