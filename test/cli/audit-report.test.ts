import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditEvent } from "../../src/audit/audit-log.js";
import { JsonlAuditLog, type JsonlAuditLogOptions } from "../../src/audit/jsonl-audit-log.js";
import { main } from "../../src/cli/main.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * `animaworks-tool audit`'s report (#34): the summary it opens with, least privilege beside use, coverage
 * of the period, and `--html`. Records are appended straight through the audit log of a throwaway data dir.
 */
const SECRET = "xoxb-SECRET-never-shown";
const HOSTILE_TOOL = "<script>document.title='pwned'</script>";
const HOSTILE_TARGET = `https://x.example/"><img src=x onerror="document.title='pwned'">`;

async function audit(data: TempDataDir, ...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(["--data-dir", data.dir, "audit", ...argv], { stdout: (t) => out.push(t), stderr: (t) => err.push(t) }, { cwd: data.dir });
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
}

async function append(data: TempDataDir, events: AuditEvent[], options: JsonlAuditLogOptions = {}, flushEach = false): Promise<void> {
  const log = new JsonlAuditLog(join(data.dir, "logs", "animaworks-tool", "audit"), options);
  for (const event of events) {
    log.append(event);
    if (flushEach) await log.flush();
  }
  await log.close();
}

describe("audit report", () => {
  let data: TempDataDir;
  beforeAll(async () => {
    data = makeDataDir({
      "config.json": JSON.stringify({
        credentials: { slack: { api_key: SECRET } },
        animaworks_tool: { allow_internal_hosts: ["10.0.0.0/8", "intranet.example"], allowed_environment: ["API_TOKEN"] },
      }),
      "animas/alice/permissions.json": JSON.stringify({ sandbox: { network: { allow: ["api.example.com", "unused.example.com"] } } }),
      "animas/bob/permissions.json": JSON.stringify({ sandbox: { network: "public" } }),
    });
    for (const name of ["alice", "bob", "carol"]) data.anima(name);
    const call = (anima: string, tool: string, callId: string): AuditEvent => ({
      kind: "call",
      callId,
      anima,
      tool,
      schema: `${tool}_run`,
      version: "f".repeat(64),
      durationMs: 2,
      outcome: "ok",
    });
    await append(data, [
      call("alice", "web", "a1"),
      { kind: "capability", callId: "a1", anima: "alice", tool: "web", operation: "fetch", target: "https://api.example.com/v1", outcome: "ok" },
      { kind: "credential", callId: "a1", anima: "alice", tool: "web", name: "slack", outcome: "ok", source: "config.json" },
      { kind: "credential", callId: "a1", anima: "alice", tool: "web", name: "github", outcome: "missing" },
      { kind: "credential", callId: "a1", anima: "alice", tool: "web", name: "API_TOKEN", outcome: "denied", reason: "not in allowed_environment" },
      call("alice", HOSTILE_TOOL, "a2"),
      {
        kind: "capability",
        callId: "a2",
        anima: "alice",
        tool: HOSTILE_TOOL,
        operation: "fetch",
        target: HOSTILE_TARGET,
        outcome: "denied",
        reason: "SandboxViolation: not allowed",
      },
      call("bob", "web", "b1"),
      { kind: "capability", callId: "b1", anima: "bob", tool: "web", operation: "fetch", target: "http://10.1.2.3/x", outcome: "ok" },
      { kind: "sandbox_crash", anima: "bob", tool: "web", message: "sandbox process 4242 sent a message that is not part of the protocol" },
    ]);
  });
  afterAll(() => data.cleanup());

  it("opens with a summary: riskiest first, idle Animas folded, operator settings judged over every Anima", async () => {
    const { code, stdout } = await audit(data);
    expect(code).toBe(0);
    // First, whether the trails the report was read from are whole (audit verify's check).
    expect(stdout).toMatch(/^Audit trails: verified, every chain whole \(\d+ trails\)\n\n/);
    const lines = stdout.slice(stdout.indexOf("Summary:")).split("\n");
    expect(lines[0]).toBe("Summary: 3 Animas, records kept (riskiest first: violations, denials, interrupted calls, refusals, unused grants)");
    expect(lines[2]).toMatch(/^ {2}bob +1 +1 +0 +0 +0 +0$/);
    // alice: 2 denials (the hostile fetch, API_TOKEN outside allowed_environment) and 1 unused allowlist entry.
    expect(lines[3]).toMatch(/^ {2}alice +2 +0 +2 +0 +0 +1$/);
    expect(stdout).toContain("\n  1 idle Animas (no activity, no findings): carol\n");
    expect(stdout).toContain("\n    allow_internal_hosts 10.0.0.0/8: over-broad: allowed for every Anima (3), used by 1: bob\n");
    expect(stdout).toContain("\n    allow_internal_hosts intranet.example: allowed for every Anima, never used in the period: remove it\n");
    expect(stdout).toContain("\n    credential slack [config.json credentials.slack (api_key)]: over-broad: readable by every Anima (3), used by 1: alice\n");
    expect(stdout).toContain("\n    allowed_environment API_TOKEN: allowed but not set: nothing can read it; remove it\n");
    // The detail follows the summary and the host's sections.
    expect(stdout.indexOf("Configuration (")).toBeGreaterThan(stdout.indexOf("idle Animas"));
    expect(stdout).toMatch(/\n {4}network allowlist: api\.example\.com ×1 \(last \S+\); unused\.example\.com UNUSED\n/);
    expect(stdout).toMatch(
      /\n {4}credentials readable: slack \[config\.json credentials\.slack \(api_key\)\] ×1 \(last \S+\); API_TOKEN \[allowed_environment\] NOT SET\n/,
    );
    // A lookup that found nothing is no use of anything; a denial names what was refused.
    expect(stdout).toMatch(/\n {4}lookups answered: slack from config\.json ×1 \(last \S+\)\n/);
    expect(stdout).toContain("denied credential API_TOKEN — PermissionDenied: not in allowed_environment");
    expect(stdout).toContain("  violation web: sandbox process 4242 sent a message that is not part of the protocol");
    expect(stdout).not.toContain(SECRET);
  });

  it("--anima selects one Anima (no operator judgement), and --json carries all of it", async () => {
    const one = await audit(data, "--anima", "alice");
    // The integrity line covers every trail of the folder, not only alice's: whoever edits one trail can edit another.
    expect(one.stdout).toMatch(/^Audit trails: verified, every chain whole \(\d+ trails\)\n\nSummary: 1 Anima, /);
    expect(one.stdout).toContain("  Operator settings: judged over every Anima (run without --anima)");
    expect(one.stdout).not.toContain("Anima bob");

    const json = JSON.parse((await audit(data, "--json")).stdout);
    expect(json.summary.rows.map((row: { anima: string }) => row.anima)).toEqual(["bob", "alice"]);
    expect(json.summary.idle).toEqual(["carol"]);
    expect(json.operator.grants.find((g: { entry: string }) => g.entry === "intranet.example")).toMatchObject({ usedBy: [], appliesTo: 3 });
    expect(json.operator.policyHistory).toEqual(expect.any(Array));
    const alice = json.reports.find((r: { anima: string }) => r.anima === "alice");
    expect(alice.coverage).toMatchObject({ rotatedAway: false, lostRecords: 0, oldestTs: expect.any(String) });
    expect(alice.leastPrivilege.network.grants).toEqual([
      { entry: "api.example.com", uses: 1, lastUsed: expect.any(String) },
      { entry: "unused.example.com", uses: 0 },
    ]);
    expect(alice.leastPrivilege.credentials.map((c: { name: string; source: string; status: string }) => `${c.name} ${c.source} ${c.status}`)).toEqual([
      "slack config.json used",
      "API_TOKEN environment unused",
    ]);
    expect(alice.timeline.map((e: { kind: string }) => e.kind)).toEqual(["denial", "denial"]);
    expect(alice.versions).toEqual([
      { tool: HOSTILE_TOOL, version: "f".repeat(64), firstTs: expect.any(String), lastTs: expect.any(String), calls: 1 },
      { tool: "web", version: "f".repeat(64), firstTs: expect.any(String), lastTs: expect.any(String), calls: 1 },
    ]);
    expect(JSON.stringify(json)).not.toContain(SECRET);
  });

  it("--html writes one self-contained page, where a tool's hostile name or target is only text", async () => {
    const { code, stdout } = await audit(data, "--html", "report.html");
    expect(code).toBe(0);
    const file = join(data.dir, "report.html");
    expect(stdout).toBe(`Wrote the audit report of 3 Animas to ${file}`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const page = readFileSync(file, "utf8");
    expect(page).toMatch(/^<!doctype html>/);
    expect(page).toContain(`content="default-src 'none'; style-src 'unsafe-inline'`);
    // No markup from records: the only tags are the report's own, and nothing is loaded from anywhere.
    expect(page).not.toMatch(/<(script|img|link|iframe|object|embed|base)\b|@import|url\(/i);
    expect([...page.matchAll(/\bhref="([^"]*)"/g)].map((m) => m[1]).filter((href) => !href?.startsWith("#anima-"))).toEqual([]);
    expect(page).toContain("&#60;script&#62;document.title=&#39;pwned&#39;&#60;/script&#62;");
    expect(page).toContain("&#34;&#62;&#60;img src=x onerror=&#34;document.title=&#39;pwned&#39;&#34;&#62;");
    expect(page).toContain('<tr class="summary-row"><td><a href="#anima-1">bob</a></td>');
    expect(page).toContain("1 idle Animas (no activity, no findings): carol");
    expect(page).not.toContain(SECRET);
    const bad = await audit(data, "--html");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--html needs a file name");
  });
});

describe("audit coverage", () => {
  let data: TempDataDir;
  afterAll(() => data.cleanup());

  it("warns when records of the period were rotated away, and not for a period the kept records cover", async () => {
    data = makeDataDir();
    data.anima("alice");
    const call = (i: number): AuditEvent => ({ kind: "call", callId: `c${i}`, anima: "alice", tool: "web", schema: "web_run", durationMs: 1, outcome: "ok" });
    // A tiny trail with one old generation: most records are rotated away.
    await append(
      data,
      Array.from({ length: 12 }, (_, i) => call(i)),
      { maxBytes: 400, keepFiles: 1 },
      true,
    );
    const { stdout } = await audit(data);
    expect(stdout).toMatch(/\n {2}WARNING: records before \S+ were rotated away: this report is incomplete for that period\n/);
    expect(stdout).toContain("  WARNING: incomplete for 1 Anima (records rotated away or lost): alice");
    expect(stdout).toMatch(/\n {2}alice +\d+ +0 +0 +0 +0 +\d+ {2}incomplete\n/);
    const recent = await audit(data, "--since", new Date(Date.now() + 60_000).toISOString());
    expect(recent.stdout).not.toContain("rotated away: this report is incomplete");
    const json = JSON.parse((await audit(data, "--json")).stdout);
    expect(json.reports[0].coverage).toMatchObject({ rotatedAway: true, warning: expect.stringContaining("were rotated away") });
  });

  it("says when --since reaches before the oldest record of a trail that lost nothing, and counts records lost", async () => {
    const fresh = makeDataDir();
    try {
      fresh.anima("alice");
      await append(fresh, [
        { kind: "call", callId: "c1", anima: "alice", tool: "web", schema: "web_run", durationMs: 1, outcome: "ok" },
        { kind: "audit_gap", anima: "alice", lost: 7, reason: "the trail could not be written" },
      ]);
      const { stdout } = await audit(fresh, "--since", "2020-01-01T00:00:00Z");
      expect(stdout).toMatch(
        /\n {2}note: --since 2020-01-01T00:00:00\.000Z reaches before the oldest kept record \(\S+\); nothing was rotated away: the trail began then\n/,
      );
      expect(stdout).toContain("  WARNING: 7 records were lost before they could be written (audit_gap): this report is incomplete");
    } finally {
      fresh.cleanup();
    }
  });

  it("opens with BROKEN when a record was inserted with a made-up seq and prev, in text, JSON and HTML, and audit events warns (report_seqforge)", async () => {
    // The report reads records without walking the chain: an inserted record that carries a seq and a
    // prev is shown as the host's own. The report now says first that its trails do not verify.
    const forged = makeDataDir();
    try {
      forged.anima("alice");
      const call = (callId: string): AuditEvent => ({ kind: "call", callId, anima: "alice", tool: "web", schema: "web_run", durationMs: 1, outcome: "ok" });
      await append(forged, [call("c1"), call("c2")]);
      const trail = join(forged.dir, "logs", "animaworks-tool", "audit", "animas", "alice.jsonl");
      const lines = readFileSync(trail, "utf8").trimEnd().split("\n");
      const first = JSON.parse(lines[0] ?? "") as { seq: number; prev: string; ts: string };
      // Between the two: a call that never ran, with the seq and prev a careless forger would pick.
      const inserted = JSON.stringify({ v: 1, seq: first.seq + 1, ts: first.ts, prev: first.prev, ...call("forged") });
      writeFileSync(trail, `${[lines[0], inserted, ...lines.slice(1)].join("\n")}\n`);
      const text = await audit(forged);
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/^Audit trails: BROKEN \(\d+ findings\): records below may have been inserted, edited or removed/);
      expect(text.stdout.split("\n")[1]).toMatch(/^ {2}BROKEN: animas\/alice\.jsonl/);
      const json = JSON.parse((await audit(forged, "--json")).stdout) as { integrity: { ok: boolean; broken: number; findings: string[] } };
      expect(json.integrity.ok).toBe(false);
      expect(json.integrity.broken).toBeGreaterThan(0);
      expect(json.integrity.findings[0]).toMatch(/^animas\/alice\.jsonl/);
      expect((await audit(forged, "--html", "report.html")).code).toBe(0);
      const page = readFileSync(join(forged.dir, "report.html"), "utf8");
      expect(page).toContain('<h2 class="warning">Audit trails BROKEN</h2>');
      expect(page.indexOf("Audit trails BROKEN")).toBeLessThan(page.indexOf('<section id="summary">'));
      // An export streams the forged record like any other (a JSON line has no room for a verdict) and
      // then says on stderr that the trails it came from do not verify.
      const events = await audit(forged, "events");
      expect(events.code).toBe(0);
      expect(
        events.stdout
          .split("\n")
          .filter((line) => line !== "")
          .map((line) => (JSON.parse(line) as { callId: string }).callId),
      ).toContain("forged");
      expect(events.stderr).toMatch(/^Warning: the audit trails do not verify \(\d+ findings\): records above may have been inserted, edited or removed/);
      expect(events.stderr.split("\n")[1]).toMatch(/^ {2}BROKEN: animas\/alice\.jsonl/);
    } finally {
      forged.cleanup();
    }
  });
});
