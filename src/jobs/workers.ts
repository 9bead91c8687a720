import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, statSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { randomBytes } from "node:crypto";
import { isProcessAlive } from "../process-alive.js";
import { runtimeNodePath } from "../node-runtime.js";

/**
 * Which job workers are alive, so that `submit` starts a background worker only when none is running.
 *
 * Each worker keeps one small record file, `{workersDir}/<host>-<pid>.json`, and refreshes its mtime every
 * `WORKER_HEARTBEAT_MS`. A record counts as alive while it is fresh and, on this machine, its pid exists:
 * the pid check notices a killed worker at once, the freshness check guards against a reused pid and covers
 * workers on other machines sharing the data dir. Nothing here needs to be exclusive: the job store lets
 * any number of workers share it, so two workers started by two racing submits only cost a process.
 *
 * The one race that matters (a worker leaving just as a job arrives) is closed by ordering, see
 * `JobService.runWorker`: a submit commits its job before it looks for workers, and a leaving worker removes
 * its record before it looks at the queue one last time.
 */

/** How often a worker refreshes its record, ms. */
export const WORKER_HEARTBEAT_MS = 5_000;
/** A record not refreshed for this long is stale whatever its pid says, ms. Several heartbeats, so a busy event loop is not mistaken for death. */
export const WORKER_STALE_MS = 30_000;

export type WorkerMode = "serve" | "until-drained";

export interface WorkerRecord {
  pid: number;
  host: string;
  mode: WorkerMode;
  /** Epoch ms. */
  startedAt: number;
}

export interface WorkerRegistration {
  readonly path: string;
  /** Stops the heartbeat and deletes the record. Idempotent. */
  remove(): void;
}

const RECORD_SUFFIX = ".json";

function recordPath(dir: string, host: string, pid: number): string {
  return join(dir, `${host.replace(/[^A-Za-z0-9_.-]/g, "_")}-${pid}${RECORD_SUFFIX}`);
}

/** Writes a record atomically (temp file, then rename), so a reader never sees half of one. */
export function writeWorkerRecord(dir: string, record: WorkerRecord): string {
  mkdirSync(dir, { recursive: true });
  const path = recordPath(dir, record.host, record.pid);
  const temp = join(dir, `.${randomBytes(4).toString("hex")}.tmp`);
  writeFileSync(temp, JSON.stringify(record), { mode: 0o600 });
  renameSync(temp, path);
  return path;
}

/** Registers this process as a worker until `remove()`. The heartbeat timer does not keep the process alive. */
export function registerWorker(dir: string, mode: WorkerMode): WorkerRegistration {
  const path = writeWorkerRecord(dir, { pid: process.pid, host: hostname(), mode, startedAt: Date.now() });
  let removed = false;
  const timer = setInterval(() => {
    try {
      const now = new Date();
      utimesSync(path, now, now);
    } catch {
      // Deleted by someone who took us for dead (e.g. after a long stall): write it again.
      if (!removed) writeWorkerRecord(dir, { pid: process.pid, host: hostname(), mode, startedAt: Date.now() });
    }
  }, WORKER_HEARTBEAT_MS);
  timer.unref();
  return {
    path,
    remove() {
      if (removed) return;
      removed = true;
      clearInterval(timer);
      try {
        unlinkSync(path);
      } catch {
        // Already gone.
      }
    },
  };
}

/** Records of live workers. Records found dead are deleted on the way (best effort). */
export function liveWorkers(dir: string, now = Date.now()): WorkerRecord[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.endsWith(RECORD_SUFFIX) && !name.startsWith("."));
  } catch {
    return [];
  }
  const me = hostname();
  const live: WorkerRecord[] = [];
  for (const name of names) {
    const path = join(dir, name);
    let record: WorkerRecord;
    let mtimeMs: number;
    try {
      mtimeMs = statSync(path).mtimeMs;
      record = JSON.parse(readFileSync(path, "utf8")) as WorkerRecord;
    } catch {
      continue; // vanished or being replaced: it is someone else's business
    }
    const fresh = now - mtimeMs < WORKER_STALE_MS;
    const alive = fresh && (record.host !== me || isProcessAlive(record.pid));
    if (alive) live.push(record);
    else {
      try {
        unlinkSync(path);
      } catch {
        // Another checker removed it first.
      }
    }
  }
  return live;
}

export { isProcessAlive } from "../process-alive.js";

export interface StartWorkerOptions {
  /** Node arguments and script that run the worker, e.g. `["--no-node-snapshot", bin, "--data-dir", d, "serve", "--until-drained"]`. */
  argv: string[];
  workersDir: string;
  /** The worker's stdout and stderr are appended here. */
  logFile: string;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

/**
 * Starts a detached worker process that outlives this one, and registers it at once on its behalf, so a
 * submit right after this one does not start a second worker while the first is still booting.
 * Returns the worker's pid.
 */
export function startWorkerProcess(options: StartWorkerOptions): number {
  mkdirSync(dirname(options.logFile), { recursive: true });
  const log = openSync(options.logFile, "a", 0o600);
  try {
    const child = spawn(runtimeNodePath(), options.argv, {
      detached: true,
      stdio: ["ignore", log, log],
      env: options.env,
      cwd: options.cwd,
    });
    // A failed spawn is reported through 'error' as well as by the missing pid; the pid check below handles it.
    child.on("error", () => undefined);
    child.unref();
    if (child.pid === undefined) throw new Error(`could not start ${runtimeNodePath()}`);
    writeWorkerRecord(options.workersDir, { pid: child.pid, host: hostname(), mode: "until-drained", startedAt: Date.now() });
    return child.pid;
  } finally {
    closeSync(log);
  }
}
