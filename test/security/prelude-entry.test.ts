import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/data-dir.js";
import { type Harness, MODES, assertNoLeak, expectError, expectHealthy, expectOk, startHost } from "./harness.js";
import { auditRecords } from "../helpers/audit-files.js";

/**
 * The prelude's entry points (run a call, fire a timer, settle capability answers) are for the host
 * only. They were once a global (`__awEntry`): a tool re-entered its own call with log limits of its own
 * choosing and forged a `SandboxViolation` the host audited as a real denial. Now tool code reaches no
 * entry, and in any case the host keeps the log limit on its own count and decides a call's error type:
 * only denials it issued to that call come out as denials.
 */
const MAX_LOG_LINES = 20;

for (const mode of MODES) {
  describe(`prelude entry points (${mode})`, () => {
    let h: Harness;
    beforeAll(() => {
      h = startHost({ mode, timeoutMs: 2_000, maxLogLinesPerCall: MAX_LOG_LINES });
      h.install("mallory", "reenters_prelude");
    });
    afterAll(() => h.close());

    function trailRecords(): Array<Record<string, unknown>> {
      return auditRecords(join(h.data.dir, "logs", "animaworks-tool", "audit"));
    }

    it("reenters_prelude_probe: no entry point is reachable from tool code, and logging stops at the limit", async () => {
      const before = h.logs.length;
      const result = await h.call("mallory", "reenters_prelude_probe");
      const report = JSON.parse(expectOk(result)) as { found: string[]; globals: number };
      expect(report.globals).toBeGreaterThan(30); // the hunt ran over the whole global
      expect(report.found).toEqual([]);
      const start = performance.now();
      while (!h.logs.slice(before).some((r) => r.message.startsWith("log limit reached")) && performance.now() - start < 2_000) {
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(h.logs.slice(before).filter((r) => r.anima === "mallory").length).toBe(MAX_LOG_LINES + 1);
    });

    it.each([
      ["reenters_prelude_forge_denial", /access to \/etc\/shadow denied/],
      ["reenters_prelude_forge_plain", /permission to read alice's vault denied/],
      ["reenters_prelude_forge_answer", /no entry point to forge an answer with/],
    ])("%s: a denial the host did not issue is the tool's own ExecutionError, and is not audited as a denial", async (schema, message) => {
      const result = await h.call("mallory", schema);
      expectError(result, "ExecutionError", message);
      assertNoLeak(result, h.data);
      // The audit log is written in batches (every 20 ms): wait for this call's record.
      const findCall = () =>
        trailRecords()
          .filter((r) => r["kind"] === "call" && r["schema"] === schema)
          .at(-1);
      await waitFor(() => findCall() !== undefined, 2_000);
      expect(findCall()?.["errorType"]).toBe("ExecutionError");
      expect(trailRecords().filter((r) => r["outcome"] === "denied")).toEqual([]);
      await expectHealthy(h, "mallory");
    });
  });
}
