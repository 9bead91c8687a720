import { realpath } from "node:fs/promises";
import { basename } from "node:path";
import type { ErrorInfo } from "../errors.js";
import { PYTHON_BUNDLE_MARKER } from "../isolation/wire/tool-bundle.js";
import type { ToolBundle } from "../isolation/wire/messages.js";
import { sha256 } from "./sha256.js";
import { SourceFileRefused, isInside, readSourceFile } from "../source-file.js";

/**
 * A Python tool's bundle: its source text, as a script that hands it to the Python runtime of its isolate
 * (`__awPythonTool`, sandbox/python-runtime.ts), after `PYTHON_BUNDLE_MARKER` (wire/tool-bundle.ts), by
 * which the runner knows to boot Python. A Python tool is one file: its folder's other `.py` files are
 * not importable (its isolate has no file system of the host's).
 *
 * The file is read as the TypeScript bundler reads sources (source-file.ts): a link must stay inside the
 * tools folder, and what is read is judged by the descriptor opened (a link or folder swapped in after the
 * check is refused, not followed), a regular file with one link of at most `maxBytes` (a FIFO or /dev/zero
 * named like a tool cannot hang or swamp the host); it must be UTF-8 text.
 */
export async function buildPythonBundle(
  source: { path: string; folder: string; folderReal?: string; core?: boolean; displayName: string },
  maxBytes: number,
): Promise<{ ok: true; bundle: ToolBundle } | { ok: false; error: ErrorInfo }> {
  const fail = (message: string, hint?: string) => ({
    ok: false as const,
    error: { type: "LoadError" as const, fault: "tool" as const, message, ...(hint ? { hint } : {}) },
  });
  let folderReal: string;
  let entryReal: string;
  try {
    // As discovery checked it, when it did (bundler.ts ToolSourceFile.folderReal).
    folderReal = source.folderReal ?? (await realpath(source.folder));
    entryReal = await realpath(source.path);
  } catch {
    return fail(`${source.displayName} could not be read`);
  }
  if (!isInside(entryReal, folderReal)) {
    return fail(`${source.displayName} is a link to a file outside its tools folder`, "replace the link with the file itself");
  }
  let bytes: Buffer;
  try {
    ({ bytes } = await readSourceFile(entryReal, folderReal, maxBytes, source.displayName, { hardLinksAllowed: source.core === true }));
  } catch (error) {
    return error instanceof SourceFileRefused ? fail(error.message, error.hint) : fail(`${source.displayName} could not be read`);
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return fail(`${source.displayName} is not UTF-8 text`, "save the file as UTF-8");
  }
  const code = `${PYTHON_BUNDLE_MARKER}__awPythonTool(${JSON.stringify(text)}, ${JSON.stringify(basename(source.path))});\n`;
  return { ok: true, bundle: { hash: sha256(code), code, displayName: source.displayName } };
}
