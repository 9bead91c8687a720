import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { type AuditEvent, type AuditRecord, isoTimestamp, truncateForAudit } from "../../src/audit/audit-log.js";
import { MemoryAuditLog } from "../../src/audit/memory-audit-log.js";
import { ExportingAuditLog } from "../../src/audit/otel-export.js";
import { RedactingAuditLog } from "../../src/audit/redacting-audit-log.js";
import { verifyAuditDir } from "../../src/audit/verify.js";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { runAuditLogContract } from "./contract.js";

runAuditLogContract("memory", () => ({ log: new MemoryAuditLog() }));
runAuditLogContract("redacting, around memory", () => ({ log: new RedactingAuditLog(new MemoryAuditLog(), () => ["a-secret-value"]) }));
// The memory log never reports records as written, so the copy sends nothing: this holds the forwarding only.
runAuditLogContract("exporting, around memory", () => ({
  log: new ExportingAuditLog(() => new MemoryAuditLog(), { endpoint: "http://127.0.0.1:9/v1/logs", onLog: () => {}, closeTimeoutMs: 100 }),
}));
runAuditLogContract("jsonl trails", () => {
  const dir = mkdtempSync(join(tmpdir(), "awt-audit-"));
  return { log: new JsonlAuditLog(join(dir, "audit")), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
});

function tempDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "awt-audit-"));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const call = (anima: string, i: number): AuditEvent => ({ kind: "call", callId: `c${i}`, anima, tool: "t", schema: `t_${i}`, durationMs: i, outcome: "ok" });

describe("JsonlAuditLog", () => {
  it("keeps a pair of trails per Anima, each record one chained JSON line, mode 0600, bounded by rotation", async () => {
    const { dir, cleanup } = tempDir();
    const log = new JsonlAuditLog(join(dir, "audit"), { maxBytes: 2_000, keepFiles: 2 });
    for (let i = 0; i < 200; i++) {
      log.append(call("a", i));
      if (i % 10 === 0) await log.flush();
    }
    log.append({ kind: "capability", anima: "a", tool: "t", operation: "fs.readFile", target: "../x", outcome: "denied", reason: "SandboxViolation" });
    await log.flush();
    const files = readdirSync(join(dir, "audit", "animas")).sort();
    expect(files).toContain("a.jsonl.2");
    expect(files).toContain("a.security.jsonl");
    expect(files.every((name) => /^a(\.security)?\.jsonl(\.[12]|\.head)?$/.test(name))).toBe(true);
    let lastSeq = 0;
    for (const name of ["a.jsonl.2", "a.jsonl.1", "a.jsonl"]) {
      const path = join(dir, "audit", "animas", name);
      expect(statSync(path).size).toBeLessThan(4_000);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      for (const line of readFileSync(path, "utf8").trim().split("\n")) {
        const record = JSON.parse(line) as AuditRecord;
        expect(record).toMatchObject({ v: 1, kind: "call" });
        if (lastSeq > 0) expect(record.seq).toBe(lastSeq + 1);
        lastSeq = record.seq!;
      }
    }
    // The denial is in the security trail, which the flood of calls did not rotate.
    const records = await log.read({ anima: "a" });
    expect(records.at(-1)).toMatchObject({ kind: "capability", outcome: "denied" });
    expect(records.filter((r) => r.kind === "call").at(-1)).toMatchObject({ schema: "t_199" });
    expect(await log.coverage("a")).toMatchObject({ rotatedAway: true });
    expect(verifyAuditDir(join(dir, "audit"), 2)).toMatchObject({ ok: true });
    await log.close();
    cleanup();
  });

  it("one Anima's flood never rotates away another Anima's records", async () => {
    const { dir, cleanup } = tempDir();
    const log = new JsonlAuditLog(join(dir, "audit"), { maxBytes: 2_000, keepFiles: 1 });
    log.append(call("alice", 0));
    for (let i = 0; i < 500; i++) {
      log.append(call("mallory", i));
      if (i % 50 === 0) await log.flush();
    }
    await log.flush();
    expect((await log.read({ anima: "alice" })).map((r) => r.kind)).toEqual(["call"]);
    expect(await log.coverage("alice")).toMatchObject({ rotatedAway: false });
    expect(await log.coverage("mallory")).toMatchObject({ rotatedAway: true });
    await log.close();
    cleanup();
  });

  it("records of a name that is no Anima go to the host trail: a caller makes no files for made-up Animas", async () => {
    const { dir, cleanup } = tempDir();
    const log = new JsonlAuditLog(join(dir, "audit"), { isAnima: (name) => name === "alice" });
    log.append(call("alice", 1));
    for (let i = 0; i < 20; i++) log.append(call(`ghost${i}`, i));
    await log.flush();
    expect(readdirSync(join(dir, "audit", "animas")).filter((name) => name.endsWith(".jsonl"))).toEqual(["alice.jsonl"]);
    expect(await log.read({ anima: "ghost3" })).toHaveLength(1);
    await log.close();
    cleanup();
  });

  it("two writers on one trail keep one chain: every line whole, seq 1…n, verify passes", async () => {
    const { dir, cleanup } = tempDir();
    const a = new JsonlAuditLog(join(dir, "audit"));
    const b = new JsonlAuditLog(join(dir, "audit"));
    for (let i = 0; i < 500; i++) {
      a.append({ kind: "load_error", anima: "x", tool: "a", origin: "personal", message: "x".repeat(300) });
      b.append({ kind: "load_error", anima: "x", tool: "b", origin: "personal", message: "y".repeat(300) });
      if (i % 100 === 0) await Promise.all([a.flush(), b.flush()]);
    }
    await Promise.all([a.flush(), b.flush()]);
    const lines = readFileSync(join(dir, "audit", "animas", "x.jsonl"), "utf8")
      .trim()
      .split("\n");
    expect(lines).toHaveLength(1000);
    expect(lines.map((line) => (JSON.parse(line) as AuditRecord).seq)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
    expect(verifyAuditDir(join(dir, "audit"))).toMatchObject({ ok: true });
    await a.close();
    await b.close();
    cleanup();
  });

  it("a trail it cannot write keeps its records (bounded), counts what it drops, and says so once written", async () => {
    const { dir, cleanup } = tempDir();
    const failures: string[] = [];
    writeFileSync(join(dir, "audit"), "a file where the folder should be");
    const log = new JsonlAuditLog(join(dir, "audit"), { maxBufferedRecords: 10, onWriteError: (_error, file) => failures.push(file) });
    for (let i = 0; i < 25; i++) log.append(call("a", i));
    await log.flush();
    expect(failures).toHaveLength(1);
    rmSync(join(dir, "audit"));
    await log.flush();
    const records = await log.read({ anima: "a" });
    expect(records.map((r) => r.kind)).toEqual([...Array<string>(10).fill("call")]);
    expect(await log.read({ kind: "audit_gap" })).toMatchObject([{ kind: "audit_gap", lost: 15 }]);
    await log.close();
    cleanup();
  });
});

describe("truncateForAudit", () => {
  it("cuts long arguments and escapes control characters so a record stays one line", () => {
    expect(truncateForAudit("a".repeat(300))).toMatch(/^a{256}…\[44 more\]$/);
    expect(truncateForAudit("x\ny\0")).toBe("x\\u000ay\\u0000");
    expect(truncateForAudit("\u007f\u001f plain")).toBe("\\u007f\\u001f plain");
    expect(truncateForAudit("no control characters")).toBe("no control characters");
  });
});

describe("isoTimestamp", () => {
  it("stamps records exactly as Date#toISOString would", () => {
    for (const ms of [0, 1, 999, 86_399_999, 951_782_400_000, 1_764_716_400_123, Date.now()]) {
      expect(isoTimestamp(new Date(ms))).toBe(new Date(ms).toISOString());
    }
  });

  it("stamps the current time, kept for its millisecond only", () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      for (const ms of [1_764_716_400_123, 1_764_716_400_123, 1_764_716_400_124, 951_782_400_000, 1_764_716_400_124]) {
        vi.setSystemTime(ms);
        expect(isoTimestamp()).toBe(new Date(ms).toISOString());
      }
    } finally {
      vi.useRealTimers();
    }
  });
});
