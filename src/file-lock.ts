import { closeSync, constants, fstatSync, openSync, readSync, rmSync, unlinkSync, writeSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { isProcessAlive } from "./process-alive.js";

/** How long `withLock` waits for a live holder before giving up, ms. */
const LOCK_WAIT_MS = 10_000;
const LOCK_RETRY_MS = 25;

/** How long to wait for a lock a live process holds. */
export interface LockWait {
  /** Longest wait before giving up, ms. Default: 10,000. */
  waitMs?: number;
  /** Time between tries, ms. Default: 25. */
  retryMs?: number;
}

/**
 * Runs `fn` holding the lock file `path` (created O_EXCL with this process's pid). A lock whose holder is
 * no longer alive on this machine is taken over. Used around the check-then-bind of the endpoint socket,
 * so that of several hosts starting at once exactly one binds and none removes another's live socket.
 * Throws when a live holder keeps it past the wait.
 */
export async function withLock<T>(path: string, fn: () => Promise<T>, wait: LockWait = {}): Promise<T> {
  const waitMs = wait.waitMs ?? LOCK_WAIT_MS;
  if (!(await waitForLock(path, waitMs, wait.retryMs ?? LOCK_RETRY_MS))) throw new Error(`could not take ${path}: held by a live process for ${waitMs} ms`);
  try {
    return await fn();
  } finally {
    rmSync(path, { force: true });
  }
}

/**
 * `withLock` for work that may be skipped: undefined, without running `fn`, when a live holder keeps the
 * lock past the wait (the holder is doing the same work).
 */
export async function withLockIfFree<T>(path: string, fn: () => T | Promise<T>, wait: LockWait = {}): Promise<T | undefined> {
  if (!(await waitForLock(path, wait.waitMs ?? LOCK_WAIT_MS, wait.retryMs ?? LOCK_RETRY_MS))) return undefined;
  try {
    return await fn();
  } finally {
    rmSync(path, { force: true });
  }
}

async function waitForLock(path: string, waitMs: number, retryMs: number): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  while (!tryLock(path)) {
    if (Date.now() > deadline) return false;
    await delay(retryMs);
  }
  return true;
}

/**
 * Takes the lock file `path` now if no live process holds it (a dead holder's lock is taken over);
 * false when one does. For writers that must not wait (the audit trail retries on its next flush).
 */
export function tryLockSync(path: string): boolean {
  return tryLock(path);
}

export function unlockSync(path: string): void {
  // unlink, not rm: rm looks first at what the path is, a second system call on every audit append.
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

function tryLock(path: string): boolean {
  try {
    const fd = openSync(path, "wx", 0o600);
    try {
      writeSync(fd, String(process.pid));
    } finally {
      closeSync(fd);
    }
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const holderLock = readHolder(path);
  if (holderLock === "retry") return false; // removed meanwhile: try again
  if (holderLock === "not-a-lock") {
    // A link, FIFO, socket or device in the lock's place is no holder's lock: reading it could block (a
    // FIFO) or follow a link out of the folder. It is unlinked (a directory is not, and fails the take).
    rmSync(path, { force: true });
    return false;
  }
  const { text, ageMs } = holderLock;
  // An empty file is a holder between open and write (or one that died there, if it stays empty). A
  // dead holder's lock is stale. (Two takers of one stale lock could both remove it; the endpoint then
  // notices that its socket was replaced and a daemon stops: see Endpoint.stillOurs.)
  const holder = Number(text);
  const stale = text === "" ? ageMs > 5_000 : !Number.isSafeInteger(holder) || holder <= 0 || !isProcessAlive(holder);
  if (stale) rmSync(path, { force: true });
  return false;
}

/** A lock file holds a pid: a few digits. */
const MAX_LOCK_BYTES = 32;

/**
 * The holder's pid text and the lock's age, read without following a link and without blocking: the lock's
 * folder may be one that someone else can write (an Anima's audit folder), and a FIFO put in the lock's
 * place once froze the daemon in a synchronous read.
 */
function readHolder(path: string): { text: string; ageMs: number } | "retry" | "not-a-lock" {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return "retry";
    if (code === "ELOOP" || code === "ENXIO") return "not-a-lock"; // a link; a socket
    if (code === "EISDIR") throw new Error(`could not take ${path}: a directory is in the lock's place`, { cause: error });
    throw error;
  }
  try {
    const stats = fstatSync(fd);
    if (stats.isDirectory()) throw new Error(`could not take ${path}: a directory is in the lock's place`);
    if (!stats.isFile() || stats.size > MAX_LOCK_BYTES) return "not-a-lock";
    const buffer = Buffer.alloc(MAX_LOCK_BYTES);
    const length = readSync(fd, buffer, 0, MAX_LOCK_BYTES, 0);
    return { text: buffer.toString("utf8", 0, length), ageMs: Date.now() - stats.mtimeMs };
  } finally {
    closeSync(fd);
  }
}
