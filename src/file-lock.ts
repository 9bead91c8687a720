import { closeSync, openSync, readFileSync, rmSync, statSync, writeSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { isProcessAlive } from "./process-alive.js";

/** How long `withLock` waits for a live holder before giving up, ms. */
const LOCK_WAIT_MS = 10_000;
const LOCK_RETRY_MS = 25;

/**
 * Runs `fn` holding the lock file `path` (created O_EXCL with this process's pid). A lock whose holder is
 * no longer alive on this machine is taken over. Used around the check-then-bind of the endpoint socket,
 * so that of several hosts starting at once exactly one binds and none removes another's live socket.
 */
export async function withLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    if (tryLock(path)) break;
    if (Date.now() > deadline) throw new Error(`could not take ${path}: held by a live process for ${LOCK_WAIT_MS} ms`);
    await delay(LOCK_RETRY_MS);
  }
  try {
    return await fn();
  } finally {
    rmSync(path, { force: true });
  }
}

/**
 * Takes the lock file `path` now if no live process holds it (a dead holder's lock is taken over);
 * false when one does. For writers that must not wait (the audit trail retries on its next flush).
 */
export function tryLockSync(path: string): boolean {
  return tryLock(path);
}

export function unlockSync(path: string): void {
  rmSync(path, { force: true });
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
  let text: string;
  let ageMs: number;
  try {
    text = readFileSync(path, "utf8");
    ageMs = Date.now() - statSync(path).mtimeMs;
  } catch {
    return false; // removed meanwhile: try again
  }
  // An empty file is a holder between open and write (or one that died there, if it stays empty). A
  // dead holder's lock is stale. (Two takers of one stale lock could both remove it; the endpoint then
  // notices that its socket was replaced and a daemon stops: see Endpoint.stillOurs.)
  const holder = Number(text);
  const stale = text === "" ? ageMs > 5_000 : !Number.isSafeInteger(holder) || holder <= 0 || !isProcessAlive(holder);
  if (stale) rmSync(path, { force: true });
  return false;
}
