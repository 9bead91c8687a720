import { expect, it } from "vitest";
import type { AuditRecord } from "../../src/audit/audit-log.js";
import { unfinishedCalls } from "../../src/audit/interrupted.js";
import { animaLeastPrivilege } from "../../src/audit/least-privilege.js";
import { MAX_DENIALS_KEPT, buildAnimaReport } from "../../src/audit/report.js";
import { formatAnimaReport } from "../../src/audit/report-text.js";
import { resolveConfig } from "../../src/config.js";
import { makeDataDir } from "../helpers/data-dir.js";
import { turnsDuring } from "../helpers/event-loop.js";

/**
 * An Anima's report walks every record of its period; one Anima's trails hold up to ≈ 280,000 (its own
 * calls fill them), and walked in one piece they held the shared daemon's event loop ≈ 0.5 s per Anima
 * per `audit` run, which an Anima can ask for (audit_report_stall). The walk now gives the loop turns.
 */
it("audit_report_stall: building an Anima's report over many records gives the event loop turns, with the same figures", async () => {
  const data = makeDataDir({ "animas/alice/notes.md": "x" });
  try {
    const records: AuditRecord[] = [];
    for (let i = 0; i < 60_000; i++) {
      const ts = new Date(1_765_000_000_000 + i).toISOString();
      const callId = `c${i >> 1}`;
      if (i % 3 === 0) records.push({ v: 1, seq: i, ts, kind: "call_start", callId, anima: "alice", tool: "web", schema: "web_get", version: "v1", pid: 1 });
      else if (i % 3 === 1)
        records.push({
          v: 1,
          seq: i,
          ts,
          kind: "capability",
          callId,
          anima: "alice",
          tool: "web",
          operation: "fetch",
          target: `https://h${i % 5}.example/`,
          outcome: "ok",
        });
      else records.push({ v: 1, seq: i, ts, kind: "call", callId, anima: "alice", tool: "web", schema: "web_get", durationMs: 1, outcome: "ok" });
    }
    const config = resolveConfig({ dataDir: data.dir });
    const { result: report, turns } = await turnsDuring(() =>
      buildAnimaReport(config, "alice", data.anima("alice"), { anima: "alice", tools: [], problems: [] }, records, { isAlive: () => false }),
    );
    expect(turns).toBeGreaterThanOrEqual(5);
    const unfinished = unfinishedCalls(records, () => false);
    expect({ interrupted: report.interrupted, inFlight: report.inFlight }).toEqual(unfinished);
    expect(report.interrupted.length).toBeGreaterThan(0);
    expect(report.leastPrivilege).toEqual(animaLeastPrivilege(records, { network: report.policy.network, allowInternalHosts: [], readable: [] }));
    expect(report.leastPrivilege.network.hostsReached).toBe(5);
  } finally {
    data.cleanup();
  }
});

it("denial_flood_report: counts every denial of a tool and lists the last 100, so a flood cannot make the report unbounded", async () => {
  const data = makeDataDir({ "animas/alice/notes.md": "x" });
  try {
    const records: AuditRecord[] = Array.from({ length: 5_000 }, (_, i) => ({
      v: 1,
      seq: i + 1,
      ts: new Date(1_765_000_000_000 + i).toISOString(),
      kind: "capability",
      anima: "alice",
      tool: "probe",
      operation: "fs.readFile",
      target: `../bob/${i}`,
      outcome: "denied",
      reason: "SandboxViolation",
    }));
    const config = resolveConfig({ dataDir: data.dir });
    const report = await buildAnimaReport(config, "alice", data.anima("alice"), { anima: "alice", tools: [], problems: [] }, records);
    const probe = report.activity.find((a) => a.tool === "probe");
    expect(probe?.denied).toBe(5_000);
    expect(probe?.denials.map((d) => d.target)).toEqual(Array.from({ length: MAX_DENIALS_KEPT }, (_, i) => `../bob/${4_900 + i}`));
    expect(formatAnimaReport(report)).toContain("… 4990 earlier denials");
  } finally {
    data.cleanup();
  }
});
