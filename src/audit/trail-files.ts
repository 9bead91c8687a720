import { closeSync, readSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { openTrailForReadOrNone } from "./trail-file.js";

/** Finding the trails of an audit folder for `audit events`, the report and verify (jsonl-audit-log.ts); trail-read.ts reads them. */

const FIRST_LINE_MAX_BYTES = 64 * 1024;

/** A name in `animas/` that belongs to a trail: its current file, a rotated generation, or its head. */
const TRAIL_PART = /^(.+\.jsonl)(\.[0-9]+|\.head)?$/;

/**
 * Every trail of an audit folder, as its current file's path: the host's pair, then each Anima trail by
 * name that has any file left (its current file, a generation or its head: a trail whose current file
 * was deleted is still one, verify.ts walks the same).
 */
export function trailFilesIn(dir: string): string[] {
  const host = [join(dir, "host.jsonl"), join(dir, "host.security.jsonl")];
  const trails = new Set<string>();
  try {
    for (const name of readdirSync(join(dir, "animas"))) {
      const trail = TRAIL_PART.exec(name)?.[1];
      if (trail !== undefined) trails.add(trail);
    }
  } catch {
    // no Anima trail yet
  }
  return [...host, ...[...trails].sort().map((name) => join(dir, "animas", name))];
}

/** The time of a trail file's first record: from its first line alone (a record is at most a few KiB). */
export function firstRecordTs(file: string): string | undefined {
  let text: string;
  try {
    const fd = openTrailForReadOrNone(file);
    if (fd === undefined) return undefined;
    try {
      const buffer = Buffer.allocUnsafe(FIRST_LINE_MAX_BYTES);
      text = buffer.toString("utf8", 0, readSync(fd, buffer, 0, FIRST_LINE_MAX_BYTES, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
  const newline = text.indexOf("\n");
  const line = newline < 0 ? text : text.slice(0, newline);
  if (line.trim() === "") return undefined;
  try {
    return (JSON.parse(line) as { ts?: string }).ts;
  } catch {
    return undefined;
  }
}
