import { lstat, readdir, rmdir, unlink } from "node:fs/promises";
import { entryPath, violation, withHeldFolder } from "./paths.js";

/**
 * Walks of a whole folder for the fs capability. Like every walk here they go by held descriptors
 * (`withHeldFolder`): a folder swapped for a link while they run is never entered, so they cannot leave
 * the Anima's directory.
 */

/**
 * Levels of entries below the folder `name` in the held folder `dirFdPath`: 0 when it is empty, 1 when it
 * holds only files (or links), 1 + the depth below its deepest sub-folder otherwise; that is, the most
 * path segments any entry inside has, counted from the folder. Stops as soon as the answer is known to be
 * over `budget` (it then returns `budget + 1`), so it descends at most `budget` levels and holds at most
 * `budget + 1` descriptors at once, however deep the tree is.
 */
export async function depthBelow(dirFdPath: string, name: string | Buffer, budget: number): Promise<number> {
  const path = entryPath(dirFdPath, name);
  const info = await lstat(path);
  if (!info.isDirectory()) return 0;
  let deepest = 0;
  const entered = await withHeldFolder(path, info, async (held) => {
    for (const entry of await readdir(held, { withFileTypes: true, encoding: "buffer" })) {
      deepest = Math.max(deepest, 1);
      if (deepest <= budget && entry.isDirectory()) deepest = Math.max(deepest, 1 + (await depthBelow(held, entry.name, budget - 1)));
      if (deepest > budget) return;
    }
  });
  if (!entered) throw violation("SandboxViolation", "fs.rename: a folder was replaced while it was being measured; links are not followed");
  return deepest;
}

/**
 * Removes `name` in the directory `dirFdPath` (a `/proc/self/fd/N` path of a verified, held directory).
 * Every step is relative to a held descriptor: a folder is opened with O_DIRECTORY | O_NOFOLLOW inside
 * its held parent, checked to be the very folder that was listed (same device and inode), and walked
 * through its own descriptor; entries are unlinked by name inside the held folder, which never follows
 * a link. A folder swapped for a link while this runs is refused or removed as a link, never followed,
 * so nothing outside the Anima's directory can be reached (Node's recursive rm walks by path names).
 */
export async function removeEntry(dirFdPath: string, name: string | Buffer, recursive: boolean): Promise<void> {
  const path = entryPath(dirFdPath, name);
  const info = await lstat(path);
  if (!info.isDirectory()) return unlink(path);
  if (!recursive) return rmdir(path);
  const entered = await withHeldFolder(path, info, async (held) => {
    // Byte names: one that is not valid UTF-8 is removed too, not left behind to fail the final rmdir.
    for (const entry of await readdir(held, { encoding: "buffer" })) await removeEntry(held, entry, true);
  });
  if (!entered) throw violation("SandboxViolation", "fs.rm: a folder was replaced while it was being removed; links are not followed");
  await rmdir(path);
}
