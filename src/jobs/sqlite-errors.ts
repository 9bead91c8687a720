import type Database from "better-sqlite3";
import { ToolHostError, accessHint, systemFileError } from "../errors.js";

/**
 * What the embedded job store says when its database fails: the file, what happened and what to do,
 * with the host as the one who must act (a full disk, a damaged or unreadable file are the operator's
 * to fix). SQLite's own words ("file is not a database", "database or disk is full") name no file and
 * no remedy; every error of the store passes through `jobStoreError` before a caller sees it.
 */

/** SQLite's result code family: `SQLITE_IOERR_WRITE` → `SQLITE_IOERR`. */
function family(code: string): string {
  const match = /^SQLITE_[A-Z]+/.exec(code);
  return match ? match[0] : code;
}

function isSqliteError(error: unknown): error is Error & { code: string } {
  const code = (error as { code?: unknown } | null)?.code;
  return error instanceof Error && typeof code === "string" && code.startsWith("SQLITE_");
}

/** The remedy for a damaged database file: set it aside; a new one is made at the next use. */
export function damagedHint(path: string): string {
  return (
    `move it and its -wal and -shm files aside (mv ${path} ${path}.damaged) and run the command again: a new, empty job database is made; ` +
    `the jobs recorded in the damaged one are lost unless you recover them (sqlite3 ${path}.damaged .recover)`
  );
}

/**
 * `error` as the operator should see it: a ToolHostError as it is, an SQLite or file system error of
 * the database at `path` translated.
 */
export function jobStoreError(error: unknown, path: string): unknown {
  if (error instanceof ToolHostError) return error;
  if (!isSqliteError(error)) return systemFileError(error, path) ?? error;
  const code = error.code;
  switch (family(code)) {
    case "SQLITE_FULL":
      return new ToolHostError(
        "ExecutionError",
        `cannot write the job database ${path}: its file system is full (${code})`,
        "free space on the data dir's file system (or raise its quota), then run it again",
        "host",
      );
    case "SQLITE_NOTADB":
    case "SQLITE_CORRUPT":
      return new ToolHostError("ExecutionError", `the job database ${path} is damaged: ${error.message} (${code})`, damagedHint(path), "host");
    case "SQLITE_CANTOPEN":
      return new ToolHostError(
        "ExecutionError",
        `cannot open the job database ${path} (${code})`,
        "it must be a regular file in a folder the user who runs animaworks-tool can write to",
        "host",
      );
    case "SQLITE_READONLY":
    case "SQLITE_PERM":
    case "SQLITE_AUTH":
      return new ToolHostError("PermissionDenied", `cannot write the job database ${path}: ${error.message} (${code})`, accessHint(), "host");
    case "SQLITE_BUSY":
    case "SQLITE_LOCKED":
      return new ToolHostError(
        "ExecutionError",
        `the job database ${path} stayed locked by another process (${code})`,
        "run it again; if it persists, look for a stuck animaworks-tool process using this data dir",
        "host",
      );
    case "SQLITE_IOERR":
      return new ToolHostError(
        "ExecutionError",
        `the disk failed a read or write of the job database ${path} (${code})`,
        "check the disk and its file system (dmesg), then run it again",
        "host",
      );
    default:
      return new ToolHostError(
        "ExecutionError",
        `the job database ${path} failed: ${error.message} (${code})`,
        "run it again; if it persists, move the database aside as for a damaged one",
        "host",
      );
  }
}

/**
 * Refuses a damaged database at open (`PRAGMA quick_check`: every page and index entry is read, in
 * time linear in the file's size), so that garbage in the middle of the file is reported at once, with
 * the file and the remedy, instead of as wrong answers or a failure at some later write.
 */
export function checkIntegrity(db: Database.Database, path: string): void {
  const rows = db.pragma("quick_check(5)") as Array<{ quick_check: string }>;
  const problems = rows.map((row) => row.quick_check).filter((text) => text !== "ok");
  if (problems.length === 0) return;
  throw new ToolHostError("ExecutionError", `the job database ${path} is damaged (SQLite quick_check: ${problems.join("; ")})`, damagedHint(path), "host");
}
