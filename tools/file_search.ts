/**
 * file_search — finds text in the calling Anima's own files (core tool).
 *
 *   animaworks-tool file_search grep "meeting notes" --path knowledge --max-results 20
 *   animaworks-tool file_search list --path episodes
 *
 * Everything goes through the `fs` capability, so the search can only ever see the Anima's own
 * directory; links are not followed and the host's own folders (state/) are skipped.
 */
import { fs, ToolError, type ExecutionProfile, type ToolArgs, type ToolSchema } from "@animaworks/tool";

/** Files larger than this are skipped (the capability would refuse them anyway). */
const MAX_FILE_BYTES = 1024 * 1024;
/** Stops a walk of a huge tree; the result says it was cut. */
const MAX_FILES_VISITED = 5_000;
const SKIPPED_FOLDERS = new Set(["state", "node_modules", ".git"]);

export const EXECUTION_PROFILE: ExecutionProfile = { grep: { expected_seconds: 5, timeout_seconds: 60 } };

export function get_tool_schemas(): ToolSchema[] {
  const path = { type: "string", description: "Folder to search, relative to the Anima's directory", default: "." } as const;
  return [
    {
      name: "file_search_grep",
      description: "Search the Anima's own text files for a phrase (case-insensitive) and return matching lines.",
      input_schema: {
        type: "object",
        properties: {
          query: { type: "string", minLength: 1, maxLength: 200, description: "Text to look for" },
          path,
          max_results: { type: "integer", minimum: 1, maximum: 500, default: 50, description: "Most matching lines returned" },
        },
        required: ["query"],
      },
    },
    {
      name: "file_search_list",
      description: "List the files under a folder of the Anima's directory, with their sizes.",
      input_schema: { type: "object", properties: { path } },
    },
  ];
}

interface FileEntry {
  path: string;
  size: number;
}

async function walk(root: string): Promise<{ files: FileEntry[]; cut: boolean }> {
  const files: FileEntry[] = [];
  const folders = [root];
  while (folders.length > 0) {
    const folder = folders.pop() as string;
    for (const entry of await fs.readdir(folder)) {
      const path = folder === "." ? entry.name : `${folder}/${entry.name}`;
      if (entry.type === "directory" && !SKIPPED_FOLDERS.has(entry.name)) folders.push(path);
      else if (entry.type === "file") {
        if (files.length >= MAX_FILES_VISITED) return { files, cut: true };
        files.push({ path, size: (await fs.stat(path)).size });
      }
    }
  }
  return { files: files.sort((a, b) => a.path.localeCompare(b.path)), cut: false };
}

export async function dispatch(name: string, args: ToolArgs<{ query?: string; path?: string; max_results?: number }>) {
  const root = args.path ?? ".";
  if (!(await fs.exists(root))) throw new ToolError(`"${root}" does not exist in the Anima's directory`);
  const { files, cut } = await walk(root);
  if (name === "file_search_list") return { files, ...(cut ? { note: `stopped after ${MAX_FILES_VISITED} files` } : {}) };
  if (name !== "file_search_grep") throw new ToolError(`Unknown tool: ${name}`);
  const needle = (args.query as string).toLowerCase();
  const limit = args.max_results ?? 50;
  const matches: Array<{ path: string; line: number; text: string }> = [];
  for (const file of files) {
    if (file.size > MAX_FILE_BYTES) continue;
    const text = await fs.readFile(file.path);
    if (text.includes("\u0000")) continue; // binary
    const lines = text.split("\n");
    for (let i = 0; i < lines.length && matches.length < limit; i++) {
      const line = lines[i];
      if (line.toLowerCase().includes(needle)) matches.push({ path: file.path, line: i + 1, text: line.length > 300 ? `${line.slice(0, 300)}…` : line });
    }
    if (matches.length >= limit) break;
  }
  return { query: args.query, matches, searched: files.length, ...(cut ? { note: `stopped after ${MAX_FILES_VISITED} files` } : {}) };
}
