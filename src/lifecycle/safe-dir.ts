import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { type FileHandle, lstat, mkdir, open, readlink, unlink } from "node:fs/promises";
import { join, sep } from "node:path";
import { type ConfinedPath, type PathConfinement, fsError, violation } from "../capabilities/paths.js";

/**
 * File primitives for the lifecycle operations (write_memory_file, share), on top of PathConfinement's
 * verified directory descriptors. One rule stricter than the fs capability: a directory is used only if
 * its real path is exactly the lexical one, so no link anywhere on the way is followed, not even one
 * that stays inside the Anima's directory. (Otherwise `notes -> state` would let `notes/sub/x` write
 * into the host's state, or `notes -> tools` bypass the tool-creation permission, while every lexical
 * check saw `notes/…`.)
 */
export async function withExactDir<T>(
  paths: PathConfinement,
  relativeDir: string,
  operation: string,
  options: { create: boolean },
  fn: (dirFdPath: string) => Promise<T>,
): Promise<T> {
  const dir = paths.resolve(relativeDir === "" ? "." : relativeDir, operation);
  if (options.create && dir.relative !== ".") {
    const segments = dir.relative.split(sep);
    const parent = segments.slice(0, -1).join(sep);
    const name = segments[segments.length - 1] as string;
    // Each missing level is created inside its own verified parent, so no level can be a link out.
    await withExactDir(paths, parent, operation, options, async (parentFd) => {
      const existing = await lstat(`${parentFd}/${name}`).catch(() => undefined);
      if (existing?.isDirectory()) return;
      if (existing?.isSymbolicLink()) throw violation("SandboxViolation", `${operation}: "${dir.relative}" is a symbolic link; links are not followed`);
      if (existing) throw violation("InvalidArguments", `${operation}: "${dir.relative}" exists and is not a directory`);
      await mkdir(`${parentFd}/${name}`).catch((error: unknown) => {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw fsError(error, operation, dir.relative);
      });
    });
  }
  return paths.withDir(dir, operation, async (dirFdPath) => {
    const opened = await readlink(dirFdPath);
    const expected = dir.relative === "." ? await paths.realRoot() : join(await paths.realRoot(), dir.relative);
    if (opened !== expected) {
      throw violation("SandboxViolation", `${operation}: "${dir.relative}" goes through a symbolic link; links are not followed`);
    }
    return fn(dirFdPath);
  });
}

/** The parent directory of a confined path, relative to the root (`""` for the root itself). */
export function parentOf(target: ConfinedPath): string {
  const segments = target.relative.split(sep);
  return segments.slice(0, -1).join(sep);
}

export function nameOf(target: ConfinedPath): string {
  return target.relative.split(sep).pop() as string;
}

/**
 * Reads `name` in a verified directory: never through a link (O_NOFOLLOW), never blocking on a FIFO
 * (O_NONBLOCK), only a regular file without other hard links (one could be another Anima's file),
 * at most `maxBytes` (counted on bytes read). Undefined when it does not exist.
 */
export async function readRegularFile(
  dirFdPath: string,
  name: string,
  shownPath: string,
  operation: string,
  maxBytes: number,
): Promise<{ bytes: Buffer; mode: number } | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(`${dirFdPath}/${name}`, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    throw fsError(error, operation, shownPath);
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw violation("SandboxViolation", `${operation}: "${shownPath}" is not a regular file`);
    if (info.nlink > 1) throw violation("SandboxViolation", `${operation}: "${shownPath}" has other hard links and is refused`);
    const chunks: Buffer[] = [];
    const chunk = Buffer.alloc(64 * 1024);
    let total = 0;
    for (;;) {
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > maxBytes) throw violation("PermissionDenied", `${operation}: "${shownPath}" is larger than ${maxBytes} bytes`);
      chunks.push(Buffer.from(chunk.subarray(0, bytesRead)));
    }
    return { bytes: Buffer.concat(chunks, total), mode: info.mode & 0o777 };
  } finally {
    await handle.close();
  }
}

/**
 * Writes `bytes` to a new hidden temporary file in a verified directory and flushes it to disk, so that
 * a later rename or link publishes complete content even across a crash. Hidden (`.` prefix): tool
 * discovery and watchers ignore it. Returns the temporary name; the caller publishes or removes it.
 */
export async function writeTempFile(dirFdPath: string, name: string, bytes: Uint8Array, mode: number): Promise<string> {
  const temp = `.${name}.${randomBytes(6).toString("hex")}.tmp`;
  const handle = await open(`${dirFdPath}/${temp}`, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    await handle.writeFile(bytes);
    await handle.datasync();
    await handle.close();
  } catch (error) {
    await handle.close().catch(() => {});
    await unlink(`${dirFdPath}/${temp}`).catch(() => {});
    throw error;
  }
  return temp;
}

/** Flushes a directory's entries (a rename or link in it) to disk. Best effort: not every filesystem allows it. */
export async function syncDir(dirFdPath: string): Promise<void> {
  const handle = await open(dirFdPath, constants.O_RDONLY | constants.O_DIRECTORY).catch(() => undefined);
  if (!handle) return;
  await handle.sync().catch(() => {});
  await handle.close();
}

/**
 * Serialises async work per key within this process (read-modify-write of one file: two appends must not
 * both read the old content). Other processes are not covered; see write-memory.ts.
 */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => mine);
    this.tails.set(key, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
