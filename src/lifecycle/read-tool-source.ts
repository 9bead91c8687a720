import { realpath } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { ToolHostError } from "../errors.js";
import { SourceFileRefused, isInside, readSourceFile } from "../source-file.js";

/**
 * The source validate (and so refresh's findings: refresh-findings.ts) reads of a tool file, read as the
 * loader reads it (bundling/bundler.ts, through source-file.ts), so that validate never reports on a file
 * the host would not load:
 *
 *  - a symbolic link is followed only to a file inside the link's own folder (as the loader allows); a link
 *    out of it (`tools/cfg.ts -> ../../../config.json`) is refused before a byte of its target is read —
 *    the secrets check once quoted the start of the operator's API keys from such a target, and each
 *    finding its line. A link that leads back to itself (ELOOP) is refused too;
 *  - the resolved file is read by `readSourceFile`: judged by the descriptor opened (still inside the
 *    folder, whatever was swapped in after the check), not blocking on a FIFO, a regular file without
 *    other hard links (a hard link to config.json is refused, not quoted);
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
  if (!isInside(real, folderReal)) {
    throw new ToolHostError(
      "InvalidArguments",
      "the file is a link to a file outside its folder; the host refuses to load it, and validate does not read it",
      LINK_HINT,
    );
  }
  try {
    const { bytes } = await readSourceFile(real, folderReal, maxBytes, basename(path));
    return { text: bytes.toString("utf8"), tooLarge: false };
  } catch (error) {
    if (!(error instanceof SourceFileRefused)) throw error;
    if (error.reason === "too-large") return { tooLarge: true, bytes: error.bytes ?? maxBytes + 1 };
    if (error.reason === "missing") throw openFailure({ code: "ENOENT" });
    if (error.reason === "link") throw openFailure({ code: "ELOOP" });
    if (error.reason === "not-regular") throw new ToolHostError("InvalidArguments", "not a regular file");
    // Outside the folder (a folder swapped for a link), other hard links, unreadable: the loader's words.
    throw new ToolHostError("InvalidArguments", `${error.message}; the host refuses to load it, and validate does not read it`, error.hint);
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
