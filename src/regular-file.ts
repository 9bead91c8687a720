import { type Stats, close, closeSync, constants, fstat, fstatSync, open, openSync, read, readSync } from "node:fs";
import { ToolHostError } from "./errors.js";

/**
 * Reading a file named on a command line (`--args-file F`) or found in the data dir (`config.json`, an
 * Anima's permissions, the credential stores), so that no such file can hang or swamp the reader, whoever
 * serves the call:
 *
 *  - it is opened with O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever
 *    (and, in a long-running host, hold one of libuv's four file threads while it waits: five such calls
 *    once wedged every file operation of the daemon);
 *  - only a regular file is read (not a FIFO, socket or device: `/dev/zero` never ends);
 *  - at most `maxBytes` are read, whatever the file claims its size is (it may grow while it is read).
 *
 * node:fs and the error type only: the thin client (src/cli/client.ts) loads this module.
 */

/** Why a file could not be read: each maps to one sentence the caller puts after the file's name. */
export type UnreadableReason =
  { kind: "missing" } | { kind: "not-regular"; what: string } | { kind: "too-large"; bytes: number; maxBytes: number } | { kind: "unreadable"; code: string };

export class UnreadableFile extends Error {
  constructor(
    readonly path: string,
    readonly reason: UnreadableReason,
  ) {
    super(`${path} ${describeReason(reason)}`);
    this.name = "UnreadableFile";
  }
}

export function describeReason(reason: UnreadableReason): string {
  switch (reason.kind) {
    case "missing":
      return "does not exist";
    case "not-regular":
      return `is not a regular file (it is ${reason.what})`;
    case "too-large":
      return `is larger than the ${reason.maxBytes}-byte limit`;
    case "unreadable":
      return `cannot be read (${reason.code})`;
  }
}

/** What kind of file a stat describes, for messages ("a FIFO", "a character device", …). */
/** What a file that is not a regular one is, for a message ("a FIFO", "a character device"…). */
export function kindOf(stats: {
  isDirectory(): boolean;
  isFIFO(): boolean;
  isSocket(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
}): string {
  if (stats.isDirectory()) return "a directory";
  if (stats.isFIFO()) return "a FIFO";
  if (stats.isSocket()) return "a socket";
  if (stats.isCharacterDevice()) return "a character device";
  if (stats.isBlockDevice()) return "a block device";
  return "not a plain file";
}

function openFailure(path: string, error: unknown): UnreadableFile {
  const code = (error as NodeJS.ErrnoException).code ?? "error";
  return new UnreadableFile(path, code === "ENOENT" || code === "ENOTDIR" ? { kind: "missing" } : { kind: "unreadable", code });
}

/** The bytes of the regular file at `path`, at most `maxBytes`; throws `UnreadableFile` otherwise. Synchronous (the thin client). */
export function readRegularFileSync(path: string, maxBytes: number): Buffer {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    throw openFailure(path, error);
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw new UnreadableFile(path, { kind: "not-regular", what: kindOf(stats) });
    if (stats.size > maxBytes) throw new UnreadableFile(path, { kind: "too-large", bytes: stats.size, maxBytes });
    // One byte more than allowed tells a file that grew past the limit from one that ends at it.
    const buffer = Buffer.allocUnsafe(Math.min(stats.size, maxBytes) + 1);
    let length = 0;
    for (;;) {
      const read = readSync(fd, buffer, length, buffer.length - length, null);
      if (read === 0) break;
      length += read;
      if (length === buffer.length) {
        if (length > maxBytes) throw new UnreadableFile(path, { kind: "too-large", bytes: length, maxBytes });
        break;
      }
    }
    return buffer.subarray(0, length);
  } catch (error) {
    if (error instanceof UnreadableFile) throw error;
    throw new UnreadableFile(path, { kind: "unreadable", code: (error as NodeJS.ErrnoException).code ?? "error" });
  } finally {
    closeSync(fd);
  }
}

/** Chunk size of `readRegularFile`: the read yields to the event loop (and checks its signal) between chunks. */
const READ_CHUNK_BYTES = 1024 * 1024;

/**
 * As `readRegularFileSync`, without blocking the event loop: a long-running host serves other calls
 * while it reads, and stops reading when `signal` aborts (the caller went away). Through node:fs's
 * callbacks, not node:fs/promises: a one-shot CLI call checks its cached bundle's recently edited inputs
 * with this, and loading node:fs/promises costs it milliseconds (test/cli/launcher.test.ts).
 */
export async function readRegularFile(path: string, maxBytes: number, signal?: AbortSignal): Promise<Buffer> {
  let fd: number;
  try {
    fd = await new Promise<number>((resolve, reject) =>
      open(path, constants.O_RDONLY | constants.O_NONBLOCK, (error, opened) => (error ? reject(error) : resolve(opened))),
    );
  } catch (error) {
    throw openFailure(path, error);
  }
  try {
    const stats = await new Promise<Stats>((resolve, reject) => fstat(fd, (error, status) => (error ? reject(error) : resolve(status))));
    if (!stats.isFile()) throw new UnreadableFile(path, { kind: "not-regular", what: kindOf(stats) });
    if (stats.size > maxBytes) throw new UnreadableFile(path, { kind: "too-large", bytes: stats.size, maxBytes });
    return await readToEnd(fd, maxBytes, (bytes) => new UnreadableFile(path, { kind: "too-large", bytes, maxBytes }), signal);
  } catch (error) {
    if (error instanceof UnreadableFile || signal?.aborted) throw error;
    throw new UnreadableFile(path, { kind: "unreadable", code: (error as NodeJS.ErrnoException).code ?? "error" });
  } finally {
    close(fd, () => {});
  }
}

/**
 * The rest of the open descriptor `fd`, a chunk of at most `READ_CHUNK_BYTES` at a time (the event loop
 * turns between chunks, and `signal` is checked), throwing `tooLarge(bytes read)` once more than
 * `maxBytes` came: one byte more tells a file that grew past the bound from one that ends at it.
 */
export async function readToEnd(fd: number, maxBytes: number, tooLarge: (bytes: number) => Error, signal?: AbortSignal): Promise<Buffer> {
  const parts: Buffer[] = [];
  let length = 0;
  for (;;) {
    signal?.throwIfAborted();
    const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK_BYTES, maxBytes + 1 - length));
    const bytesRead = await new Promise<number>((resolve, reject) =>
      read(fd, chunk, 0, chunk.length, null, (error, count) => (error ? reject(error) : resolve(count))),
    );
    if (bytesRead === 0) break;
    parts.push(chunk.subarray(0, bytesRead));
    length += bytesRead;
    if (length > maxBytes) throw tooLarge(length);
  }
  return Buffer.concat(parts, length);
}

/**
 * The text of a file the host reads from a data dir on every call that needs it (permissions, credential
 * stores, the vault): one that an Anima's owner can replace by a FIFO or a device must not hold a
 * long-running host that serves every Anima. Undefined when there is no such file; `UnreadableFile` for
 * anything else but a regular file of at most `maxBytes`.
 */
export async function readTextFileIfPresent(path: string, maxBytes: number): Promise<string | undefined> {
  try {
    return (await readRegularFile(path, maxBytes)).toString("utf8");
  } catch (error) {
    if (error instanceof UnreadableFile && error.reason.kind === "missing") return undefined;
    throw error;
  }
}

/** `readTextFileIfPresent`, synchronous: for the one-shot CLI's path, which must not load fs/promises. */
export function readTextFileIfPresentSync(path: string, maxBytes: number): string | undefined {
  try {
    return readRegularFileSync(path, maxBytes).toString("utf8");
  } catch (error) {
    if (error instanceof UnreadableFile && error.reason.kind === "missing") return undefined;
    throw error;
  }
}

/** Why a read failed, as the phrase after the file's name: an `UnreadableFile`'s reason, else the error's message. */
export function unreadableReason(error: unknown): string {
  return error instanceof UnreadableFile ? describeReason(error.reason) : `cannot be read (${error instanceof Error ? error.message : String(error)})`;
}

/** A `ToolHostError` (InvalidArguments, exit 2) for a file given on the command line as `option`. */
export function argumentFileError(option: string, error: UnreadableFile): ToolHostError {
  const hint =
    error.reason.kind === "too-large"
      ? "pass fewer or smaller arguments (a large text belongs in a file the tool reads itself)"
      : "give the path of a regular file (or --args-file - to read stdin)";
  return new ToolHostError("InvalidArguments", `${option} ${error.path} ${describeReason(error.reason)}`, hint);
}
