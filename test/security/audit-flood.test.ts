import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { terminalSafe } from "../../src/cli/output.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { auditText } from "../helpers/audit-files.js";

/**
 * Attack: hide one's tracks by flooding the audit trail. A tool whose module failed to load with an
 * 11 MB message made 11.5 MB records, and three such loads rotated every earlier record, its own 40
 * denials included, out of the trail; its ESC sequences reached the operator's terminal.
 */
describe("the audit trail survives a noisy tool", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it("records are bounded, and denials outlive any flood of other records", async () => {
    data = makeDataDir();
    const auditDir = join(data.dir, "logs", "audit");
    const audit = new JsonlAuditLog(auditDir, { maxBytes: 64 * 1024, keepFiles: 3 });
    for (let i = 0; i < 40; i++) {
      audit.append({
        kind: "capability",
        anima: "eve",
        tool: "t",
        operation: "fs.readFile",
        target: `../eve2/secret-${i}`,
        outcome: "denied",
        reason: "SandboxViolation: outside",
      });
    }
    const huge = `\u001b]0;owned\u0007${"E".repeat(11 * 1024 * 1024)}`;
    for (let i = 0; i < 3; i++) audit.append({ kind: "load_error", anima: "eve", tool: "noisy", origin: "personal", message: huge });
    for (let i = 0; i < 20_000; i++) audit.append({ kind: "call", callId: "c1", anima: "eve", tool: "t", schema: "t_run", durationMs: 1, outcome: "ok" });
    await audit.flush();

    const records = await audit.read({ anima: "eve" });
    const denials = records.filter((r) => "outcome" in r && r.outcome === "denied");
    expect(denials.map((r) => (r as { target: string }).target)).toEqual(Array.from({ length: 40 }, (_, i) => `../eve2/secret-${i}`));
    // The main files rotated many times over; every line written is small, and holds no raw control character.
    for (const line of auditText(auditDir).split("\n")) {
      expect(line.length).toBeLessThan(4_096);
      expect(line).not.toMatch(/[\u0000-\u001f]/);
    }
    await audit.close();
  });

  it("terminal text escapes control characters and bidirectional overrides, keeping newlines and tabs", () => {
    expect(terminalSafe("a\u001b[2Jb\u009bc\u202ed\ne\tf")).toBe("a\\u001b[2Jb\\u009bc\\u202ed\ne\tf");
  });
});
