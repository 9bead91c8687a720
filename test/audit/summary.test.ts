import { describe, expect, it } from "vitest";
import type { AnimaReport } from "../../src/audit/report.js";
import { buildSummary, compareRisk, formatSummary, summaryRow } from "../../src/audit/summary.js";
import type { OperatorGrant } from "../../src/audit/least-privilege.js";

/** A report with only what the summary reads set; `calls`, denials… as counts. */
function report(
  anima: string,
  counts: {
    calls?: number;
    denials?: number;
    violations?: number;
    interrupted?: number;
    refusals?: number;
    unused?: number;
    broken?: boolean;
    incomplete?: boolean;
  } = {},
): AnimaReport {
  const calls = counts.calls ?? 0;
  const denials = Array.from({ length: counts.denials ?? 0 }, () => ({
    ts: "2026-01-01T00:00:00.000Z",
    operation: "fetch",
    target: "https://x.example/",
    reason: "",
  }));
  const call = { callId: "c", tool: "t", schema: "t_run", version: "v", startedAt: "2026-01-01T00:00:00.000Z", pid: 1 };
  return {
    anima,
    policy: { source: counts.broken ? "invalid" : "defaults" },
    activity: calls + denials.length > 0 ? [{ tool: "t", calls, ok: calls, errors: {}, used: {}, denied: denials.length, denials }] : [],
    violations: Array.from({ length: counts.violations ?? 0 }, () => ({ ts: "2026-01-01T00:00:00.000Z", message: "crash" })),
    interrupted: Array.from({ length: counts.interrupted ?? 0 }, () => call),
    inFlight: [],
    refusals: Array.from({ length: counts.refusals ?? 0 }, () => ({ ts: "", command: "share_tool", target: "x", errorType: "PermissionDenied", reason: "" })),
    leastPrivilege: { unusedGrants: Array.from({ length: counts.unused ?? 0 }, (_, i) => `grant ${i}`) },
    coverage: { rotatedAway: false, lostRecords: 0, ...(counts.incomplete ? { warning: "records before … were rotated away" } : {}) },
  } as unknown as AnimaReport;
}

describe("the audit summary", () => {
  it("orders by risk: violations, then denials, interrupted calls, refusals, unused grants, a broken policy, then calls and name", () => {
    const reports = [
      report("busy", { calls: 90 }),
      report("quiet", { calls: 1 }),
      report("broken", { broken: true }),
      report("unused", { calls: 1, unused: 3 }),
      report("refused", { refusals: 1, unused: 9 }),
      report("interrupted", { calls: 1, interrupted: 1, refusals: 0 }),
      report("denied", { calls: 1, denials: 2, interrupted: 5 }),
      report("violator", { calls: 1, violations: 1 }),
      report("violator2", { calls: 1, violations: 1, denials: 1 }),
    ];
    expect(buildSummary(reports).rows.map((row) => row.anima)).toEqual([
      "violator2",
      "violator",
      "denied",
      "interrupted",
      "refused",
      "unused",
      "broken",
      "busy",
      "quiet",
    ]);
    expect(compareRisk(summaryRow(report("a", { calls: 1 })), summaryRow(report("b", { calls: 1 })))).toBeLessThan(0);
  });

  it("folds Animas with no activity and no findings into one line, but not an idle Anima with a finding", () => {
    const summary = buildSummary([report("active", { calls: 3 }), report("zed"), report("amy"), report("unusedButIdle", { unused: 1 })]);
    expect(summary.idle).toEqual(["amy", "zed"]);
    expect(summary.rows.map((row) => row.anima)).toEqual(["unusedButIdle", "active"]);
    const text = formatSummary(summary, { operator: [] });
    expect(text).toContain("  2 idle Animas (no activity, no findings): amy, zed");
    expect(text.split("\n")[1]).toMatch(/^ {2}ANIMA +CALLS {2}VIOLATIONS {2}DENIALS {2}INTERRUPTED {2}REFUSALS {2}UNUSED GRANTS$/);
    expect(text).toMatch(/\n {2}active +3 +0 +0 +0 +0 +0\n/);
  });

  it("fits one screen for 200 Animas: the riskiest listed, the rest counted, the idle ones named in one line", () => {
    const reports = Array.from({ length: 200 }, (_, i) =>
      i < 37
        ? report(`idle-${String(i).padStart(3, "0")}`)
        : report(`anima-${String(i).padStart(3, "0")}`, { calls: i, denials: i % 5, violations: i % 50 === 0 ? 1 : 0 }),
    );
    const operator: OperatorGrant[] = Array.from({ length: 9 }, (_, i) => ({
      setting: "allow_internal_hosts",
      entry: `10.${i}.0.0/16`,
      uses: 0,
      usedBy: [],
      appliesTo: 200,
      finding: "allowed for every Anima, never used in the period: remove it",
    }));
    const text = formatSummary(buildSummary(reports), { operator, since: "2026-01-01T00:00:00.000Z" });
    const lines = text.split("\n");
    expect(lines.length).toBeLessThanOrEqual(50);
    expect(lines[0]).toBe(
      "Summary: 200 Animas, records since 2026-01-01T00:00:00.000Z (riskiest first: violations, denials, interrupted calls, refusals, unused grants)",
    );
    // The violators first (i = 50, 100, 150), then the most denials.
    expect(lines.slice(2, 5).map((line) => line.trim().split(/\s+/)[0])).toEqual(["anima-150", "anima-100", "anima-050"]);
    const more = lines.find((line) => line.startsWith("  … ") && line.includes("more Animas of lower risk"));
    expect(more).toMatch(
      /^ {2}… \d+ more Animas of lower risk: \d+ calls, 0 violations, \d+ denials, 0 interrupted, 0 refusals, 0 unused grants \(--anima NAME or --json for each\)$/,
    );
    const listed = lines.filter((line) => /^ {2}anima-\d{3} /.test(line)).length;
    expect(listed + Number(/… (\d+) more Animas/.exec(more ?? "")?.[1])).toBe(163);
    expect(text).toMatch(/\n {2}37 idle Animas \(no activity, no findings\): idle-000, idle-001, .*, … \(\+\d+ more\)\n/);
    expect(text).toContain("\n    allow_internal_hosts 10.0.0.0/16: allowed for every Anima, never used in the period: remove it");
    expect(text).toContain("\n    … 3 more operator findings (--json: operator)");
    // A smaller screen gets fewer lines.
    expect(formatSummary(buildSummary(reports), { operator, maxLines: 24 }).split("\n").length).toBeLessThanOrEqual(24);
  });

  it("says which Animas' reports are incomplete, and that operator settings need every Anima", () => {
    const text = formatSummary(buildSummary([report("old", { calls: 1, incomplete: true }), report("new", { calls: 2 })]));
    expect(text).toContain("  WARNING: incomplete for 1 Anima (records rotated away or lost): old");
    expect(text).toContain("  Operator settings: judged over every Anima (run without --anima)");
    expect(text).toMatch(/\n {2}old +1 .* incomplete\n/);
  });
});
