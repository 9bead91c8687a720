import { constants } from "node:fs";
import { type FileHandle, lstat, open, readlink, realpath } from "node:fs/promises";
import { basename, dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { ToolHostError } from "../errors.js";
import { DEFAULT_PATH_LIMITS, type PathLimits } from "../fs-limits.js";

/**
 * Path confinement for the fs capability. A tool names paths relative to its Anima's directory (an
 * absolute path is accepted only inside it). The rules, in order:
 *  1. the argument is a string without NUL, within the length and depth limits;
 *  2. lexically, it resolves inside the Anima's directory (`..` and absolute paths cannot leave);
 *  3. its parent directory is opened (O_DIRECTORY | O_NOFOLLOW) and what was actually opened is
 *     checked through /proc/self/fd: its real path must be inside. Every later step goes through that
 *     open directory, so a link swapped in after the check cannot redirect it;
 *  4. the final component is never followed if it is a link (O_NOFOLLOW), is opened with O_NONBLOCK (a
 *     FIFO cannot block the host), must be a regular file, and must not have other hard links (which
 *     could be another Anima's file).
 * Messages name paths relative to the Anima's directory only; host paths never appear.
 */
export interface ConfinedPath {
  /** Absolute host path (never shown to the tool). */
  absolute: string;
  /** Path relative to the Anima's directory, `.` for the directory itself; safe to show. */
  relative: string;
}

export class PathConfinement {
  private rootReal: string | undefined;

  constructor(
    readonly root: string,
    private readonly limits: PathLimits = DEFAULT_PATH_LIMITS,
  ) {}

  /** Rules 1-2: a lexical check of the argument. */
  resolve(path: unknown, operation: string): ConfinedPath {
    if (typeof path !== "string") throw violation("InvalidArguments", `${operation}: the path must be a string`);
    if (path === "") throw violation("InvalidArguments", `${operation}: the path is empty`);
    if (path.includes("\0")) throw violation("SandboxViolation", `${operation}: the path contains a NUL byte`);
    if (path.length > this.limits.maxPathChars) {
      throw violation("InvalidArguments", `${operation}: the path is longer than ${this.limits.maxPathChars} characters`);
    }
    const absolute = resolve(this.root, path);
    const rel = relative(this.root, absolute);
    if (rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel)) {
      // An absolute path is not echoed: it would be a host path.
      const shown = isAbsolute(path) ? "an absolute path" : `"${shorten(path)}"`;
      throw violation("SandboxViolation", `${operation}: ${shown} outside the Anima's directory is not allowed`);
    }
    const relativePath = rel === "" ? "." : rel;
    if (relativePath.split(sep).length > this.limits.maxPathDepth) {
      throw violation("InvalidArguments", `${operation}: the path is nested deeper than ${this.limits.maxPathDepth} levels`);
    }
    return { absolute, relative: relativePath };
  }

  async realRoot(): Promise<string> {
    this.rootReal ??= await realpath(this.root);
    return this.rootReal;
  }

  /** True when a real (symlink-free) path lies inside the Anima's directory, or is it. */
  async containsReal(realPath: string): Promise<boolean> {
    const root = await this.realRoot();
    const rel = relative(root, realPath);
    return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
  }

  /**
   * Opens a directory inside the Anima's directory and verifies what was opened (rule 4), then runs
   * `fn` with `/proc/self/fd/<fd>`: a path that refers to exactly that opened directory, so names
   * resolved under it cannot be redirected by a link swapped in after the check (an `openat` in
   * effect). The directory's own last component must not be a link.
   */
  async withDir<T>(dir: ConfinedPath, operation: string, fn: (dirFdPath: string) => Promise<T>): Promise<T> {
    let handle: FileHandle;
    try {
      handle = await open(dir.absolute, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // O_DIRECTORY | O_NOFOLLOW on a link fails with ENOTDIR (or ELOOP): say what it really is.
      if ((code === "ENOTDIR" || code === "ELOOP") && (await lstat(dir.absolute).catch(() => undefined))?.isSymbolicLink()) {
        throw violation("SandboxViolation", `${operation}: "${dir.relative}" is a symbolic link; links are not followed`);
      }
      throw fsError(error, operation, dir.relative);
    }
    try {
      // The kernel's own record of what this descriptor is: immune to later renames and link swaps.
      const opened = await readlink(`/proc/self/fd/${handle.fd}`).catch((error: unknown) => {
        throw fsError(error, operation, dir.relative);
      });
      if (opened.endsWith(" (deleted)")) throw fsError({ code: "ENOENT" }, operation, dir.relative);
      if (!(await this.containsReal(opened))) {
        throw violation("SandboxViolation", `${operation}: "${dir.relative}" leads outside the Anima's directory through a link`);
      }
      return await fn(`/proc/self/fd/${handle.fd}`);
    } finally {
      await handle.close();
    }
  }

  /** Runs `fn` with the verified parent directory of `path` and the last path component. */
  async withParent<T>(path: ConfinedPath, operation: string, fn: (dirFdPath: string, name: string) => Promise<T>): Promise<T> {
    if (path.relative === ".") throw violation("PermissionDenied", `${operation}: the Anima's directory itself cannot be changed`);
    const parentAbsolute = dirname(path.absolute);
    const parent: ConfinedPath = { absolute: parentAbsolute, relative: relative(this.root, parentAbsolute) || "." };
    return this.withDir(parent, operation, (dirFdPath) => fn(dirFdPath, basename(path.absolute)));
  }

  /**
   * Opens a file with O_NOFOLLOW | O_NONBLOCK (no link followed, no FIFO blocking the host) inside its
   * verified parent, and checks it is a regular file without other hard links (one could be another
   * Anima's file). The handle is the caller's to close.
   */
  async openFile(path: ConfinedPath, flags: number, operation: string, mode = 0o644): Promise<FileHandle> {
    return this.withParent(path, operation, async (dirFdPath, name) => {
      let handle: FileHandle;
      try {
        handle = await open(`${dirFdPath}/${name}`, flags | constants.O_NOFOLLOW | constants.O_NONBLOCK, mode);
      } catch (error) {
        throw fsError(error, operation, path.relative);
      }
      try {
        const info = await handle.stat();
        if (!info.isFile()) {
          throw violation(
            info.isDirectory() ? "InvalidArguments" : "SandboxViolation",
            info.isDirectory()
              ? `${operation}: "${path.relative}" is a directory`
              : `${operation}: "${path.relative}" is not a regular file (devices, FIFOs and sockets are refused)`,
          );
        }
        if (info.nlink > 1) throw violation("SandboxViolation", `${operation}: "${path.relative}" has other hard links and is refused`);
        return handle;
      } catch (error) {
        await handle.close();
        throw error;
      }
    });
  }
}

/**
 * Runs `fn` with a `/proc/self/fd/N` path of the folder at `path` (a name inside a held folder), opened
 * O_DIRECTORY | O_NOFOLLOW and checked to be the very folder `listed` (same device and inode), so that
 * a folder swapped for a link after it was listed is never entered. Resolves false, running nothing,
 * when it is no longer that folder; a failed open rejects.
 */
export async function withHeldFolder(path: string | Buffer, listed: { dev: number; ino: number }, fn: (held: string) => Promise<void>): Promise<boolean> {
  const handle = await open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    const opened = await handle.stat();
    if (opened.dev !== listed.dev || opened.ino !== listed.ino) return false;
    await fn(`/proc/self/fd/${handle.fd}`);
    return true;
  } finally {
    await handle.close();
  }
}

/**
 * The path of entry `name` inside the held folder `held` (`/proc/self/fd/N`). Walks list folders with
 * Buffer names and join them here as bytes: a name that is not valid UTF-8 has no string that opens it
 * (decoding replaces its bytes with U+FFFD), yet a walk must still reach it to remove or measure it.
 */
export function entryPath(held: string, name: string | Buffer): string | Buffer {
  return typeof name === "string" ? `${held}/${name}` : Buffer.concat([Buffer.from(`${held}/`), name]);
}

/** Strict: a name that is not valid UTF-8 is refused, not replaced; a leading U+FEFF stays part of the name. */
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A file name read from disk as the string that opens it again, or undefined when no string does. */
export function decodeName(name: Buffer): string | undefined {
  try {
    return STRICT_UTF8.decode(name);
  } catch {
    return undefined;
  }
}

export function violation(type: "SandboxViolation" | "InvalidArguments" | "PermissionDenied", message: string): ToolHostError {
  return new ToolHostError(type, message);
}

/** Translates an errno into a tool-facing error that names only the Anima-relative path. */
export function fsError(error: unknown, operation: string, relativePath: string): ToolHostError {
  if (error instanceof ToolHostError) return error;
  const code = (error as NodeJS.ErrnoException).code;
  switch (code) {
    case "ENOENT":
      return new ToolHostError("NotFound", `${operation}: "${relativePath}" does not exist`);
    case "EEXIST":
      return new ToolHostError("ExecutionError", `${operation}: "${relativePath}" already exists`);
    case "ENOTDIR":
      return new ToolHostError("ExecutionError", `${operation}: a part of "${relativePath}" is not a directory`);
    case "EISDIR":
      return new ToolHostError("ExecutionError", `${operation}: "${relativePath}" is a directory`);
    case "ENOTEMPTY":
      return new ToolHostError("ExecutionError", `${operation}: "${relativePath}" is not empty (use recursive)`);
    case "ENXIO":
    case "ENODEV":
      return violation("SandboxViolation", `${operation}: "${relativePath}" is not a regular file`);
    case "ELOOP":
      return violation("SandboxViolation", `${operation}: "${relativePath}" goes through a symbolic link; links are not followed`);
    case "EACCES":
    case "EPERM":
      // The file system's own permissions are the operator's setup: neither a tool nor its caller can change them.
      return new ToolHostError(
        "PermissionDenied",
        `${operation}: access to "${relativePath}" is denied by the system`,
        "an operator can give the user who runs animaworks-tool access to it",
        "host",
      );
    default:
      return new ToolHostError("ExecutionError", `${operation}: "${relativePath}" failed (${code ?? "error"})`);
  }
}

function shorten(text: string): string {
  return text.length > 120 ? `${text.slice(0, 120)}…` : text;
}
