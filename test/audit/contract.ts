import { describe, expect, it } from "vitest";
import type { AuditLog } from "../../src/audit/audit-log.js";

/** The promises every AuditLog keeps. Run against each implementation. */
export function runAuditLogContract(name: string, make: () => { log: AuditLog; cleanup?: () => void }): void {
  describe(`AuditLog contract: ${name}`, () => {
    it("returns appended records in order, each with a timestamp", async () => {
      const { log, cleanup } = make();
      log.append({ kind: "call", callId: "c1", anima: "a", tool: "t", schema: "t_x", durationMs: 1, outcome: "ok" });
      log.append({ kind: "capability", anima: "b", tool: "t", operation: "fs.readFile", target: "../x", outcome: "denied", reason: "SandboxViolation" });
      const records = await log.read();
      expect(records.map((r) => r.kind)).toEqual(["call", "capability"]);
      for (const record of records) expect(Number.isNaN(Date.parse(record.ts))).toBe(false);
      await log.close();
      cleanup?.();
    });

    it("filters by Anima and by time", async () => {
      const { log, cleanup } = make();
      log.append({ kind: "credential", anima: "a", tool: "t", name: "KEY", outcome: "ok", source: "vault.json" });
      log.append({ kind: "credential", anima: "b", tool: "t", name: "KEY", outcome: "denied" });
      expect((await log.read({ anima: "b" })).map((r) => (r as { outcome: string }).outcome)).toEqual(["denied"]);
      expect(await log.read({ sinceMs: Date.now() + 60_000 })).toEqual([]);
      expect(await log.read({ sinceMs: Date.now() - 60_000 })).toHaveLength(2);
      await log.close();
      cleanup?.();
    });

    it("filters by call id: the records of that call only", async () => {
      const { log, cleanup } = make();
      log.append({ kind: "call_start", callId: "c1", anima: "a", tool: "t", schema: "t_x", version: "", pid: 1 });
      log.append({ kind: "call_start", callId: "c2", anima: "a", tool: "t", schema: "t_x", version: "", pid: 1 });
      log.append({
        kind: "capability",
        callId: "c1",
        anima: "a",
        tool: "t",
        operation: "fs.readFile",
        target: "x",
        outcome: "denied",
        reason: "SandboxViolation",
      });
      log.append({ kind: "call", callId: "c1", anima: "a", tool: "t", schema: "t_x", durationMs: 1, outcome: "ok" });
      expect((await log.read({ callId: "c1" })).map((r) => r.kind)).toEqual(["call_start", "capability", "call"]);
      expect(await log.read({ callId: "c3" })).toEqual([]);
      await log.close();
      cleanup?.();
    });

    it("reads with a use of the records: the records read gives, and what the use returns", async () => {
      const { log, cleanup } = make();
      log.append({ kind: "credential", anima: "a", tool: "t", name: "KEY", outcome: "ok", source: "vault.json" });
      log.append({ kind: "credential", anima: "b", tool: "t", name: "KEY", outcome: "denied" });
      const read = await log.read({ anima: "a" });
      expect(await log.readWith({ anima: "a" }, async (records) => ({ records, said: "used" }))).toEqual({ records: read, said: "used" });
      await expect(log.readWith({}, async () => Promise.reject(new Error("use failed")))).rejects.toThrow("use failed");
      expect(await log.read({})).toHaveLength(2);
      await log.close();
      cleanup?.();
    });

    it("never throws from append, even after close", async () => {
      const { log, cleanup } = make();
      await log.close();
      expect(() => log.append({ kind: "sandbox_crash", message: "x" })).not.toThrow();
      cleanup?.();
    });
  });
}
