import { join, posix } from "node:path";
import { FsCapability } from "../capabilities/fs.js";

/**
 * The data dir's folders every Anima may read with `read_memory_file` (AnimaWorks: "readable by all
 * animas"), as `common_skills/tool-creator/SKILL.md` names the skill `init` installs. Only these, only
 * for reading, and only by `read_memory_file` (an Anima's own request, not a tool's): a tool's fs
 * capability stays confined to its Anima's folder. Not `cache/` (the host's bundles) nor `shared/` (it
 * holds `credentials.json`).
 */
export const SHARED_READABLE_FOLDERS = ["common_skills", "common_knowledge", "reference"] as const;

/**
 * `path` split into a shared folder and the path inside it, or undefined when `path` does not start with
 * one of them (an Anima's own `common_skills/` folder, if it had one, is shadowed: the data dir's wins,
 * as in AnimaWorks).
 */
export function sharedReadTarget(path: unknown): { folder: string; inside: string } | undefined {
  if (typeof path !== "string") return undefined;
  const normal = posix.normalize(path.replace(/^\.\//, ""));
  const slash = normal.indexOf("/");
  if (slash <= 0) return undefined;
  const folder = normal.slice(0, slash);
  if (!(SHARED_READABLE_FOLDERS as readonly string[]).includes(folder)) return undefined;
  return { folder, inside: normal.slice(slash + 1) };
}

/**
 * The text of `inside` in the data dir's `folder`, under the fs capability's rules (no path out of the
 * folder, no link followed, a regular file within the read limit): a link in common_skills/ to another
 * Anima's folder is refused like one in the Anima's own folder.
 */
export async function readSharedFile(dataDir: string, target: { folder: string; inside: string }): Promise<string> {
  return new FsCapability(join(dataDir, target.folder)).readFile(target.inside, "utf8");
}
