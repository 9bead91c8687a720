import { randomBytes } from "node:crypto";
import { mkdir, rename, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Job } from "./store.js";

/**
 * Completion notices in AnimaWorks' format (reference §8.7): `{animaDir}/state/background_notifications/<id>.md`,
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
 * The AnimaWorks task name of a submitted job is `<tool>:<subcommand>` (reference §8.7), and its notices
 * name the task that way; we keep that so a notice says which action finished.
 */
export function taskName(job: Job): string {
  return `${job.tool}:${job.action}`;
}

/** Markdown of a terminal job's notice. */
export function formatNotice(job: Job): string {
  const name = taskName(job);
  const ok = job.status === "succeeded";
  const summary = ok ? `[${name}] completed: ${firstChars(job.result ?? "", NOTICE_SUMMARY_CHARS)}` : `[${name}] failed: ${failureText(job)}`;
  return (
    `# Background task ${ok ? "completed" : "failed"}: ${name}\n\n` +
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
 */
export async function writeNotice(animaDir: string, job: Job): Promise<string> {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(job.id)) throw new Error(`refusing to write a notice for job id ${JSON.stringify(job.id)}`);
  const dir = noticeDir(animaDir);
  await mkdir(dir, { recursive: true });
  const target = noticePath(animaDir, job.id);
  const temp = join(dir, `.${job.id}.${randomBytes(4).toString("hex")}.tmp`);
  try {
    await writeFile(temp, formatNotice(job), { mode: 0o600 });
    await rename(temp, target);
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw error;
  }
  return target;
}

function failureText(job: Job): string {
  if (job.error) return `${job.error.type}: ${job.error.message}`;
  return job.status === "cancelled" ? "cancelled by request" : job.status;
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
