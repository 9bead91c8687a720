import { appendFileSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type AuditQuery, type AuditRecord, matches } from "../../src/audit/audit-log.js";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { RecordRuns } from "../../src/audit/record-order.js";
import { generationsOf } from "../../src/audit/trail.js";
import { turnsDuring } from "../helpers/event-loop.js";

/**
 * `read()` in a long-running host (red team: audit_read_stall). An Anima's own trail fills to its rotation
 * bound in seconds (a tool making capability calls); then every `audit events` or `audit` it ran through
 * the shared daemon parsed its 40 MB in one piece: the event loop stalled ~0.4 s per read (1.4 s with four
 * at once), every other Anima's calls waiting behind it. The read now gives the event loop a turn at least
 * every 2,000 lines (or 512 KiB) of trail text and while it merges the trails.
 */

let dir: string;
let auditDir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awt-read-yield-"));
  auditDir = join(dir, "audit");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const capability = (anima: string, i: number) => ({
  kind: "capability" as const,
  anima,
  tool: "flood",
  operation: "fs.readFile",
  target: `notes/${i}.md`,
  outcome: "ok" as const,
});

describe("reading the audit log in a long-running host (audit_read_stall)", () => {
  it("merges many runs that share one millisecond in linear time, oldest first, each run's order kept (audit_merge_instant)", { timeout: 20_000 }, async () => {
    // Timestamps that step back at every other record (two writers' batches, a clock stepping back) make
    // a run of each pair: 40,000 runs sharing two milliseconds. Each taken record once looked at every run
    // already spent: 81 s for 80,000 records on the daemon's thread.
    const runs = new RecordRuns();
    const pairs = 40_000;
    for (let i = 0; i < pairs; i++) {
      runs.push({
        v: 1,
        seq: 2 * i,
        ts: "2026-01-01T00:00:00.002Z",
        kind: "reload",
        anima: "eve",
        tool: `t${i}`,
        origin: "personal",
        change: "loaded",
      });
      runs.push({
        v: 1,
        seq: 2 * i + 1,
        ts: "2026-01-01T00:00:00.001Z",
        kind: "reload",
        anima: "eve",
        tool: `t${i}`,
        origin: "personal",
        change: "loaded",
      });
    }
    const merged = await runs.merged(() => new Promise<void>((resolve) => setImmediate(resolve)));
    const seqs = merged.map((record) => record.seq);
    const odd = Array.from({ length: pairs }, (_, i) => 2 * i + 1);
    const even = Array.from({ length: pairs }, (_, i) => 2 * i);
    expect(seqs).toEqual([...odd, ...even]);
  });

  it("gives the event loop a turn every few thousand lines while it reads an Anima's trail at its rotation bound", async () => {
    // eve's trail at its bound: every generation full (small files, so that the fixture is quick to write).
    const options = { maxBytes: 4 * 1024 * 1024, keepFiles: 3 };
    const log = new JsonlAuditLog(auditDir, options);
    const records = 100_000;
    for (let i = 0; i < records; i++) {
      log.append(capability("eve", i));
      if (i % 2_000 === 1_999) await log.flush();
    }
    await log.flush();
    expect(readdirSync(join(auditDir, "animas")).filter((name) => /^eve\.jsonl\.\d$/.test(name))).toHaveLength(3);

    const { result, turns } = await turnsDuring(() => log.read({ anima: "eve" }));
    const kept = result.filter((record) => record.kind === "capability").length;
    expect(kept).toBeGreaterThan(60_000);
    // At least a turn per 2,000 lines parsed. Parsed in one piece per file, the loop got a turn only
    // between files (16 here: four trails of four generations, most of them absent).
    expect(turns).toBeGreaterThanOrEqual(Math.floor(kept / 2_000) - 1);

    // A query that keeps nothing reads every line all the same: it yields as often.
    const none = await turnsDuring(() => log.read({ anima: "eve", tool: "no-such-tool" }));
    expect(none.result).toEqual([]);
    expect(none.turns).toBeGreaterThanOrEqual(Math.floor(kept / 2_000) - 1);
    await log.close();
  }, 60_000);

  it("reads what the read in one piece read, in the same order, from many trails of every kind of line", async () => {
    // Each call's records in a millisecond of their own (some split over the ordinary and security trail),
    // as are records of no call: where the one-piece sort compared consistently, its order is the order.
    vi.useFakeTimers({ toFake: ["Date"] });
    let now = Date.parse("2026-01-01T00:00:00.000Z");
    const log = await mixedTrails(() => vi.setSystemTime(now++)).finally(() => vi.useRealTimers());
    for (const query of QUERIES) expect(await log.read(query), JSON.stringify(query)).toEqual(await readInOnePiece(log, 3, query));
    expect((await log.read()).some((record) => record.unverified === true)).toBe(true);
    await log.close();
  }, 60_000);

  it("keeps a call's start, uses and end in order when many calls share a millisecond across trails", async () => {
    // Where the one-piece sort compared inconsistently (records of several calls in one millisecond, over
    // two trails), its order was an accident of how it compared: the same records here, oldest first, and
    // each call's records start, uses, end.
    const log = await mixedTrails(() => {});
    for (const query of QUERIES) {
      const read = await log.read(query);
      const before = await readInOnePiece(log, 3, query);
      const key = (record: AuditRecord) => JSON.stringify(record);
      expect(read.map(key).sort(), JSON.stringify(query)).toEqual(before.map(key).sort());
      const rank = (record: AuditRecord) => (record.kind === "call_start" ? 0 : record.kind === "call" ? 2 : 1);
      const lastRank = new Map<string, number>();
      read.forEach((record, index) => {
        if (index > 0) expect((read[index - 1] as AuditRecord).ts <= record.ts).toBe(true);
        const call = "callId" in record ? record.callId : undefined;
        if (call === undefined) return;
        expect(rank(record)).toBeGreaterThanOrEqual(lastRank.get(call) ?? 0);
        lastRank.set(call, rank(record));
      });
    }
    await log.close();
  }, 60_000);
});

const QUERIES: AuditQuery[] = [
  {},
  { anima: "eve" },
  { anima: "big" },
  { anima: "ann", outcome: "ok" },
  { kind: "capability" },
  { kind: "credential", outcome: "denied" },
  { kind: "sandbox_crash" },
  { hostWide: true },
  { kind: "trail" },
  { tool: "t1" },
  { sinceMs: Date.parse("2026-01-01T00:00:05.000Z") },
  { untilMs: Date.parse("2026-01-01T00:00:05.000Z"), anima: "bob" },
];

/**
 * Trails of three Animas (rotated), the host's and one of long records, written by two writers of the same
 * trails (another process's CLI: its batch stamped earlier is written after the first one's, so a trail is
 * not always in time order), and lines the writer never writes. `tick` is called before each call's records.
 */
async function mixedTrails(tick: () => void): Promise<JsonlAuditLog> {
  const options = { maxBytes: 64 * 1024, keepFiles: 3 };
  const log = new JsonlAuditLog(auditDir, options);
  const other = new JsonlAuditLog(auditDir, options);
  const big = new JsonlAuditLog(auditDir, { ...options, maxBytes: 8 * 1024 * 1024 });
  for (let i = 0; i < 3_000; i++) {
    const anima = ["ann", "eve", "bob"][i % 3] as string;
    const [callId, tool] = [`c${i}`, `t${i % 4}`];
    const writer = i % 7 === 0 ? other : log;
    tick();
    writer.append({ kind: "call_start", callId, anima, tool, schema: "t_x", version: "v1", pid: 4194000 });
    writer.append({ kind: "capability", callId, anima, tool, operation: "fs.readFile", target: `ノート/${i}`, outcome: i % 5 === 0 ? "denied" : "ok" });
    if (i % 11 === 0) writer.append({ kind: "credential", callId, anima, tool, name: "KEY", outcome: i % 2 === 0 ? "ok" : "denied" });
    writer.append({ kind: "call", callId, anima, tool, schema: "t_x", durationMs: 1, outcome: i % 13 === 0 ? "error" : "ok" });
    tick();
    big.append({ ...capability("big", i), target: `big/${i}`.padEnd(1_000, "x") });
    if (i % 500 === 0) {
      log.append({ kind: "reload", tool: "shared", origin: "common", change: "changed" });
      log.append({ kind: "sandbox_crash", message: `crash ${i}` });
    }
    if (i % 400 === 399) {
      await log.flush();
      await other.flush();
      await big.flush();
    }
  }
  await Promise.all([other.close(), big.close(), log.flush()]);
  const lines = [
    JSON.stringify({ ts: "2001-01-01T00:00:00.000Z", ...capability("eve", -1) }),
    '{"v":1,"seq":',
    "null",
    "42",
    "[]",
    "   ",
    `${JSON.stringify({ ts: "2001-01-01T00:00:00.001Z", ...capability("eve", -2) })}\r`,
  ];
  appendFileSync(join(auditDir, "animas", "eve.jsonl"), `${lines.join("\n")}\n`);
  const bigTrail = join(auditDir, "animas", "big.jsonl");
  appendFileSync(bigTrail, `${JSON.stringify({ ts: "2030-01-01T00:00:00.000Z", ...capability("big", -1), target: "y".repeat(1_500_000) })}\n`);
  appendFileSync(bigTrail, JSON.stringify({ ts: "2030-01-01T00:00:00.001Z", ...capability("big", -3) }));
  expect(readdirSync(join(auditDir, "animas"))).toContain("eve.jsonl.3");
  return log;
}

/** `read` as it was before it yielded (each file parsed in one piece, then one sort of all): the order it gave is the order kept. */
async function readInOnePiece(log: JsonlAuditLog, keepFiles: number, query: AuditQuery): Promise<AuditRecord[]> {
  await log.flush();
  const records: AuditRecord[] = [];
  const kindText = query.kind !== undefined ? `"kind":${JSON.stringify(query.kind)}` : undefined;
  const files = query.hostWide === true ? log.trailFiles(undefined).filter((file) => dirname(file) === log.dir) : log.trailFiles(query.anima);
  for (const file of files) {
    for (const generation of generationsOf(file, keepFiles)) {
      let text: string;
      try {
        text = readFileSync(generation, "utf8");
      } catch {
        continue;
      }
      for (const line of text.split("\n")) {
        if (line.trim() === "" || (kindText !== undefined && !line.includes(kindText))) continue;
        let record: AuditRecord;
        try {
          record = JSON.parse(line) as AuditRecord;
        } catch {
          continue;
        }
        if (typeof record !== "object" || record === null || Array.isArray(record)) continue;
        if (typeof record.seq !== "number") record.unverified = true;
        if (matches(record, query)) records.push(record);
      }
    }
  }
  const sameCall = (a: AuditRecord, b: AuditRecord) => "callId" in a && "callId" in b && a.callId !== undefined && a.callId === b.callId;
  const rank = (record: AuditRecord) => (record.kind === "call_start" ? 0 : record.kind === "call" ? 2 : 1);
  return records.sort((a, b) => (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : sameCall(a, b) ? rank(a) - rank(b) : 0));
}
