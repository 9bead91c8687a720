import { type Dirent, close, constants, open } from "node:fs";
import { lstat, readdir, readlink, realpath } from "node:fs/promises";
import { basename, dirname, join, sep } from "node:path";
import { printableName } from "../terminal-text.js";

/**
 * Whether an Anima's personal tools folder (`<animas>/<name>/tools`) is its own: `problem` says why not;
 * else `real` is its real path as checked here (undefined when it is missing: no tools), to which the
 * bundler confines every read (so a swap of `tools` for a link after this check is refused, not followed). An Anima writes its own folder, so `tools` may be a link it made: `tools ->
 * ../alice/tools` listed alice's tools as eve's, and eve's call of them ran alice's code. So:
 *  - `tools` must be a folder, not a link, and its real path exactly the Anima folder's real path + `/tools`;
 *  - the Anima's folder must not lead into another one under `animas/` (`animas/eve -> alice`): its real
 *    path is `<real animas>/<name>`, or lies outside `animas/` (an operator's folder on another disk) where
 *    no other Anima's folder leads too. A link of the whole `animas/` folder is resolved on both sides, so
 *    it keeps working.
 * `share` and the memory tools refuse the same link with their exact-directory check (lifecycle/safe-dir.ts).
 * A swap of `tools` after this check: `personalFolderCheck`'s real path confines the bundler's reads.
 */
export async function personalFolderCheck(
  folder: string,
): Promise<{ problem: string } | { problem?: undefined; real: string; entries: Dirent[] } | { problem?: undefined; real: undefined }> {
  const checked = await personalFolderProblem(folder);
  if (typeof checked === "string") return { problem: checked };
  if (checked === undefined) return { real: undefined };
  // The folder listed is the one opened (never through a link), and it must be the folder checked: a
  // `tools` swapped for a link since would otherwise list another Anima's tool names as this one's.
  // node:fs's callbacks, not a FileHandle: a one-shot CLI call must not load node:fs/promises (launcher.test.ts).
  let fd: number;
  try {
    fd = await new Promise<number>((resolve, reject) =>
      open(folder, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW, (error, opened) => (error ? reject(error) : resolve(opened))),
    );
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return { real: undefined }; // gone meanwhile: no tools
    if (code === "ELOOP" || code === "ENOTDIR") return { problem: swapped(folder) };
    // EACCES…: discovery says what it is, as for a folder it could not list (it was opened to be listed).
    throw Object.assign(error as NodeJS.ErrnoException, { syscall: "scandir" });
  }
  try {
    if ((await readlink(`/proc/self/fd/${fd}`)) !== checked.real) return { problem: swapped(folder) };
    return { real: checked.real, entries: await readdir(`/proc/self/fd/${fd}`, { withFileTypes: true }) };
  } finally {
    close(fd, () => {});
  }
}

function swapped(folder: string): string {
  const shown = `"${printableName(join(basename(dirname(dirname(folder))), basename(dirname(folder)), basename(folder)))}"`;
  return `the tools folder ${shown} changed while it was read (replaced by a link or another folder), so nothing in it is loaded: refresh once it stays a folder of the Anima's own`;
}

/** Why the folder is not the Anima's own; undefined when there is none; else its real path as checked. */
async function personalFolderProblem(folder: string): Promise<string | { real: string } | undefined> {
  const animaDir = dirname(folder);
  const animas = dirname(animaDir);
  const name = basename(animaDir);
  const shown = `"${printableName(join(basename(animas), name, basename(folder)))}"`;
  const own = await lstat(folder).catch(() => undefined);
  if (own === undefined) return undefined;
  if (own.isSymbolicLink()) {
    return `the tools folder ${shown} is a symbolic link, so nothing in it is loaded as this Anima's tools: replace the link with a folder holding the Anima's own tools`;
  }
  const [realFolder, realAnima, realAnimas] = await Promise.all([folder, animaDir, animas].map((path) => realpath(path).catch(() => undefined)));
  if (realFolder === undefined || realAnima === undefined || realAnimas === undefined) return undefined; // gone meanwhile: no tools
  if (realFolder !== join(realAnima, basename(folder))) {
    return `the tools folder ${shown} leads out of the Anima's folder through a link, so nothing in it is loaded: replace the link with a folder holding the Anima's own tools`;
  }
  const checked = { real: join(realAnima, basename(folder)) };
  if (realAnima === join(realAnimas, name)) return checked;
  const other = `the Anima's folder "${printableName(join(basename(animas), name))}" is a link to another Anima's folder, so none of its tools are loaded: the operator should replace the link with the Anima's own folder`;
  if (realAnima === realAnimas || realAnima.startsWith(`${realAnimas}${sep}`)) return other;
  // Outside animas/: refused only when another Anima's folder leads there too (neither could be told apart).
  for (const entry of await readdir(animas, { withFileTypes: true }).catch(() => [])) {
    if (entry.name === name || !entry.isSymbolicLink()) continue;
    const target = await realpath(join(animas, entry.name)).catch(() => undefined);
    if (target === realAnima) return other;
  }
  return checked;
}
