import { closeSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { sha256 } from "../bundling/sha256.js";
import type { AuditEvent, AuditLog } from "./audit-log.js";

/**
 * One `load_error` record per broken tool version, however many processes load it.
 *
 * Every one-shot CLI process loads the tools it uses afresh, so recording each load failure would write
 * one identical record per call of a broken tool (100 calls, 100 records), drowning the report and
 * rotating useful records away. Instead, a record is written only by the process that first creates the
 * marker file of that failure: `state/animaworks-tool/load-errors/<key>`, where the key hashes the Anima,
 * the tool, its version (bundle hash, or the source file's content when it did not even build) and the
 * message. Creating it with O_EXCL is one syscall on the CLI path and decides between concurrent
 * processes: exactly one of them records. A new version of a broken tool has a new key, so it is
 * recorded again.
 *
 * Synchronous on purpose: the record must be appended before a one-shot process goes on to print the
 * error and close its audit log (an awaited check could be cut off by the exit). This runs only when a
 * tool failed to load, never on a successful call.
 */

/** Markers kept at most; beyond this, the oldest quarter is removed (their versions may be recorded again). */
export const MAX_LOAD_ERROR_MARKERS = 1_000;

/** Characters of the message that enter the key: the version already tells most errors apart. */
const MESSAGE_KEY_CHARS = 10_000;

export type LoadErrorEvent = Extract<AuditEvent, { kind: "load_error" }>;

export function loadErrorMarkerDir(dataDir: string): string {
  return join(dataDir, "state", "animaworks-tool", "load-errors");
}

/**
 * Appends `event` unless this failure of this version was recorded before (by any process).
 * `version.bundleHash`: the built tool's hash, when it built; otherwise the file at `version.path` is hashed.
 */
export function recordLoadError(
  dataDir: string,
  audit: Pick<AuditLog, "append">,
  event: LoadErrorEvent,
  version: { path: string; bundleHash?: string | undefined },
): void {
  const content = version.bundleHash ?? sourceHash(version.path);
  const key = sha256([event.anima ?? "", event.origin, event.tool, version.path, content, event.message.slice(0, MESSAGE_KEY_CHARS)].join("\0")).slice(0, 40);
  if (claim(loadErrorMarkerDir(dataDir), key)) audit.append(event);
}

function sourceHash(path: string): string {
  try {
    return sha256(readFileSync(path));
  } catch {
    return "unreadable"; // removed meanwhile: the message still tells this failure apart
  }
}

/** True when this process created the marker, i.e. should record. */
function claim(dir: string, key: string): boolean {
  const path = join(dir, key);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      closeSync(openSync(path, "wx", 0o600));
      prune(dir);
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EEXIST") return false;
      if (code !== "ENOENT" || attempt > 0) return true; // no marker possible: a duplicate is better than a lost record
      try {
        mkdirSync(dir, { recursive: true, mode: 0o700 });
      } catch {
        return true;
      }
    }
  }
  return true;
}

/** Keeps the marker folder bounded: tools come and go, and each broken version leaves a marker. */
function prune(dir: string): void {
  try {
    const names = readdirSync(dir);
    if (names.length <= MAX_LOAD_ERROR_MARKERS) return;
    const aged = names.map((name) => ({ name, mtimeMs: statSync(join(dir, name), { throwIfNoEntry: false })?.mtimeMs ?? 0 }));
    aged.sort((a, b) => a.mtimeMs - b.mtimeMs);
    const excess = names.length - Math.floor((MAX_LOAD_ERROR_MARKERS * 3) / 4);
    for (const { name } of aged.slice(0, excess)) rmSync(join(dir, name), { force: true });
  } catch {
    // another process pruned at the same time; the next new marker tries again
  }
}
