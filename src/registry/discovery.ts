import type { Dirent } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { basename, extname, join } from "node:path";
import { systemFileError } from "../errors.js";
import { printableName } from "../terminal-text.js";
import { personalFolderCheck } from "./personal-folder.js";

export type ToolOrigin = "core" | "shared" | "personal";

export interface DiscoveredTool {
  name: string;
  origin: ToolOrigin;
  /** Absolute path of the tool's file. */
  path: string;
  /** Its tools folder (imports may not leave it). */
  folder: string;
  /** The Anima whose personal tool this is (personal tools only). */
  anima?: string;
  /**
   * The folder's real path as discovery checked it (personal tools): the bundler reads only inside it, so
   * a folder swapped for a link since (into another Anima's) is refused, not followed.
   */
  folderReal?: string;
}

export interface DiscoveryProblem {
  name: string;
  origin: ToolOrigin;
  file: string;
  message: string;
}

/** `.py`: the tools of AnimaWorks' own host, run by Pyodide in the isolate (bundling/python-bundle.ts). */
export const TOOL_EXTENSIONS = [".ts", ".mts", ".js", ".mjs", ".py"] as const;

/** CLI management commands (docs/design.md §4): a tool with one of these names could never be called. */
export const RESERVED_NAMES = new Set([
  "list",
  "describe",
  "refresh",
  "share",
  "validate",
  "submit",
  "jobs",
  "serve",
  "mcp",
  "audit",
  "help",
  "daemon",
  "init",
]);

export const TOOL_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

/**
 * Lists the tools in one folder (top level only). Files starting with `_` are helpers, not tools; `.d.ts`
 * and `.d.mts` files are types; files starting with `.` are hidden (editor and OS litter, never meant as
 * tools, so not worth a warning). Only regular files count (a FIFO or device named like a tool is
 * ignored, so a scan never blocks). Problems are reported, not thrown: one bad file never hides the others.
 * A personal folder (`<animas>/<name>/tools`) that is a link, or leads into another Anima's, loads nothing
 * (personal-folder.ts): it would pass another Anima's tools off as this one's.
 */
export async function discoverFolder(folder: string, origin: ToolOrigin): Promise<{ tools: DiscoveredTool[]; problems: DiscoveryProblem[] }> {
  let folderReal: string | undefined;
  let entries: Dirent[];
  try {
    if (origin === "personal") {
      const checked = await personalFolderCheck(folder);
      if (checked.problem !== undefined) return { tools: [], problems: [{ name: basename(folder), origin, file: folder, message: checked.problem }] };
      if (checked.real === undefined) return { tools: [], problems: [] }; // no tools folder
      folderReal = checked.real;
      entries = checked.entries;
    } else entries = await readdir(folder, { withFileTypes: true });
  } catch (error) {
    // A missing folder has no tools; one this user cannot read is said so, not passed off as empty.
    const denied = systemFileError(error, folder);
    if (!denied) return { tools: [], problems: [] };
    const message = `${denied.message}: its tools are not loaded (${denied.hint})`;
    return { tools: [], problems: [{ name: basename(folder), origin, file: folder, message }] };
  }
  const byName = new Map<string, string[]>();
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const file = entry.name;
    const ext = extname(file);
    if (!(TOOL_EXTENSIONS as readonly string[]).includes(ext) || file.startsWith("_") || file.startsWith(".")) continue;
    if (file.endsWith(".d.ts") || file.endsWith(".d.mts")) continue;
    // The directory entry already says "regular file" for most tools (one stat per tool less on every
    // cold start); links, and file systems that do not report types, are followed with stat.
    if (!entry.isFile()) {
      const info = entry.isDirectory() ? undefined : await stat(join(folder, file)).catch(() => undefined);
      if (!info?.isFile()) continue;
    }
    const name = file.slice(0, -ext.length);
    byName.set(name, [...(byName.get(name) ?? []), file]);
  }
  const tools: DiscoveredTool[] = [];
  const problems: DiscoveryProblem[] = [];
  for (const [name, files] of byName) {
    const file = files[0] as string;
    // A problem's name and message reach terminals (refresh's "skipped" lines, the host's warnings): a
    // file name's control characters are escaped, so that `new⏎line.ts` cannot fake a report line. A valid
    // name has none, so only refused files (never a tool) are named escaped.
    const shown = printableName(name);
    if (files.length > 1) {
      problems.push({ name: shown, origin, file, message: `more than one file defines tool "${shown}" (${files.map(printableName).join(", ")}); keep one` });
    } else if (!TOOL_NAME_PATTERN.test(name)) {
      const message = `"${printableName(file)}" is not a valid tool name; use letters, digits and "_" (snake_case), starting with a letter`;
      problems.push({ name: shown, origin, file, message });
    } else if (RESERVED_NAMES.has(name)) {
      problems.push({ name, origin, file, message: `"${name}" is an animaworks-tool command and cannot be a tool name; rename the file` });
    } else {
      tools.push({ name, origin, path: join(folder, file), folder, ...(folderReal !== undefined ? { folderReal } : {}) });
    }
  }
  return { tools, problems };
}
