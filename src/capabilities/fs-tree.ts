import { lstat, readdir, rename, rmdir, unlink } from "node:fs/promises";
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
 *
 * At most `maxHeld` folders (at least 2) are held at once, however deep the tree: one held per level
 * let a 604-level tree (sunk by renames before they were bounded, or put there by other means) run the
 * host out of descriptors (EMFILE). A folder below the `maxHeld`th level is not entered but moved up, under a
 * temporary name, into the folder being removed, which lists itself again until it is empty; each pass
 * removes `maxHeld - 1` levels. If the removal fails part-way, moved folders stay there as `.rm-*`.
 */
export async function removeEntry(dirFdPath: string, name: string | Buffer, recursive: boolean, maxHeld: number): Promise<void> {
  const path = entryPath(dirFdPath, name);
  const info = await lstat(path);
  if (!info.isDirectory()) return unlink(path);
  if (!recursive) return rmdir(path);
  const levels = Math.max(2, maxHeld) - 1;
  const entered = await withHeldFolder(path, info, async (top) => {
    for (let entries = await list(top); entries.length > 0; entries = await list(top)) {
      for (const entry of entries) await removeBelow(top, entry, top, levels);
    }
  });
  if (!entered) throw replaced();
  await rmdir(path);
}

/** Removes `name` in the held folder `held`, entering at most `levelsLeft` more folders; deeper ones move up into `top`. */
async function removeBelow(held: string, name: Buffer | string, top: string, levelsLeft: number): Promise<void> {
  const path = entryPath(held, name);
  const info = await lstat(path);
  if (!info.isDirectory()) return unlink(path);
  // A rename moves the entry itself (a link swapped in moves as a link), and stays inside `top`.
  if (levelsLeft === 0) return rename(path, entryPath(top, `.rm-${process.getBuiltinModule("node:crypto").randomBytes(6).toString("hex")}`));
  const entered = await withHeldFolder(path, info, async (folder) => {
    for (const entry of await list(folder)) await removeBelow(folder, entry, top, levelsLeft - 1);
  });
  if (!entered) throw replaced();
  await rmdir(path);
}

/** Byte names: one that is not valid UTF-8 is removed too, not left behind to fail the final rmdir. */
function list(held: string): Promise<Buffer[]> {
  return readdir(held, { encoding: "buffer" });
}

function replaced(): Error {
  return violation("SandboxViolation", "fs.rm: a folder was replaced while it was being removed; links are not followed");
}
