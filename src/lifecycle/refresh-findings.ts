import { stat } from "node:fs/promises";
import { join } from "node:path";
import type { ToolInfo } from "../host-api.js";
import { TOOL_EXTENSIONS } from "../registry/discovery.js";
import { type Finding, countFindings, findingLocation, standIns } from "./findings.js";
import { counted } from "../terminal-text.js";
import { validateToolFile } from "./validate.js";

/**
 * What `refresh` says about a tool that does not load: the findings `validate` gives for its file, the
 * same checks on the same load error (so the two never disagree, and a refresh names every problem, not
 * only the first that stopped the load), at a path the reader can use: `tools/x.ts` for a personal tool
 * (from the Anima's folder, where its Bash runs), `common_tools/x.ts` for a shared one (from the data dir).
 */

/** Findings listed per failed tool at most; the rest are counted, with the validate command that lists them. */
export const MAX_REFRESH_FINDINGS = 10;

export interface FailureFindings {
  /** The tool's file, as shown (see above). */
  path: string;
  findings: Finding[];
}

/** `validate`'s findings for a tool of the listing whose load failed; undefined when its file is not found (a core tool). */
export async function failureFindings(dataDir: string, anima: string | undefined, tool: ToolInfo): Promise<FailureFindings | undefined> {
  const folder = tool.origin === "personal" && anima !== undefined ? { dir: join(dataDir, "animas", anima), shown: "tools" } : undefined;
  const where = folder ?? (tool.origin === "shared" ? { dir: dataDir, shown: "common_tools" } : undefined);
  if (!where) return undefined;
  for (const extension of TOOL_EXTENSIONS) {
    const file = `${tool.name}${extension}`;
    const absolute = join(where.dir, where.shown, file);
    if (!(await stat(absolute).catch(() => undefined))?.isFile()) continue;
    // The load already ran: its error is what load-check.ts's describeFile would report for this file.
    const problem = tool.error ? (tool.error.hint ? `${tool.error.message} (${tool.error.hint})` : tool.error.message) : "the tool failed to load";
    try {
      const report = await validateToolFile(absolute, { load: async () => ({ ok: false, problems: [problem] }), ...(anima !== undefined ? { anima } : {}) });
      const path = `${where.shown}/${file}`;
      return { path, findings: keptForRefresh(report.findings, path) };
    } catch {
      return undefined; // gone or unreadable since the listing: its load error stands alone
    }
  }
  return undefined;
}

/**
 * The findings a refresh keeps of a failed tool: those it lists, then one per level counting the rest
 * (`omitted`), so that its totals stay whole. A refresh reports every failed tool of an Anima at once, and
 * a report of all their findings (up to 100 per check each) was held, and sent to `--json` readers, whole.
 */
function keptForRefresh(findings: readonly Finding[], path: string): Finding[] {
  const left = standIns(
    findings.slice(MAX_REFRESH_FINDINGS),
    (level, count) => `… and ${counted(count, `more ${level}`)}: run animaworks-tool validate ${path}`,
  );
  return [...findings.slice(0, MAX_REFRESH_FINDINGS), ...left];
}

/** A failed tool's lines in refresh's text: a count, then each finding as validate prints it, bounded. */
export function failureLines(name: string, failure: FailureFindings): string[] {
  const { errors, warnings } = countFindings(failure.findings);
  const lines = [`failed   ${name}: ${counted(errors, "error")}, ${counted(warnings, "warning")} (${failure.path})`];
  for (const f of failure.findings.slice(0, MAX_REFRESH_FINDINGS)) lines.push(`  ${findingLocation(failure.path, f)}: ${f.level} [${f.check}] ${f.message}`);
  // A finding standing for others left out (`omitted`) tells of them itself.
  const listed = countFindings(failure.findings.slice(0, MAX_REFRESH_FINDINGS));
  const more = errors + warnings - listed.errors - listed.warnings;
  if (more > 0) lines.push(`  ${more} more: run animaworks-tool validate ${failure.path}`);
  return lines;
}
