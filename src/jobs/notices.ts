import { oneLine } from "../terminal-text.js";
import { randomBytes } from "node:crypto";
import {
  type Dir,
  closeSync,
  constants,
  lstatSync,
  mkdirSync,
  opendirSync,
  openSync,
  readlinkSync,
  realpathSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join, relative } from "node:path";
import { ToolHostError } from "../errors.js";
import type { Job, JobStore } from "./store.js";
import { type NoticeFailures, failureKind } from "./notice-failures.js";

/**
 * Completion notices in AnimaWorks' format (docs/animaworks-reference.md §8.7): `{animaDir}/state/background_notifications/<id>.md`,
 * read and deleted by the Anima's next heartbeat. Unlike AnimaWorks, the file is named by the SAME id that
 * `submit` returned (the reference's defect 7), and it is written atomically.
 */

/** Longest excerpt of a result quoted in a notice, in characters (AnimaWorks: first 200). */
export const NOTICE_SUMMARY_CHARS = 200;

export function noticeDir(animaDir: string): string {
  return join(animaDir, "state", "background_notifications");
}

export function noticePath(animaDir: string, jobId: string): string {
  return join(noticeDir(animaDir), `${jobId}.md`);
}

/**
 * The AnimaWorks task name of a submitted job is `<tool>:<subcommand>` (docs/animaworks-reference.md §8.7), and its notices
 * name the task that way; we keep that so a notice says which action finished.
 */
export function taskName(job: Job): string {
  return `${job.tool}:${job.action}`;
}

/** Markdown of a terminal job's notice. */
export function formatNotice(job: Job): string {
  const name = taskName(job);
  const ok = job.status === "succeeded";
  // AnimaWorks heads notices completed or failed; a job cancelled on purpose did not fail.
  const outcome = ok ? "completed" : job.status === "cancelled" ? "cancelled" : "failed";
  // The summary is text the job's tool wrote (its result, its error): a line break in it would add lines
  // of the notice's own ("- Status: completed") to what the Anima's heartbeat reads.
  const summary = oneLine(ok ? `[${name}] completed: ${firstChars(job.result ?? "", NOTICE_SUMMARY_CHARS)}` : `[${name}] ${outcome}: ${failureText(job)}`);
  return (
    `# Background task ${outcome}: ${name}\n\n` +
    `- Task ID: ${job.id}\n` +
    `- Tool: ${name}\n` +
    // AnimaWorks' vocabulary is completed/failed; our other terminal statuses are named as they are.
    `- Status: ${ok ? "completed" : job.status}\n` +
    `- Result: ${summary}\n`
  );
}

/**
 * Writes the notice atomically: a temp file in the same folder, then rename, so the heartbeat never reads
 * half a notice. The temp name starts with a dot and does not end in `.md`, so the heartbeat's `*.md` scan
 * never picks it up. Not fsynced: a notice lost to a power cut is re-written from the store, which keeps
 * the job's outcome durably and records the notice only after this returns.
 *
 * The folder is inside the Anima's, and what the Anima's folder holds is its own to change: a `state` or
 * `background_notifications` that is a link to another Anima's (or anywhere) would have the host write
 * text the job chose there — a notice in another Anima's heartbeat inbox. So the folder is opened
 * without following its last component, what was opened is checked through /proc/self/fd to lie inside
 * the Anima's real folder, and the temp file and the rename go through that open folder (a link swapped
 * in after the check redirects nothing); the temp file is made exclusively (`wx`), never through a link.
 *
 * Synchronous file calls on purpose: a notice is a few hundred bytes, and the calls take tens of
 * microseconds, less than the thread-pool round trips of their async forms (measured: 3× the throughput
 * of trivial jobs). The job store's own SQLite calls block the same way.
 */
export async function writeNotice(animaDir: string, job: Job): Promise<string> {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(job.id)) throw new Error(`refusing to write a notice for job id ${JSON.stringify(job.id)}`);
  const target = noticePath(animaDir, job.id);
  const tempName = `.${job.id}.${randomBytes(4).toString("hex")}.tmp`;
  const text = formatNotice(job);
  const folder = openNoticeFolder(animaDir);
  const held = `/proc/self/fd/${folder}`;
  try {
    writeFileSync(join(held, tempName), text, { mode: 0o600, flag: "wx" });
    try {
      renameSync(join(held, tempName), join(held, `${job.id}.md`));
    } catch (error) {
      try {
        unlinkSync(join(held, tempName));
      } catch {
        // already gone
      }
      throw error;
    }
  } finally {
    closeSync(folder);
  }
  return target;
}

/** The notice folder opened (a descriptor), made if missing, and verified to be inside the Anima's real folder. */
function openNoticeFolder(animaDir: string): number {
  const root = animaRoot(animaDir);
  let dir = root;
  for (const name of ["state", "background_notifications"]) {
    dir = join(dir, name);
    try {
      mkdirSync(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
  let folder: number;
  try {
    folder = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ELOOP" || code === "ENOTDIR") throw notInside(animaDir);
    throw error;
  }
  const opened = readlinkSync(`/proc/self/fd/${folder}`);
  const rel = relative(root, opened);
  if (rel !== join("state", "background_notifications")) {
    closeSync(folder);
    throw notInside(animaDir);
  }
  return folder;
}

/**
 * The Anima's real folder; `NotFound` (the notice is dropped for good: a late notice must not bring back a
 * removed Anima as a ghost) only when the Anima's folder entry itself is gone (lstat: ENOENT, ENOTDIR)
 * from a folder of Animas that holds other entries. Anything else may pass and is thrown, so the notice
 * is postponed and tried again (`deliverNotices`): a folder on the way it cannot search (EACCES), an NFS
 * server's EIO or ESTALE, the folder of Animas missing, or there but empty (the mount point of a file
 * system that is down), or an Anima folder that is a link to nowhere (into a mount that is down): in none
 * of these is an Anima known to be removed.
 */
function animaRoot(animaDir: string): string {
  try {
    return realpathSync(animaDir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if ((code === "ENOENT" || code === "ENOTDIR") && entryGone(animaDir) && holdsOthers(dirname(animaDir), basename(animaDir))) {
      throw new ToolHostError("NotFound", `Anima folder ${animaDir} no longer exists`);
    }
    throw error;
  }
}

/** True when `path` itself is missing (not a link to something missing). */
function entryGone(path: string): boolean {
  try {
    lstatSync(path);
    return false;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === "ENOENT" || code === "ENOTDIR";
  }
}

/** True when the folder `dir` can be read and holds an entry other than `name` (reading one or two entries). */
function holdsOthers(dir: string, name: string): boolean {
  let folder: Dir | undefined;
  try {
    folder = opendirSync(dir);
    for (let entry = folder.readSync(); entry !== null; entry = folder.readSync()) {
      if (entry.name !== name) return true;
    }
    return false;
  } catch {
    return false;
  } finally {
    folder?.closeSync();
  }
}

function notInside(animaDir: string): ToolHostError {
  return new ToolHostError(
    "SandboxViolation",
    `the notice folder of ${animaDir} (state/background_notifications) is a link or lies outside the Anima's folder: no notice written`,
    "make state/background_notifications a plain folder inside the Anima's folder",
    "caller",
  );
}

function failureText(job: Job): string {
  if (job.error) return `${job.error.type}: ${job.error.message}`;
  if (job.status !== "cancelled") return job.status;
  // The partial result a tool returned when it saw the cancel is news too (`jobs result` shows it whole).
  return `cancelled by request${job.result !== undefined ? `; partial result: ${firstChars(job.result, NOTICE_SUMMARY_CHARS)}` : ""}`;
}

/** The first `count` characters, counted in code points so an emoji is never cut in half. */
function firstChars(text: string, count: number): string {
  if (text.length <= count) return text;
  let out = "";
  let n = 0;
  for (const char of text) {
    if (n++ === count) break;
    out += char;
  }
  return out;
}

/** Where notices go and how delivery is recorded. */
export interface NoticeSink {
  store: JobStore;
  animaDirOf: (anima: string) => string;
  /** False: jobs are marked delivered without writing files. */
  enabled: boolean;
  warn: (message: string, job?: Job) => void;
  /** Which Animas' notices fail, and how: each failure is logged once, not per job (notice-failures.ts). */
  failures: NoticeFailures;
}

/**
 * Writes notices for finished jobs, then records them as delivered. Delivery is at least once: a worker
 * that dies between the two leaves the job listed by `pendingNotices`, and the next sweep writes the same
 * file again. A notice that cannot be written is postponed in the store (`postponeNotices`: tried again
 * with a backoff), and logged once per Anima and kind of failure. Returns how many were written.
 */
export async function deliverNotices(sink: NoticeSink, jobs: readonly Job[]): Promise<number> {
  if (jobs.length === 0) return 0;
  const written: string[] = [];
  const failed: string[] = [];
  for (const job of jobs) {
    if (!sink.enabled) {
      written.push(job.id);
      continue;
    }
    try {
      await writeNotice(sink.animaDirOf(job.anima), job);
      written.push(job.id);
      sink.failures.written(job.anima);
    } catch (error) {
      const gone = error instanceof ToolHostError && error.type === "NotFound";
      // A notice nobody is left to read is recorded as done, not tried forever.
      if (gone) written.push(job.id);
      else failed.push(job.id);
      if (sink.failures.failed(job.anima, `${gone ? "dropped" : "failed"} ${failureKind(error)}`)) {
        const further = `further notices of Anima "${job.anima}" ${gone ? "dropped" : "failing"} alike are not logged${gone ? "" : " until one is written; each is tried again later"}`;
        sink.warn(`notice for job ${job.id} ${gone ? "dropped" : "not written"}: ${error instanceof Error ? error.message : String(error)} (${further})`, job);
      }
    }
  }
  if (written.length > 0) {
    await sink.store.markNotified(written).catch((error: unknown) => sink.warn(`notices not recorded: ${String(error)}`));
  }
  if (failed.length > 0) {
    await sink.store.postponeNotices(failed).catch((error: unknown) => sink.warn(`failed notices not postponed: ${String(error)}`));
  }
  return written.length;
}

/**
 * Delivers every notice still missing for jobs finished at least `minAgeMs` ago, a page at a time. Notices
 * that keep failing (an Anima's notice folder that is a link) are postponed by `deliverNotices`, so the
 * next page holds others: one Anima's undeliverable notices never hold back another's (before, 200 of
 * them filled every page and the sweep stopped there). Each job is tried at most once per sweep, so a
 * sweep ends whatever the clock or a failing store does. `includePostponed`: postponed notices too, before
 * their retry is due (a worker's last sweep as it leaves: worker.ts).
 */
export async function sweepNotices(sink: NoticeSink, minAgeMs: number, options: { includePostponed?: boolean } = {}): Promise<void> {
  const tried = new Set<string>();
  for (;;) {
    const pending = (await sink.store.pendingNotices({ minAgeMs, limit: 200, ...options })).filter((job) => !tried.has(job.id));
    if (pending.length === 0) return;
    for (const job of pending) tried.add(job.id);
    await deliverNotices(sink, pending);
  }
}
