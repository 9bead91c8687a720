import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AFTER_ITS_STOP, expectError, expectHealthy, MODES, startHost, type Harness } from "./harness.js";

/**
 * Pooling must never carry state where it should not: a healthy isolate is reused for the same Anima
 * and tool (its module-level counter keeps counting), never shared across Animas, and an isolate that
 * timed out or hit its memory limit is disposed (the counter starts again at 1).
 */

for (const mode of MODES) {
  describe(`isolate reuse (${mode})`, () => {
    let h: Harness;
    beforeAll(() => {
      h = startHost({ mode, timeoutMs: 400, memoryLimitMb: 32, animas: ["mallory", "bob", "carol"] });
    });
    afterAll(() => h.close());

    it("a healthy isolate is reused for the same Anima and tool, and never shared across Animas", async () => {
      expect(await expectHealthy(h, "carol")).toBe(1);
      expect(await expectHealthy(h, "carol")).toBe(2);
      expect(await expectHealthy(h, "carol")).toBe(3);
      // Same tool file content, different Anima: its own isolate, its own counter.
      expect(await expectHealthy(h, "bob")).toBe(1);
      expect(await expectHealthy(h, "carol")).toBe(4);
      expect(await expectHealthy(h, "bob")).toBe(2);
    });

    it("an isolate that timed out is disposed and never reused; other Animas' isolates live on", async () => {
      expect(await expectHealthy(h, "mallory")).toBe(1);
      expect(await expectHealthy(h, "mallory")).toBe(2);
      const bobBefore = await expectHealthy(h, "bob");
      expectError(await h.call("mallory", "counter_hang"), "Timeout");
      expect(await expectHealthy(h, "mallory", AFTER_ITS_STOP)).toBe(1);
      expect(await expectHealthy(h, "mallory", AFTER_ITS_STOP)).toBe(2);
      expect(await expectHealthy(h, "bob")).toBe(bobBefore + 1);
    });

    it("an isolate that hit its memory limit is disposed and never reused", async () => {
      await expectHealthy(h, "mallory");
      const before = await expectHealthy(h, "mallory");
      expect(before).toBeGreaterThan(1);
      // A generous timeout: filling 32 MB must meet the memory limit first, even on a busy machine.
      expectError(await h.call("mallory", "counter_bloat", {}, { timeoutMs: 5_000 }), "MemoryLimit");
      expect(await expectHealthy(h, "mallory", AFTER_ITS_STOP)).toBe(1);
    });

    it("concurrent calls for one Anima and tool each get their own isolate", async () => {
      // A waiting call, not a spinning one: a spinning call would (rightly) send carol's next calls to the
      // low-priority process, away from the isolate this test watches.
      const results = await Promise.all([h.call("carol", "counter_wait"), h.call("carol", "counter_count")]);
      expectError(results[0], "Timeout");
      const served = (JSON.parse(results[1].status === "ok" ? results[1].output : "{}") as { calls: number }).calls;
      expect(served).toBeGreaterThanOrEqual(1);
      // The isolate that served the count lives on (its counter continues); the one that hung is gone.
      expect(await expectHealthy(h, "carol")).toBe(served + 1);
      expect(await expectHealthy(h, "carol")).toBe(served + 2);
    });
  });
}
