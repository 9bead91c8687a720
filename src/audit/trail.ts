import { closeSync, constants, fstatSync, mkdirSync, readSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { sha256 } from "../bundling/sha256.js";
import { tryLockSync, unlockSync } from "../file-lock.js";
import { forEachLine, openTrailFile, openTrailForReadOrNone } from "./trail-file.js";
import { GENESIS, type StoredHead, type TrailHead, readStoredHead, writeHead } from "./trail-head.js";

/**
 * One chained audit trail: a JSON-lines file and its rotated generations (`<file>.1` … `<file>.<keepFiles>`).
 *
 * Invariants (what `audit verify`, verify.ts, checks):
 * - every record line is `{"v":1,"seq":N,"ts":…,"prev":H,…event}`: `seq` counts up by one across files and
 *   rotations, and `prev` is `recordHash` of the line before it (`GENESIS` for seq 1), so a deleted, edited
 *   or reordered record breaks the chain where it was;
 * - the head file `<file>.head` (trail-head.ts) holds the last record's seq and hash, the file's size after
 *   it, and what rotation dropped (the last seq and hash of the generation that fell off): so a truncated
 *   tail and a deleted oldest generation are told apart from retention;
 * - several processes (a daemon, one-shot CLI runs, MCP servers) append to one trail: each write takes the
 *   trail's lock file (file-lock.ts), continues the chain from the head, writes, rotates if due, and moves
 *   the head, all under the lock. A writer that died between its write and its head left the files AHEAD
 *   of the head (longer, or a later seq): the next writer continues from their last complete line. Files
 *   BEHIND the head (shorter with no later record, or a last seq below the head's) were truncated, which no
 *   crash does: the writer continues from the head, so the gap stays in the chain for verify, and the
 *   caller is told (`TrailTruncation`: JsonlAuditLog records it), never healing it silently;
 * - NO readable head while the files hold records (the head deleted or spoiled; a crash does that only
 *   between a trail's very first write and its first head): the writer continues from the files and the
 *   caller is told (`TrailStart` headLost: `trail_head_lost`), so that records cut or edited under the lost
 *   head stay reported. No head and no record: a new trail, which the caller announces (once: the lock).
 *
 * Tamper evidence, not tamper proof: whoever can write the data dir can rewrite a whole trail and its head.
 * What the chain gives an auditor is that any partial change shows; an exported copy (OpenTelemetry) is
 * the answer to a rewrite of everything.
 */

export const RECORD_SCHEMA_VERSION = 1;

/** The first 128 bits of the SHA-256 of a record's line (UTF-8, without its newline), hex. */
export function recordHash(line: string): string {
  return sha256(line).slice(0, 32);
}

export interface TrailOptions {
  /** Rotate when the file reaches this size, in bytes. */
  maxBytes: number;
  /** Rotated files kept besides the current one. */
  keepFiles: number;
}

/** Longest record line looked for at the end of a file when the head cannot be trusted, bytes. */
const TAIL_WINDOW_BYTES = 256 * 1024;

const APPEND_NO_FOLLOW = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW;

/** Generations oldest first: `<file>.<keepFiles>` … `<file>.1`, `<file>`. */
export function generationsOf(file: string, keepFiles: number): string[] {
  return [...Array.from({ length: keepFiles }, (_, i) => `${file}.${keepFiles - i}`), file];
}

/** The last complete line of a file (a torn, unterminated tail is not one). */
function lastLineOf(file: string): string | undefined {
  const fd = openTrailForReadOrNone(file);
  if (fd === undefined) return undefined;
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, TAIL_WINDOW_BYTES);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    const text = buffer.toString("utf8");
    const complete = text.slice(0, text.lastIndexOf("\n") + 1);
    return complete.split("\n").findLast((l) => l.trim() !== "");
  } finally {
    closeSync(fd);
  }
}

/**
 * The chain state to continue from, when the head is missing or behind its file. Its `sizeBytes` is not
 * known here: the append sets it from the file it wrote.
 */
function headFromFile(file: string, keepFiles: number, previous: TrailHead | undefined): TrailHead {
  for (const generation of generationsOf(file, keepFiles).reverse()) {
    const line = lastLineOf(generation);
    if (line === undefined) continue;
    try {
      const record = JSON.parse(line) as { seq?: unknown };
      if (typeof record.seq === "number" && Number.isSafeInteger(record.seq)) {
        return { ...emptyHead(previous), seq: record.seq, hash: recordHash(line) };
      }
    } catch {
      // not a record: the chain restarts (verify reports the break)
    }
    break;
  }
  return emptyHead(previous);
}

function emptyHead(previous: TrailHead | undefined): TrailHead {
  return {
    seq: 0,
    hash: GENESIS,
    sizeBytes: 0,
    droppedThroughSeq: previous?.droppedThroughSeq ?? 0,
    droppedThroughHash: previous?.droppedThroughHash ?? GENESIS,
  };
}

/** What a writer found missing from a trail: its files end behind the head it read (see the invariants above). */
export interface TrailTruncation {
  file: string;
  /** The head's last seq, and the last seq found in the files (0: none). */
  headSeq: number;
  fileSeq: number;
  /** The current file's size the head recorded, and the size found. */
  headSizeBytes: number;
  fileSizeBytes: number;
}

/**
 * Whether the files, whose last record is `found` and current file `sizeBytes` long, end behind `head`.
 * Crashes only ever leave files ahead of their head: a last seq past it (a writer died before its head
 * write, a rotation's head write lost: the new file is short but the generation before it is ahead), or
 * the same record and more bytes (a torn line). So: a last seq below the head's, or a shorter file whose
 * last record is not past the head, is a truncation. The same seq with another hash is an edit, not a
 * truncation: continuing from the head leaves it visible to verify.
 */
function isBehind(head: TrailHead, found: TrailHead, sizeBytes: number): boolean {
  return found.seq < head.seq || (sizeBytes < head.sizeBytes && found.seq <= head.seq);
}

/**
 * What a writer found of a trail with no readable head, under its lock: `started` (no record in its files:
 * a new trail, announced by the caller), or `headLost` (its files hold records, up to `fileSeq`: the head
 * was deleted or spoiled, reported by the caller as `trail_head_lost`, never continued silently).
 */
export type TrailStart =
  { file: string; started: true } | { file: string; headLost: true; fileSeq: number } | { file: string; rewritten: true; headSeq: number; fileSeq: number };

/** A record waiting to be chained: its time and its event fields. */
export interface PendingRecord {
  ts: string;
  event: Record<string, unknown>;
}

/**
 * What a writer keeps of a trail after its own append: the head it wrote and the file as it left it. If
 * the file is still that file (its inode) at that size, no writer appended or rotated since (every writer
 * appends under the lock, and rotation makes a new file): the next append continues from it without
 * reading the head or the file's tail. Anything else takes the reading path.
 */
export interface TrailMemo {
  ino: bigint;
  /** The head this writer wrote last; its `sizeBytes` is the file's size as the writer left it. */
  stored: StoredHead;
}

/**
 * Appends `records` to the trail under its lock; returns them as written (with `v`, `seq`, `prev`; the
 * records themselves only `withRecords`, else an empty list). Returns
 * undefined, writing nothing, when another live process holds the lock (the caller tries again later);
 * throws when the file cannot be written. `memos`: the writer's TrailMemo per file, kept up to date here.
 * `onTruncated`: told, after the append, when the files were found behind their head (the append then
 * continued from the head).
 */
export function appendChained(
  file: string,
  options: TrailOptions,
  records: PendingRecord[],
  withRecords = false,
  memos?: Map<string, TrailMemo>,
  onTruncated?: (truncation: TrailTruncation) => void,
  onStart?: (start: TrailStart) => void,
): Array<Record<string, unknown>> | undefined {
  const lock = `${file}.lock`;
  if (!lockTrail(lock, file)) return undefined;
  try {
    // Never through a link (ELOOP: the write fails and is reported): a trail file replaced by a symlink
    // would have records appended to the link's target. Never blocking, and a regular file only
    // (trail-file.ts): a FIFO in its place fails the write (ENXIO, or AUDIT_TRAIL_NOT_REGULAR), reported
    // the same way, the records kept.
    const fd = openTrailFile(file, APPEND_NO_FOLLOW, 0o600);
    let stored: StoredHead | undefined;
    let head: TrailHead;
    let ino: bigint;
    let truncation: TrailTruncation | undefined;
    let start: TrailStart | undefined;
    const written: Array<Record<string, unknown>> = [];
    try {
      const before = fstatSync(fd, { bigint: true });
      const memo = memos?.get(file);
      let text = "";
      if (memo && memo.ino === before.ino && memo.stored.head.sizeBytes === Number(before.size)) {
        stored = memo.stored;
        head = stored.head;
      } else {
        const size = Number(before.size);
        stored = readStoredHead(file);
        if (stored && stored.head.sizeBytes === size) head = stored.head;
        else {
          const found = headFromFile(file, options.keepFiles, stored?.head);
          if (!stored) start = found.seq > 0 ? { file, headLost: true, fileSeq: found.seq } : { file, started: true };
          if (stored && isBehind(stored.head, found, size)) {
            head = stored.head;
            truncation = { file, headSeq: head.seq, fileSeq: found.seq, headSizeBytes: head.sizeBytes, fileSizeBytes: size };
          } else if (stored && found.seq === stored.head.seq && found.hash !== stored.head.hash) {
            head = stored.head; // the head's own record was edited (no crash rewrites a record): the next record's prev shows it
          } else if (stored && found.seq > stored.head.seq && hashOfSeq(file, options.keepFiles, stored.head.seq) !== stored.head.hash) {
            // Ahead of the head, but the head's own record is not the one the head names: no crash does
            // that (a dying writer only adds records after it). Records were rewritten and re-chained up
            // to a new end: continue from the head (the duplicate seqs stay for verify), and tell.
            head = stored.head;
            start = { file, rewritten: true, headSeq: head.seq, fileSeq: found.seq };
          } else head = found;
        }
        if (endsMidLine(file, size)) text = "\n"; // a writer that died mid-line: start on a line of our own
      }
      let { seq, hash } = head;
      for (const record of records) {
        seq++;
        // As JSON.stringify({ v, seq, ts, prev, ...event }) writes it, without building that object per record
        // (ts and prev are ISO time and hex: nothing to escape). An event always has a kind, so never "{}".
        const line = `{"v":${RECORD_SCHEMA_VERSION},"seq":${seq},"ts":"${record.ts}","prev":"${hash}",${JSON.stringify(record.event).slice(1)}`;
        if (withRecords) written.push({ v: RECORD_SCHEMA_VERSION, seq, ts: record.ts, prev: hash, ...record.event });
        hash = recordHash(line);
        text += `${line}\n`;
      }
      writeSync(fd, text);
      const after = fstatSync(fd, { bigint: true });
      ino = after.ino;
      head = { ...head, seq, hash, sizeBytes: Number(after.size) };
    } finally {
      closeSync(fd);
    }
    const rotated = head.sizeBytes >= options.maxBytes;
    if (rotated) head = rotate(file, options.keepFiles, head);
    stored = writeHead(file, head, stored);
    // After a rotation the next append makes a new file: it takes the reading path once.
    if (rotated) memos?.delete(file);
    else memos?.set(file, { ino, stored });
    if (truncation) onTruncated?.(truncation);
    if (start) onStart?.(start);
    return written;
  } finally {
    unlockSync(lock);
  }
}

/** The trail's lock; its folder is made only when the lock cannot be made for want of it. */
function lockTrail(lock: string, file: string): boolean {
  try {
    return tryLockSync(lock);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  mkdirSync(dirname(file), { recursive: true });
  return tryLockSync(lock);
}

function rotate(file: string, keepFiles: number, head: TrailHead): TrailHead {
  const oldest = `${file}.${keepFiles}`;
  const line = lastLineOf(oldest);
  let dropped = { droppedThroughSeq: head.droppedThroughSeq, droppedThroughHash: head.droppedThroughHash };
  if (line !== undefined) {
    try {
      const record = JSON.parse(line) as { seq?: unknown };
      if (typeof record.seq === "number") dropped = { droppedThroughSeq: record.seq, droppedThroughHash: recordHash(line) };
    } catch {
      // an unreadable last line: what was dropped cannot be named; verify reports the start as unanchored
    }
  }
  for (let i = keepFiles - 1; i >= 1; i--) {
    try {
      renameSync(`${file}.${i}`, `${file}.${i + 1}`);
    } catch {
      // that generation does not exist yet
    }
  }
  renameSync(file, `${file}.1`);
  return { ...head, ...dropped, sizeBytes: 0 };
}

/**
 * The hash of the last record numbered `seq` in the trail's files, newest generation first; undefined when
 * there is none. Reads whole files, line by line: only on the rare path of files found ahead of their head.
 */
function hashOfSeq(file: string, keepFiles: number, seq: number): string | undefined {
  const start = `{"v":${RECORD_SCHEMA_VERSION},"seq":${seq},`;
  for (const generation of generationsOf(file, keepFiles).reverse()) {
    const fd = openTrailForReadOrNone(generation);
    if (fd === undefined) continue;
    let hash: string | undefined;
    try {
      forEachLine(fd, TAIL_WINDOW_BYTES, ({ text, terminated }) => {
        if (terminated && text?.startsWith(start)) hash = recordHash(text);
      });
    } finally {
      closeSync(fd);
    }
    if (hash !== undefined) return hash;
  }
  return undefined;
}

/** Whether the file's last byte is not a newline: a writer ended mid-line. Reads that byte only. */
function endsMidLine(file: string, size: number): boolean {
  if (size === 0) return false;
  const fd = openTrailForReadOrNone(file);
  if (fd === undefined) return false;
  try {
    const last = Buffer.alloc(1);
    readSync(fd, last, 0, 1, size - 1);
    return last[0] !== 0x0a;
  } finally {
    closeSync(fd);
  }
}
