import { closeSync, constants, openSync, readSync, renameSync, rmSync, writeSync } from "node:fs";
import { sha256 } from "../bundling/sha256.js";
import { openTrailFile } from "./trail-file.js";

/**
 * A trail's head file `<file>.head` (trail.ts): where the chain stands, rewritten after every append.
 *
 * Two slots of `HEAD_SLOT_BYTES`, each one head as a JSON line padded with spaces, with `n` (how many heads
 * were written before it) and `check` (a hash of the rest). A writer overwrites the slot of the older head
 * in place (`n + 1` goes to slot `(n + 1) % 2`), so that a write torn by a crash spoils only that slot and a
 * reader falls back to the other, the head before: a head read is whole or the one before, as a renamed
 * file gave, without the rename (on ext4, replacing a file by rename starts the new file's write-back: it
 * was the largest part of an append's cost). Slots never straddle a 4 KiB page.
 *
 * Heads written as one JSON object (before the slots) are read as `n = 0`; the next write replaces such a
 * file, or a missing or unreadable one, whole, through a renamed temporary file.
 */
export interface TrailHead {
  seq: number;
  hash: string;
  /** Size of the current file after the last record, bytes. */
  sizeBytes: number;
  /** Last seq and hash of the generation rotation dropped last (0 and GENESIS when none was). */
  droppedThroughSeq: number;
  droppedThroughHash: string;
}

/** A head as read, with the count that says which slot its successor goes to (undefined: no slotted file to update). */
export interface StoredHead {
  head: TrailHead;
  n: number | undefined;
}

export const HEAD_SLOT_BYTES = 256;
/** `prev` of a trail's first record (trail.ts), and the hash a head names as dropped before any rotation. */
export const GENESIS = "0".repeat(32);

export function headFileOf(file: string): string {
  return `${file}.head`;
}

export function readHead(file: string): TrailHead | undefined {
  return readStoredHead(file)?.head;
}

/** The newest whole head of the file, undefined when there is none. */
export function readStoredHead(file: string): StoredHead | undefined {
  let text: string;
  try {
    // Non-blocking and regular only (trail-file.ts): a FIFO in its place is no head, never a hang.
    const fd = openTrailFile(headFileOf(file), constants.O_RDONLY);
    try {
      const buffer = Buffer.alloc(2 * HEAD_SLOT_BYTES + 1);
      text = buffer.toString("utf8", 0, readSync(fd, buffer, 0, buffer.length, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
  if (text.length !== 2 * HEAD_SLOT_BYTES) {
    const head = parseHead(text);
    return head && { head, n: undefined };
  }
  let newest: StoredHead | undefined;
  for (const slot of [text.slice(0, HEAD_SLOT_BYTES), text.slice(HEAD_SLOT_BYTES)]) {
    const read = parseSlot(slot);
    if (read && (newest === undefined || read.n! > newest.n!)) newest = read;
  }
  return newest;
}

/**
 * Writes `head` as the successor of `previous` (what `readStoredHead` gave, or the last `writeHead` returned):
 * into the older slot when the file has slots, else as a new file. Returns the head as stored.
 */
export function writeHead(file: string, head: TrailHead, previous: StoredHead | undefined): StoredHead {
  const path = headFileOf(file);
  if (previous?.n !== undefined) {
    const n = previous.n + 1;
    let fd: number | undefined;
    try {
      // Never through a link: a head replaced by a symlink would have this write land in the link's target.
      fd = openTrailFile(path, constants.O_RDWR | constants.O_NOFOLLOW);
    } catch {
      // gone since it was read, or not a regular file (a FIFO: replaced, never written or waited on): written whole below (a rename replaces a link itself)
    }
    if (fd !== undefined) {
      try {
        writeSync(fd, slotOf(head, n), (n % 2) * HEAD_SLOT_BYTES);
      } finally {
        closeSync(fd);
      }
      return { head, n };
    }
  }
  // Slot 0 the new head, slot 1 the same head one count older: a reader finds a whole head in either.
  // A new file of its own (a link or file left at the temporary name is removed, never written through).
  const temporary = `${path}.tmp`;
  rmSync(temporary, { force: true });
  const fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    writeSync(fd, slotOf(head, 2) + slotOf(head, 1));
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, path);
  return { head, n: 2 };
}

function slotOf(head: TrailHead, n: number): string {
  const fields = JSON.stringify({ n, ...pick(head) });
  const line = `${fields.slice(0, -1)},"check":"${checkOf(fields)}"}`;
  if (line.length >= HEAD_SLOT_BYTES) throw new Error(`an audit trail head does not fit its slot (${line.length} bytes)`);
  return `${line.padEnd(HEAD_SLOT_BYTES - 1)}\n`;
}

function parseSlot(slot: string): StoredHead | undefined {
  const read = parseJson(slot);
  if (read === undefined) return undefined;
  const head = headOf(read);
  const n = read["n"];
  if (!head || typeof n !== "number" || !Number.isSafeInteger(n) || read["check"] !== checkOf(JSON.stringify({ n, ...pick(head) }))) return undefined;
  return { head, n };
}

function parseHead(text: string): TrailHead | undefined {
  const read = parseJson(text);
  return read && headOf(read);
}

/** A head's fields; a field an older writer left out reads as "not known" (a size no file has: the writer recovers from the file). */
function headOf(read: Record<string, unknown>): TrailHead | undefined {
  if (!Number.isSafeInteger(read["seq"]) || typeof read["hash"] !== "string") return undefined;
  return {
    seq: read["seq"] as number,
    hash: read["hash"],
    sizeBytes: Number.isSafeInteger(read["sizeBytes"]) ? (read["sizeBytes"] as number) : -1,
    droppedThroughSeq: Number.isSafeInteger(read["droppedThroughSeq"]) ? (read["droppedThroughSeq"] as number) : 0,
    droppedThroughHash: typeof read["droppedThroughHash"] === "string" ? read["droppedThroughHash"] : GENESIS,
  };
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The head's own fields in a fixed order (what the check covers). */
function pick(head: TrailHead): TrailHead {
  return {
    seq: head.seq,
    hash: head.hash,
    sizeBytes: head.sizeBytes,
    droppedThroughSeq: head.droppedThroughSeq,
    droppedThroughHash: head.droppedThroughHash,
  };
}

function checkOf(fields: string): string {
  return sha256(fields).slice(0, 16);
}
