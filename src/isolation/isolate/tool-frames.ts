import { type BundlePosition, MAX_BUNDLE_POSITION, MAX_TOOL_FRAMES } from "../wire/messages.js";

/**
 * Positions in a tool's bundle, read from the `stack` its failure envelope carried (the contract's
 * `FailureEnvelope.stack`): the sandbox side of a tool's error lines. The host maps them through the
 * bundle's source map and decides what is shown (src/bundling/tool-frames.ts).
 *
 * Invariants:
 *  - The stack is untrusted text (a tool can set `error.stack` to anything): only a line shaped as a V8
 *    frame whose file is exactly the name the bundle was compiled under gives a position, and only its
 *    two numbers leave, never any text of it. Frames of the prelude, of `eval` code, of other files are
 *    skipped.
 *  - Bounded: at most `MAX_TOOL_FRAMES` positions from at most `MAX_STACK_LINES` lines; the text itself is
 *    already cut at the contract's `MAX_TOOL_STACK_CHARS`.
 */

/** Lines of a stack looked at, at most (a forged stack may be many short lines). */
const MAX_STACK_LINES = 64;

/** `at NAME (FILE:LINE:COL)` or `at FILE:LINE:COL` (V8's two frame shapes), `async ` allowed. */
const POSITION = /:(\d{1,8}):(\d{1,8})\)?$/;

/** The bundle positions of the frames of `stack` in file `scriptFilename`, innermost first. */
export function bundlePositions(stack: string | undefined, scriptFilename: string): BundlePosition[] {
  if (typeof stack !== "string" || scriptFilename === "") return [];
  const positions: BundlePosition[] = [];
  let start = 0;
  for (let lines = 0; lines < MAX_STACK_LINES && start < stack.length && positions.length < MAX_TOOL_FRAMES; lines++) {
    const end = stack.indexOf("\n", start);
    const line = stack.slice(start, end === -1 ? stack.length : end).trim();
    start = end === -1 ? stack.length : end + 1;
    const position = positionIn(line, scriptFilename);
    if (position) positions.push(position);
  }
  return positions;
}

function positionIn(line: string, scriptFilename: string): BundlePosition | undefined {
  if (!line.startsWith("at ")) return undefined;
  const numbers = POSITION.exec(line);
  if (!numbers) return undefined;
  const location = line.slice(0, numbers.index);
  // The file is the whole location: after `at ` (an anonymous frame) or after the last ` (` of `at NAME (`.
  const named = line.endsWith(")");
  const file = named ? location.slice(location.lastIndexOf(" (") + 2) : location.slice("at ".length).replace(/^async /, "");
  if (file !== scriptFilename || (named && location.lastIndexOf(" (") === -1)) return undefined;
  const lineNumber = Number(numbers[1]);
  const column = Number(numbers[2]);
  if (lineNumber < 1 || column < 1 || lineNumber > MAX_BUNDLE_POSITION || column > MAX_BUNDLE_POSITION) return undefined;
  return { line: lineNumber, column };
}
