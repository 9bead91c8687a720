import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, MODES, assertNoLeak, expectError, expectHealthy, expectOk, startHost } from "./harness.js";

/**
 * Floods of host resources: log lines and timers. Both are bounded inside the isolate per call, so a
 * tool cannot flood the host's event loop, its log sink or its timer list, and nothing it armed
 * outlives its call.
 */
const MAX_LOG_LINES = 50;
const MAX_LOG_CHARS = 200;

/** Host timers alive in this process (in-process mode runs the isolates here, so its timers are ours). */
function hostTimers(): number {
  return process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;
}

for (const mode of MODES) {
  describe(`floods (${mode})`, () => {
    let h: Harness;
    beforeAll(() => {
      h = startHost({ mode, timeoutMs: 3_000, maxLogLinesPerCall: MAX_LOG_LINES, maxLogLineChars: MAX_LOG_CHARS });
      h.install("mallory", "log_flood");
      h.install("mallory", "timer_flood");
    });
    afterAll(() => h.close());

    async function linesOf(schema: string): Promise<string[]> {
      const before = h.logs.length;
      const result = await h.call("mallory", schema);
      expect(expectOk(result)).toBe("flooded");
      assertNoLeak(result, h.data);
      // Log lines travel separately from the result (over IPC in process mode): wait for the notice
      // that ends the flood rather than sleeping.
      const deadline = performance.now() + 2_000;
      while (!h.logs.slice(before).some((r) => r.message.startsWith("log limit reached")) && performance.now() < deadline) {
        await new Promise((resolve) => setImmediate(resolve));
      }
      return h.logs
        .slice(before)
        .filter((r) => r.anima === "mallory")
        .map((r) => r.message);
    }

    it.each(["log_flood_lines", "log_flood_huge", "log_flood_console"])("%s: at most maxLogLinesPerCall lines of at most maxLogLineChars", async (schema) => {
      const lines = await linesOf(schema);
      expect(lines.length).toBe(MAX_LOG_LINES + 1);
      expect(lines.at(-1)).toMatch(/^log limit reached/);
      for (const line of lines) expect(line.length).toBeLessThanOrEqual(MAX_LOG_CHARS + 10);
      await expectHealthy(h, "mallory");
    });

    it("log lines of one call never spill into the next", async () => {
      expect(expectOk(await h.call("mallory", "log_flood_after_return"))).toBe("returned");
      const before = h.logs.length;
      // The same isolate serves this call while the earlier call's timers would have fired.
      expect(expectOk(await h.call("mallory", "log_flood_quiet"))).toBe("quiet");
      await expectHealthy(h, "mallory");
      expect(h.logs.slice(before).filter((r) => r.anima === "mallory")).toEqual([]);
    });

    it("timer_flood_many: arming beyond the pending-timer limit fails the call", async () => {
      const result = await h.call("mallory", "timer_flood_many");
      expectError(result, "ExecutionError", /too many pending timers \(limit 1000\)/);
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
    });

    it("timer_flood_left_behind: timers armed by a finished call are released, in the sandbox and on the host", async () => {
      const baseline = hostTimers();
      for (let i = 0; i < 3; i++) {
        // The same pooled isolate runs each call: the limit applies per call, not per isolate lifetime.
        expect(JSON.parse(expectOk(await h.call("mallory", "timer_flood_left_behind")))).toEqual({ armed: 1000 });
      }
      if (mode === "in-process") expect(hostTimers()).toBeLessThanOrEqual(baseline + 2);
      await expectHealthy(h, "mallory");
    });

    it("timer_flood_odd_delays: NaN, negative, huge and non-number delays behave like Node's setTimeout", async () => {
      // Node: a delay that is not a number in [1, 2^31-1] becomes 1 ms; "10" is coerced to 10 ms.
      expect(JSON.parse(expectOk(await h.call("mallory", "timer_flood_odd_delays")))).toEqual({ fired: 6 });
    });
  });
}
