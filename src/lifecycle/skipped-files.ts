import { basename } from "node:path";
import type { SkippedFile, ToolOrigin } from "../registry/discovery.js";
import type { ToolListing } from "../registry/listing.js";

/**
 * The closing lines of `list` and of `refresh`'s answer (CLI and MCP `refresh_tools`) for the tool files
 * this host does not run (registry/discovery.ts `SkippedFile`: Python tools), one line per reason:
 *   Skipped (Python tools do not run on this host yet): tools/fetch_news.py, common_tools/web_search.py
 * Said where tools are listed, and only there: an AnimaWorks data dir holds many `.py` tools, and a
 * warning about each on every call would be noise.
 */

/** Files named on one line at most; the rest are counted (a data dir may hold hundreds). */
export const MAX_SKIPPED_FILES_NAMED = 20;

/** A skipped file as the Anima and operator know it: `tools/x.py` (personal), `common_tools/x.py` (shared). */
export interface SkippedFileEntry {
  file: string;
  reason: string;
}

const FOLDER_OF: Record<ToolOrigin, string> = { personal: "tools", shared: "common_tools", core: "core tools" };

/** The skipped files of a listing, named relative to the folder they are in (no host path). */
export function skippedFileEntries(listing: Pick<ToolListing, "skippedFiles">): SkippedFileEntry[] {
  return (listing.skippedFiles ?? []).map((skipped: SkippedFile) => ({
    file: `${FOLDER_OF[skipped.origin]}/${basename(skipped.file)}`,
    reason: skipped.reason,
  }));
}

/** One line per reason; none when nothing was skipped. */
export function skippedFilesLines(entries: readonly SkippedFileEntry[]): string[] {
  const byReason = new Map<string, string[]>();
  for (const entry of entries) {
    const files = byReason.get(entry.reason);
    if (files) files.push(entry.file);
    else byReason.set(entry.reason, [entry.file]);
  }
  return [...byReason].map(([reason, files]) => {
    const named = files.slice(0, MAX_SKIPPED_FILES_NAMED).join(", ");
    const more = files.length > MAX_SKIPPED_FILES_NAMED ? ` and ${files.length - MAX_SKIPPED_FILES_NAMED} more` : "";
    return `Skipped (${reason}): ${named}${more}`;
  });
}
