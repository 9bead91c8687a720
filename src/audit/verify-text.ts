import type { VerifyReport } from "./verify.js";
import { counted } from "../terminal-text.js";

/** What `audit verify`, the report and `audit events` say of a walk of the trails (verify.ts). */

export function formatVerifyReport(report: VerifyReport): string {
  const lines = [
    report.ok ? "audit trail verified: every chain is whole" : "audit trail BROKEN: records were changed, removed, reordered or truncated",
    ...report.trails.map(
      (t) =>
        `  ${t.trail}: ${counted(t.records, "record")}${t.firstSeq !== undefined ? `, seq ${t.firstSeq}–${t.lastSeq}` : ""}${t.oldestTs ? ` (${t.oldestTs} … ${t.newestTs})` : ""}`,
    ),
    ...report.findings.map((f) => `  ${f.severity === "broken" ? "BROKEN" : "note"}: ${f.trail}${f.at ? ` (${f.at})` : ""}: ${f.message}`),
  ];
  return lines.join("\n");
}

/** How many of verify's broken findings the audit report quotes; `audit verify` lists them all. */
const REPORT_FINDINGS = 5;

/**
 * The chain check as the audit report shows it, first: the report reads records without walking the chain
 * (a record inserted with a made-up `seq` and `prev` looks like the host's own there), so an auditor reading
 * a report must see at its top whether the trails it was read from are whole.
 */
export interface TrailIntegrity {
  /** Every chain whole (no `broken` finding). */
  ok: boolean;
  trails: number;
  /** How many `broken` findings `audit verify` has. */
  broken: number;
  /** The first broken findings, as `audit verify` words them. */
  findings: string[];
}

export function trailIntegrity(report: VerifyReport): TrailIntegrity {
  const broken = report.findings.filter((f) => f.severity === "broken");
  return {
    ok: report.ok,
    trails: report.trails.length,
    broken: broken.length,
    findings: broken.slice(0, REPORT_FINDINGS).map((f) => `${f.trail}${f.at ? ` (${f.at})` : ""}: ${f.message}`),
  };
}

/** The integrity line(s) at the top of the text report (the caller makes the text terminal-safe). */
export function formatIntegrity(integrity: TrailIntegrity): string[] {
  if (integrity.ok) return [`Audit trails: verified, every chain whole (${counted(integrity.trails, "trail")})`];
  return [
    `Audit trails: BROKEN (${integrity.broken} findings): records below may have been inserted, edited or removed and shown as the host's own; \`audit verify\` lists where`,
    ...brokenFindingLines(integrity),
  ];
}

/** The findings of a broken integrity, one indented line each (the first few, then how many more). */
export function brokenFindingLines(integrity: TrailIntegrity): string[] {
  return [
    ...integrity.findings.map((finding) => `  BROKEN: ${finding}`),
    ...(integrity.broken > integrity.findings.length ? [`  … ${integrity.broken - integrity.findings.length} more`] : []),
  ];
}
