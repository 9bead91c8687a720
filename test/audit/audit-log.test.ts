import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MemoryAuditLog, isoTimestamp, truncateForAudit } from "../../src/audit/audit-log.js";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { runAuditLogContract } from "./contract.js";

runAuditLogContract("memory", () => ({ log: new MemoryAuditLog() }));
runAuditLogContract("jsonl file", () => {
  const dir = mkdtempSync(join(tmpdir(), "awt-audit-"));
  return { log: new JsonlAuditLog(join(dir, "audit.jsonl")), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
});

describe("JsonlAuditLog", () => {
  it("writes one JSON object per line, mode 0600, and stays bounded by rotation", async () => {
    const dir = mkdtempSync(join(tmpdir(), "awt-audit-"));
    const log = new JsonlAuditLog(join(dir, "logs", "audit.jsonl"), { maxBytes: 2_000, keepFiles: 2 });
    for (let i = 0; i < 200; i++) {
      log.append({ kind: "call", anima: "a", tool: "t", schema: `t_${i}`, durationMs: i, outcome: "ok" });
      if (i % 10 === 0) await log.flush();
    }
    await log.flush();
    const files = readdirSync(join(dir, "logs")).sort();
    // rotated at least twice, never more than keepFiles old generations
    expect(files).toContain("audit.jsonl.2");
    expect(files.every((name) => /^audit\.jsonl(\.[12])?$/.test(name))).toBe(true);
    for (const name of files) {
      expect(statSync(join(dir, "logs", name)).size).toBeLessThan(4_000);
      expect(statSync(join(dir, "logs", name)).mode & 0o777).toBe(0o600);
      for (const line of readFileSync(join(dir, "logs", name), "utf8")
        .trim()
        .split("\n"))
        expect(JSON.parse(line).kind).toBe("call");
    }
    const records = await log.read();
    expect(records.at(-1)).toMatchObject({ schema: "t_199" });
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("two writers on one file never interleave inside a line", async () => {
    const dir = mkdtempSync(join(tmpdir(), "awt-audit-"));
    const file = join(dir, "audit.jsonl");
    const a = new JsonlAuditLog(file);
    const b = new JsonlAuditLog(file);
    for (let i = 0; i < 500; i++) {
      a.append({ kind: "load_error", tool: "a", origin: "personal", message: "x".repeat(300) });
      b.append({ kind: "load_error", tool: "b", origin: "personal", message: "y".repeat(300) });
    }
    await Promise.all([a.flush(), b.flush()]);
    const lines = readFileSync(file, "utf8").trim().split("\n");
    expect(lines).toHaveLength(1000);
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
    await a.close();
    await b.close();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe("truncateForAudit", () => {
  it("cuts long arguments and escapes control characters so a record stays one line", () => {
    expect(truncateForAudit("a".repeat(300))).toMatch(/^a{256}…\[44 more\]$/);
    expect(truncateForAudit("x\ny\0")).toBe("x\\u000ay\\u0000");
  });
});

describe("isoTimestamp", () => {
  it("stamps records exactly as Date#toISOString would", () => {
    for (const ms of [0, 1, 999, 86_399_999, 951_782_400_000, 1_764_716_400_123, Date.now()]) {
      expect(isoTimestamp(new Date(ms))).toBe(new Date(ms).toISOString());
    }
  });
});
