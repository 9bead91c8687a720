import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";

/**
 * Opening and reading the files of a trail (its generations and head, trail.ts / trail-head.ts) so that
 * whoever can write the data dir cannot hang or swamp the host or `audit verify` with them:
 *
 *  - every open is O_NONBLOCK: a FIFO in place of a trail would otherwise block the open (for writing,
 *    until a reader comes; for reading, until a writer does), freezing a daemon's event loop for every
 *    Anima (a blocked open does not even let SIGTERM's handler run);
 *  - every opened file must be a regular file (fstat): not a FIFO, socket, device or directory. A trail
 *    file that is not one is an error with the stable code `AUDIT_TRAIL_NOT_REGULAR`, never taken for "no
 *    file": a writer's append fails and is reported (its records wait, as for a symlink), verify reports
 *    the trail broken.
 *
 * Invariant: a successful open here returns a descriptor of a regular file; "missing" is only ENOENT.
 */

export const NOT_REGULAR_CODE = "AUDIT_TRAIL_NOT_REGULAR";

export class TrailFileNotRegular extends Error {
  readonly code = NOT_REGULAR_CODE;
  constructor(readonly path: string) {
    super(`${NOT_REGULAR_CODE}: the audit trail file ${path} is not a regular file (a FIFO, socket, device or directory was put in its place)`);
    this.name = "TrailFileNotRegular";
  }
}

/** Throws `TrailFileNotRegular` (closing `fd`) unless `fd` is a regular file. */
export function requireRegular(fd: number, path: string): void {
  let regular: boolean;
  try {
    regular = fstatSync(fd).isFile();
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  if (!regular) {
    closeSync(fd);
    throw new TrailFileNotRegular(path);
  }
}

/** `openSync(path, flags | O_NONBLOCK, mode)` of a regular file; throws as openSync does, or `TrailFileNotRegular`. */
export function openTrailFile(path: string, flags: number, mode?: number): number {
  const fd = openSync(path, flags | constants.O_NONBLOCK, mode);
  requireRegular(fd, path);
  return fd;
}

/** A regular file opened for reading; undefined when there is no file at `path` (ENOENT/ENOTDIR), throws otherwise. */
export function openTrailForRead(path: string): number | undefined {
  try {
    return openTrailFile(path, constants.O_RDONLY);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw error;
  }
}

/** Like `openTrailForRead`, but anything but a readable regular file is "none" (for best-effort readers). */
export function openTrailForReadOrNone(path: string): number | undefined {
  try {
    return openTrailForRead(path);
  } catch {
    return undefined;
  }
}

/** Longest line taken for a record, bytes (verify, `read`): the writer bounds every record (boundEvent) far below it. */
export const MAX_LINE_BYTES = 4 * 1024 * 1024;

/** Bytes read per chunk by `forEachLine`. */
const CHUNK_BYTES = 1024 * 1024;

/** One line of a file as `forEachLine` gives it. */
export interface FileLine {
  /** The line's text, without its newline; undefined when it is longer than the bound (not a record). */
  text: string | undefined;
  /** 1-based. */
  number: number;
  /** False for the file's last line when no newline ends it. */
  terminated: boolean;
}

/**
 * Calls `visit` for every line of the open file `fd`, read in chunks: a file of any size is read without
 * ever being one string (a string has a length limit: a file padded past it must not read as "no file").
 * A line longer than `maxLineBytes` is given with `text` undefined, its bytes never held.
 */
export function forEachLine(fd: number, maxLineBytes: number, visit: (line: FileLine) => void): void {
  for (const line of linesOf(fd, maxLineBytes)) visit(line);
}

/** `forEachLine`'s lines, one at a time: a reader that must yield to the event loop now and then iterates these. */
export function* linesOf(fd: number, maxLineBytes: number): Generator<FileLine, void, undefined> {
  const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  let parts: Buffer[] = [];
  let partBytes = 0;
  let oversize = false;
  let number = 0;
  const take = (terminated: boolean): FileLine => {
    number++;
    const line = { text: oversize ? undefined : Buffer.concat(parts, partBytes).toString("utf8"), number, terminated };
    parts = [];
    partBytes = 0;
    oversize = false;
    return line;
  };
  const add = (bytes: Buffer) => {
    if (oversize || bytes.length === 0) return;
    if (partBytes + bytes.length > maxLineBytes) {
      oversize = true;
      parts = [];
      partBytes = 0;
      return;
    }
    parts.push(Buffer.from(bytes));
    partBytes += bytes.length;
  };
  for (;;) {
    const read = readSync(fd, chunk, 0, CHUNK_BYTES, null);
    if (read === 0) break;
    let start = 0;
    for (let newline = chunk.indexOf(0x0a, start); newline >= 0 && newline < read; newline = chunk.indexOf(0x0a, start)) {
      add(chunk.subarray(start, newline));
      yield take(true);
      start = newline + 1;
    }
    add(chunk.subarray(start, read));
  }
  if (partBytes > 0 || oversize) yield take(false);
}
