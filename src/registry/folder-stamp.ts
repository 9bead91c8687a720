import { type Dirent, opendirSync, statSync } from "node:fs";
import { join } from "node:path";

/** Entries a stamp looks at in each of its folders, at most; beyond, only the first ones count (the folder watcher still reloads). */
export const MAX_STAMP_ENTRIES = 5_000;
/** Sub-folder levels below a tool folder that a stamp walks (tools import helpers from their own folder). */
const MAX_DEPTH = 3;

/**
 * A string that changes whenever a file or folder under `dirs` is added, removed, replaced or written:
 * names with inode, size, change and modification times in nanoseconds. A long-running host compares
 * it before serving a CLI call, so an edited tool is served by the next call without waiting for the
 * folder watcher's event. Links are stamped by their target and not walked into.
 *
 * It runs on the daemon's event loop before each call, so it reads at most MAX_STAMP_ENTRIES names in
 * each folder given (its own budget each: a full shared folder must not leave an Anima's own unstamped),
 * in directory order: reading a whole folder (readdirSync) of an Anima's 300,000 files took ~0.4 s
 * per call, stalling every Anima's calls. A change past the bound is not in the stamp; the folder watcher
 * (a daemon watches) or the next `refresh` notices it.
 */
export function folderStamp(dirs: readonly string[]): string {
  const parts: string[] = [];
  let budget = 0;
  const walk = (dir: string, depth: number): void => {
    let entries: Dirent[];
    try {
      entries = readEntries(dir, budget);
    } catch (error) {
      parts.push(`${dir}!${(error as NodeJS.ErrnoException).code ?? "error"}`);
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (budget-- <= 0) return;
      const path = join(dir, entry.name);
      const stats = statSync(path, { bigint: true, throwIfNoEntry: false });
      parts.push(stats ? `${path}|${stats.ino}|${stats.size}|${stats.mtimeNs}|${stats.ctimeNs}` : `${path}|gone`);
      if (entry.isDirectory() && depth < MAX_DEPTH) walk(path, depth + 1);
    }
  };
  for (const dir of dirs) {
    budget = MAX_STAMP_ENTRIES;
    walk(dir, 0);
  }
  return parts.join("\n");
}

/** The first `max` entries of `dir` in directory order (none read beyond). */
function readEntries(dir: string, max: number): Dirent[] {
  const entries: Dirent[] = [];
  if (max <= 0) return entries;
  const handle = opendirSync(dir);
  try {
    while (entries.length < max) {
      const entry = handle.readSync();
      if (entry === null) break;
      entries.push(entry);
    }
  } finally {
    handle.closeSync();
  }
  return entries;
}
