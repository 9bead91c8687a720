import type { Finding } from "./findings.js";

/**
 * A real load's problem (load-check.ts) as validate findings. A build failure names where each of its
 * errors is (`<tool> could not be built: file.ts:3:7: text; helper.ts:1:1: text (and 2 more)`, see
 * bundling/bundler.ts): each becomes a finding of its own with that line and column, so the printed line
 * starts `path:line:col:` as editors and CI expect, not with the place buried in the message. Any other
 * problem is one finding as it is.
 */

const BUILD_FAILURE = /^.+? could not be built: ([\s\S]*)$/;
/** One located build error's start: `file:line:column: ` at the start or after the `; ` that joins them. */
const LOCATED = /(?:^|; )([^\s:;][^:;]*?):(\d+):(\d+): /g;
const MORE = / \(and (\d+) more\)$/;

/**
 * `entryNames`: the names the validated file has in the load (its own, and the tool's name plus extension
 * when it is checked under another one): errors in it get its line; errors in another file (a helper it
 * imports) name that file, relative to the validated file's folder.
 */
export function loadFindings(problem: string, entryNames: readonly string[]): Finding[] {
  const build = BUILD_FAILURE.exec(problem);
  if (!build) return [{ level: "error", check: "load", message: problem }];
  let rest = build[1] as string;
  const more = MORE.exec(rest);
  if (more) rest = rest.slice(0, more.index);
  const starts = [...rest.matchAll(LOCATED)];
  if (starts.length === 0) return [{ level: "error", check: "load", message: problem }];
  const findings: Finding[] = [];
  const before = rest.slice(0, starts[0]!.index).trim();
  if (before !== "") findings.push({ level: "error", check: "load", message: `the tool could not be built: ${before}` });
  starts.forEach((start, i) => {
    const end = i + 1 < starts.length ? starts[i + 1]!.index : rest.length;
    const text = rest.slice(start.index + start[0].length, end);
    const file = start[1] as string;
    findings.push({
      level: "error",
      check: "load",
      line: Number(start[2]),
      column: Number(start[3]),
      ...(entryNames.includes(file) ? {} : { file }),
      message: `build error: ${text}`,
    });
  });
  if (more) findings.push({ level: "error", check: "load", message: `${more[1]} more build errors, shown once these are fixed` });
  return findings;
}
