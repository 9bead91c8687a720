import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { ToolHostError, systemFileError } from "../errors.js";
import type { AnimaRef } from "./registry.js";

/**
 * Anima names are folder names under `{dataDir}/animas/`; anything that could address another folder is
 * refused. An Anima's folder name is not hidden (`.trash` and the like are not Animas), no separators, and no
 * U+FFFD, which is what a name that is not valid UTF-8 reads as: such a folder could not be opened again
 * by the name read, so it is not an Anima (and must not break listings of the others). No control
 * characters (C0, DEL, C1) either: a name is printed in reports and log lines, where a newline forged a
 * line, and the audit log escapes them, so its records named a different Anima than the folder's. Nor
 * a name ending in `.security`: `x.security`'s audit trail would be the file of x's security trail.
 */
const ANIMA_NAME_PATTERN = /^(?!\.)(?!.*\.security$)[^/\\\u0000-\u001f\u007f-\u009f\uFFFD]{1,128}$/;

/** Whether `name` could be an Anima's (its folder's) name: what may name a file of its own anywhere. */
export function isAnimaName(name: string): boolean {
  return ANIMA_NAME_PATTERN.test(name);
}

export async function listAnimas(dataDir: string): Promise<string[]> {
  const names: string[] = [];
  const folder = join(dataDir, "animas");
  const entries = await readdir(folder, { withFileTypes: true }).catch((error: unknown) => {
    // No folder: no Animas. One this user cannot read must not pass for an empty one.
    const denied = systemFileError(error, folder);
    if (denied) throw denied;
    return [];
  });
  for (const entry of entries) {
    if (entry.isDirectory() && ANIMA_NAME_PATTERN.test(entry.name)) names.push(entry.name);
  }
  return names.sort();
}

export async function resolveAnima(dataDir: string, name: string): Promise<AnimaRef> {
  if (typeof name !== "string" || !ANIMA_NAME_PATTERN.test(name)) {
    throw new ToolHostError("InvalidArguments", `"${String(name)}" is not a valid Anima name`, "an Anima name is the name of its folder under animas/");
  }
  const dir = join(dataDir, "animas", name);
  const info = await stat(dir).catch((error: unknown) => {
    const denied = systemFileError(error, dir);
    if (denied) throw denied;
    return undefined;
  });
  if (!info?.isDirectory()) {
    const known = await listAnimas(dataDir);
    throw new ToolHostError(
      "NotFound",
      `unknown Anima "${name}"`,
      known.length > 0 ? `known Animas: ${known.join(", ")}` : `no Animas exist under ${join(dataDir, "animas")}`,
    );
  }
  return { name, dir };
}
