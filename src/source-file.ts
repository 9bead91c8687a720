import type { BigIntStats } from "node:fs";
import { constants } from "node:fs";
import { type FileHandle, open, readlink } from "node:fs/promises";
import { isAbsolute, relative, sep } from "node:path";
import { ToolHostError } from "./errors.js";
import { kindOf, readToEnd } from "./regular-file.js";

/**
 * The one reader of a tool's source files (what a tool's author wrote: hostile), for every reader that
 * turns them into code or copies them: the bundler's loader (bundling/bundler.ts), the Python bundle
 * (bundling/python-bundle.ts), validate's copy of a draft's imports (lifecycle/load-check.ts) and its
 * reading of the tool file (lifecycle/read-tool-source.ts).
 *
 * Checking a path and then opening it is a race: a folder on the way can be swapped for a link in
 * between (O_NOFOLLOW guards only the last component), and a tool then bundled the data dir's
 * config.json. So the file is judged by what was actually opened, and read from that descriptor only:
 *  1. opened O_RDONLY | O_NOFOLLOW | O_NONBLOCK: the last component is not followed if it is a link,
 *     and a FIFO cannot block the open (nor a file thread of a long-running host);
 *  2. the descriptor's own path (`/proc/self/fd/N`, the kernel's record of the file opened, whatever
 *     links led there) must lie inside the folder's real path: a parent folder swapped for a link at any
 *     moment before the open is caught here;
 *  3. fstat of the descriptor: a regular file, without other hard links (one could be another Anima's
 *     file, or the operator's config.json), of at most `maxBytes`;
 *  4. read from the descriptor, at most `maxBytes` (the file may grow while it is read).
 * Refusals are `SourceFileRefused` (a LoadError whose `reason` is a stable code), named by the caller's
 * `shownName` (never a host path), and they describe nothing that lies outside the folder.
 */

/** Largest source file a tool may have, in bytes (also the bound of a draft's copied imports). */
export const MAX_SOURCE_FILE_BYTES = 4 * 1024 * 1024;

/** Why a source file was refused: stable codes, one sentence each (`SourceFileRefused`). */
export type SourceFileRefusal = "outside-folder" | "link" | "hard-link" | "not-regular" | "too-large" | "missing" | "unreadable";

interface RefusalDetail {
  maxBytes?: number;
  /** Bytes of a file too large (its status's size, or what was read before the read stopped). */
  bytes?: number;
  what?: string;
  code?: string;
}

export class SourceFileRefused extends ToolHostError {
  /** The size of a file refused as "too-large". */
  readonly bytes: number | undefined;

  constructor(
    readonly reason: SourceFileRefusal,
    shownName: string,
    detail: RefusalDetail = {},
  ) {
    const [phrase, hint] = describe(reason, detail);
    super("LoadError", `${shownName} ${phrase}`, hint, "tool");
    this.name = "SourceFileRefused";
    this.bytes = detail.bytes;
  }

  /** The refusal as one line, what to do in parentheses: a build error's text, a validate problem. */
  get line(): string {
    return this.hint ? `${this.message} (${this.hint})` : this.message;
  }
}

function describe(reason: SourceFileRefusal, detail: RefusalDetail): [string, string | undefined] {
  switch (reason) {
    case "outside-folder":
      return [
        "leaves the tool's folder: the file opened is outside it (a link, or a folder on its way replaced by a link); tools may import only files in their own folder",
        "keep the tool's files themselves in its folder, not links to them",
      ];
    case "link":
      return ["is a symbolic link (or was replaced by one while it was read); links are not followed", "replace the link with the file itself"];
    case "hard-link":
      return ["has other hard links and is refused (it could be another Anima's file)", "copy the file into the tool's folder instead of linking it"];
    case "not-regular":
      return [`is not a regular file (it is ${detail.what ?? "not a plain file"})`, "put a regular file there"];
    case "too-large":
      return [`is larger than ${detail.maxBytes} bytes`, "make the file smaller"];
    case "missing":
      return ["could not be read: it does not exist", undefined];
    case "unreadable":
      return [`could not be read (${detail.code ?? "error"})`, undefined];
  }
}

/** Whether `path` lies inside `folder` (not the folder itself), both real paths: what a tool may read. */
export function isInside(path: string, folder: string): boolean {
  const rel = relative(folder, path);
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
}

/**
 * Test seam, not a setting: runs right before each open (after every check a caller made on the path),
 * so a test can swap a folder for a link exactly in the window a racing attacker aims for.
 */
export const sourceFileSeam: { beforeOpen?: (path: string) => void | Promise<void> } = {};

export interface SourceFileOptions {
  /**
   * Read a file with other hard links too. For the install's own core tools only: package managers that
   * install from a shared store (pnpm, bun) hard-link every file, and no Anima writes there. Default: false.
   */
  hardLinksAllowed?: boolean;
}

export interface SourceFile {
  bytes: Buffer;
  /** The opened file's status (bigint: the bundle cache's signature). */
  stats: BigIntStats;
}

/**
 * The bytes of the tool source at `path`, which must be, when opened, a regular file with one link
 * inside `folderReal` (a real path), of at most `maxBytes`. Throws `SourceFileRefused` otherwise.
 */
export async function readSourceFile(
  path: string,
  folderReal: string,
  maxBytes: number,
  shownName: string,
  options: SourceFileOptions = {},
): Promise<SourceFile> {
  await sourceFileSeam.beforeOpen?.(path);
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    throw openRefusal(error, shownName);
  }
  try {
    let opened: string;
    try {
      opened = await readlink(`/proc/self/fd/${handle.fd}`);
    } catch (error) {
      throw new SourceFileRefused("unreadable", shownName, { code: (error as NodeJS.ErrnoException).code ?? "error" });
    }
    if (opened.endsWith(" (deleted)")) throw new SourceFileRefused("missing", shownName);
    // Where it is first: what lies outside the folder is not described (not even its kind).
    if (!isInside(opened, folderReal)) throw new SourceFileRefused("outside-folder", shownName);
    const stats = await handle.stat({ bigint: true });
    if (!stats.isFile()) throw new SourceFileRefused("not-regular", shownName, { what: kindOf(stats) });
    if (stats.nlink !== 1n && options.hardLinksAllowed !== true) throw new SourceFileRefused("hard-link", shownName);
    if (stats.size > BigInt(maxBytes)) throw new SourceFileRefused("too-large", shownName, { maxBytes, bytes: Number(stats.size) });
    const tooLarge = (bytes: number) => new SourceFileRefused("too-large", shownName, { maxBytes, bytes });
    return { bytes: await readToEnd(handle.fd, maxBytes, tooLarge), stats };
  } finally {
    await handle.close().catch(() => undefined);
  }
}

function openRefusal(error: unknown, shownName: string): SourceFileRefused {
  const code = (error as NodeJS.ErrnoException).code ?? "error";
  if (code === "ELOOP") return new SourceFileRefused("link", shownName);
  if (code === "ENOENT" || code === "ENOTDIR") return new SourceFileRefused("missing", shownName);
  // A socket cannot be opened (ENXIO); a device may refuse (ENODEV).
  if (code === "ENXIO" || code === "ENODEV") return new SourceFileRefused("not-regular", shownName, { what: "a socket or device" });
  return new SourceFileRefused("unreadable", shownName, { code });
}
