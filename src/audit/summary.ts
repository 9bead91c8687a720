import type { AnimaReport } from "./report.js";
import { type OperatorGrant, formatOperatorFindings, shortList } from "./least-privilege.js";
import { joinReportLines } from "../terminal-text.js";
import { counted } from "../terminal-text.js";

/**
 * The audit report at a glance: one line per Anima, riskiest first, idle Animas folded into one line, and
 * the whole of it on one screen however many Animas there are (`formatSummary` keeps to `maxLines`).
 *
 * Risk order (`compareRisk`), each a count compared highest first, the next one breaking ties:
 *  1. violations: sandbox processes that crashed or broke the protocol (`sandbox_crash` records): code
 *     that may have got out of its isolate, or tried;
 *  2. denials: capability and credential requests the policy refused: a tool reaching beyond its grants;
 *  3. interrupted calls: started and never ended, their host gone (a crash, a kill): what they did is unknown;
 *  4. refusals: management commands refused (a share without the permission, a write outside its folder);
 *  5. unused grants: its own grants it did not use (least privilege: take them back);
 *  6. a broken permissions file (everything permission-dependent is refused until it is fixed);
 *  then the busiest first (calls), then by name.
 * An Anima with no activity in the period and none of these findings is idle.
 */
export interface SummaryRow {
  anima: string;
  calls: number;
  denials: number;
  violations: number;
  interrupted: number;
  refusals: number;
  unusedGrants: number;
  inFlight: number;
  brokenPolicy: boolean;
  /** Its report is incomplete for the period (records rotated away or lost). */
  incomplete: boolean;
  idle: boolean;
}

export interface AuditSummary {
  /** Animas with activity or findings, riskiest first. */
  rows: SummaryRow[];
  /** Animas with neither, by name. */
  idle: string[];
  /** Animas whose report is incomplete for the period, by name. */
  incomplete: string[];
}

export function summaryRow(report: AnimaReport): SummaryRow {
  const row = {
    anima: report.anima,
    calls: report.activity.reduce((n, a) => n + a.calls, 0),
    denials: report.activity.reduce((n, a) => n + a.denied, 0),
    violations: report.violations.length,
    interrupted: report.interrupted.length,
    refusals: report.refusals.length,
    unusedGrants: report.leastPrivilege.unusedGrants.length,
    inFlight: report.inFlight.length,
    brokenPolicy: report.policy.source === "invalid",
    incomplete: report.coverage.warning !== undefined,
  };
  const findings = row.violations + row.denials + row.interrupted + row.refusals + row.unusedGrants + row.inFlight > 0 || row.brokenPolicy;
  return { ...row, idle: report.activity.length === 0 && !findings };
}

/** Riskiest first (see the module comment). */
export function compareRisk(a: SummaryRow, b: SummaryRow): number {
  return (
    b.violations - a.violations ||
    b.denials - a.denials ||
    b.interrupted - a.interrupted ||
    b.refusals - a.refusals ||
    b.unusedGrants - a.unusedGrants ||
    Number(b.brokenPolicy) - Number(a.brokenPolicy) ||
    b.calls - a.calls ||
    a.anima.localeCompare(b.anima)
  );
}

export function buildSummary(reports: readonly AnimaReport[]): AuditSummary {
  const all = reports.map(summaryRow);
  return {
    rows: all.filter((row) => !row.idle).sort(compareRisk),
    idle: all
      .filter((row) => row.idle)
      .map((row) => row.anima)
      .sort(),
    incomplete: all
      .filter((row) => row.incomplete)
      .map((row) => row.anima)
      .sort(),
  };
}

export interface SummaryOptions {
  /** Lines the summary may take at most (one screen). Default: 50. */
  maxLines?: number;
  /** The operator's host-wide grants (absent when the report does not cover every Anima). */
  operator?: readonly OperatorGrant[];
  /** The period's start, if `--since` was given. */
  since?: string;
}

const COLUMNS: Array<[string, keyof SummaryRow]> = [
  ["CALLS", "calls"],
  ["VIOLATIONS", "violations"],
  ["DENIALS", "denials"],
  ["INTERRUPTED", "interrupted"],
  ["REFUSALS", "refusals"],
  ["UNUSED GRANTS", "unusedGrants"],
];
const NAME_WIDTH = 24;
/** The most operator findings listed before the rest are counted. */
const MAX_OPERATOR_LINES = 6;

export function formatSummary(summary: AuditSummary, options: SummaryOptions = {}): string {
  const maxLines = Math.max(10, options.maxLines ?? 50);
  const total = summary.rows.length + summary.idle.length;
  const lines = [
    `Summary: ${counted(total, "Anima")}, records ${options.since ? `since ${options.since}` : "kept"} (riskiest first: violations, denials, interrupted calls, refusals, unused grants)`,
  ];
  const findings = formatOperatorFindings(options.operator ?? []);
  const tail: string[] = [];
  if (summary.idle.length > 0) tail.push(`  ${summary.idle.length} idle Animas (no activity, no findings): ${fitNames(summary.idle, 150)}`);
  if (findings.length > 0) {
    tail.push("  Operator settings that hold for every Anima:");
    tail.push(...findings.slice(0, MAX_OPERATOR_LINES).map((line) => `  ${line}`));
    if (findings.length > MAX_OPERATOR_LINES) tail.push(`    … ${findings.length - MAX_OPERATOR_LINES} more operator findings (--json: operator)`);
  } else if (options.operator === undefined) {
    tail.push("  Operator settings: judged over every Anima (run without --anima)");
  }
  if (summary.incomplete.length > 0) {
    tail.push(`  WARNING: incomplete for ${counted(summary.incomplete.length, "Anima")} (records rotated away or lost): ${shortList(summary.incomplete, 5)}`);
  }
  if (summary.rows.length > 0) {
    const width = Math.min(NAME_WIDTH, Math.max(5, ...summary.rows.map((row) => row.anima.length)));
    lines.push(`  ${"ANIMA".padEnd(width)}  ${COLUMNS.map(([title]) => title).join("  ")}`);
    // Room left for Anima lines: the screen, less the title, the header, what follows, and a line for the rest.
    const room = maxLines - lines.length - tail.length;
    const shown = summary.rows.length <= room ? summary.rows : summary.rows.slice(0, Math.max(1, room - 1));
    for (const row of shown) {
      const name = row.anima.length > width ? `${row.anima.slice(0, width - 1)}…` : row.anima.padEnd(width);
      const cells = COLUMNS.map(([title, key]) => String(row[key]).padStart(title.length)).join("  ");
      const flags = [row.brokenPolicy ? "permissions BROKEN" : "", row.inFlight ? `${row.inFlight} in flight` : "", row.incomplete ? "incomplete" : ""].filter(
        Boolean,
      );
      lines.push(`  ${name}  ${cells}${flags.length ? `  ${flags.join(", ")}` : ""}`);
    }
    const rest = summary.rows.slice(shown.length);
    if (rest.length > 0) {
      const sum = (key: keyof SummaryRow) => rest.reduce((n, row) => n + Number(row[key]), 0);
      lines.push(
        `  … ${rest.length} more Animas of lower risk: ${COLUMNS.map(([title, key]) => `${sum(key)} ${title.toLowerCase()}`).join(", ")} (--anima NAME or --json for each)`,
      );
    }
  }
  return joinReportLines([...lines, ...tail]);
}

/** As many names as fit in `chars`, then how many more. */
function fitNames(names: readonly string[], chars: number): string {
  let text = "";
  let count = 0;
  for (const name of names) {
    const next = text === "" ? name : `${text}, ${name}`;
    if (next.length > chars && count > 0) break;
    text = next;
    count++;
  }
  return count < names.length ? `${text}, … (+${names.length - count} more)` : text;
}
