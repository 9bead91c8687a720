import { constants } from "node:fs";
import { open, realpath } from "node:fs/promises";
import { dirname, isAbsolute, relative, sep } from "node:path";
import { ToolHostError } from "../errors.js";

/**
 * The source validate (and so refresh's findings: refresh-findings.ts) reads of a tool file, read as the
 * loader reads it (bundling/bundler.ts), so that validate never reports on a file the host would not load:
 *
 *  - a symbolic link is followed only to a file inside the link's own folder (as the loader allows); a link
 *    out of it (`tools/cfg.ts -> ../../../config.json`) is refused before a byte of its target is read —
 *    the secrets check once quoted the start of the operator's API keys from such a target, and each
 *    finding its line. A link that leads back to itself (ELOOP) is refused too;
 *  - the resolved file is opened with O_NOFOLLOW (it cannot be swapped for a link after the check) and
 *    O_NONBLOCK (a FIFO named like a tool must not hang the validator), and must be a regular file;
 *  - at most `maxBytes` are kept (`tooLarge` says the size otherwise).
 */
export type ToolSource = { text: string; tooLarge: false } | { tooLarge: true; bytes: number; text?: undefined };

const LINK_HINT = "put the tool's source itself in the tools folder in place of the link";

export async function readToolSource(path: string, maxBytes: number): Promise<ToolSource> {
  let real: string;
  let folderReal: string;
  try {
    real = await realpath(path);
    folderReal = await realpath(dirname(path));
  } catch (error) {
    throw openFailure(error);
  }
  const inFolder = relative(folderReal, real);
  // As bundling/inside-folder.ts (not importable here: lifecycle does not reach into bundling).
  if (inFolder === "" || inFolder === ".." || inFolder.startsWith(`..${sep}`) || isAbsolute(inFolder)) {
    throw new ToolHostError(
      "InvalidArguments",
      "the file is a link to a file outside its folder; the host refuses to load it, and validate does not read it",
      LINK_HINT,
    );
  }
  let handle;
  try {
    handle = await open(real, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (error) {
    throw openFailure(error);
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new ToolHostError("InvalidArguments", "not a regular file");
    if (info.size > maxBytes) return { tooLarge: true, bytes: info.size };
    const bytes = await handle.readFile();
    if (bytes.length > maxBytes) return { tooLarge: true, bytes: bytes.length };
    return { text: bytes.toString("utf8"), tooLarge: false };
  } finally {
    await handle.close();
  }
}

function openFailure(error: unknown): ToolHostError {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return new ToolHostError("NotFound", `no such file`, "give the path of a tool file, e.g. tools/my_tool.ts");
  // ELOOP: a link that leads back to itself (or, at open, one swapped in after the check).
  if (code === "ELOOP")
    return new ToolHostError("InvalidArguments", "the file is a symbolic link that leads back to itself; the host refuses to load it", LINK_HINT);
  return new ToolHostError("InvalidArguments", `the file cannot be read (${code ?? "error"})`);
}
