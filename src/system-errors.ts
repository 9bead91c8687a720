import { ToolHostError } from "./errors.js";

/**
 * One translation of the operating system's file errors that reach an operator (a data dir the user
 * cannot read or write, a read-only or full disk) into the host's error types, with the path and what to
 * do. Tool-facing file errors are translated by the fs capability instead (they never show host paths).
 */
const ACCESS_CODES = new Set(["EACCES", "EPERM", "EROFS"]);
const SPACE_CODES = new Set(["ENOSPC", "EDQUOT"]);

const VERBS: Readonly<Record<string, string>> = {
  open: "open", mkdir: "create the folder", scandir: "list the folder", rename: "rename", unlink: "remove", rmdir: "remove the folder",
  stat: "look at", lstat: "look at", access: "reach", write: "write", read: "read", copyfile: "copy", chmod: "change the mode of", utime: "touch",
};

/** A `ToolHostError` for an access or disk-space error of the system (with its path), else undefined. */
export function systemFileError(error: unknown, path?: string): ToolHostError | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, syscall } = error as NodeJS.ErrnoException;
  if (code === undefined || (!ACCESS_CODES.has(code) && !SPACE_CODES.has(code))) return undefined;
  const where = (error as NodeJS.ErrnoException).path ?? path ?? "a file of the data dir";
  const verb = (syscall && VERBS[syscall]) ?? "use";
  if (SPACE_CODES.has(code)) {
    return new ToolHostError("ExecutionError", `cannot ${verb} ${where}: no space left on its file system (${code})`, "free space (or raise the quota) on the data dir's file system, then run it again");
  }
  const why = code === "EROFS" ? "the file system is read-only" : "permission denied";
  return new ToolHostError("PermissionDenied", `cannot ${verb} ${where}: ${why} (${code})`, accessHint());
}

/** What to do about a data dir this user cannot read or write. */
export function accessHint(): string {
  const uid = process.getuid?.();
  return `the data dir must be readable and writable by the user who runs animaworks-tool${uid === undefined ? "" : ` (uid ${uid})`}: run it as the data dir's owner, or fix the permissions`;
}
