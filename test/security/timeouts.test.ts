import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Harness,
  MODES,
  assertNoLeak,
  expectError,
  expectHealthy,
  expectOk,
  expectTenantUnaffected,
  startHost,
} from "./harness.js";

/**
 * docs/design.md §9: a tool cannot run past its timeout, and tenant A's misbehaving tool does not stall
 * tenant B's calls. Every way of keeping an isolate busy (or idle forever) ends as `Timeout` close to the
 * deadline, while another Anima's calls stay fast and the attacker's own next call works.
 */
const TIMEOUT_MS = 500;
/** How far past the deadline a stopped call may return: well under the pool's 2 s kill grace. */
const LATENESS_MS = 700;

/** [fixture, schema, logs "started" once running] */
const RUNTIME_ATTACKS: Array<[string, string, boolean]> = [
  ["sync_infinite_loop", "sync_infinite_loop_run", true],
  ["microtask_loop", "microtask_loop_await", true],
  ["microtask_loop", "microtask_loop_chain", true],
  ["microtask_loop", "microtask_loop_after_return", true],
  ["loop_after_await", "loop_after_await_microtask", true],
  ["loop_after_await", "loop_after_await_timer", true],
  ["never_settles", "never_settles_run", true],
  ["timer_loop", "timer_loop_chain", true],
  ["timer_loop", "timer_loop_busy_callback", true],
  ["regex_backtracking", "regex_backtracking_run", false],
  ["throwing_getter", "throwing_getter_spins", false],
  ["proxy_result", "proxy_result_spinning_trap", false],
];

for (const mode of MODES) {
  describe(`timeouts (${mode})`, () => {
    let h: Harness;
    beforeAll(() => {
      h = startHost({ mode, timeoutMs: TIMEOUT_MS, loadTimeoutMs: 800 });
      for (const fixture of new Set(RUNTIME_ATTACKS.map(([f]) => f))) h.install("mallory", fixture);
      for (const fixture of ["top_level_loop", "schema_hang", "timer_loop"]) h.install("mallory", fixture);
    });
    afterAll(() => h.close());

    it.each(RUNTIME_ATTACKS)("%s: %s ends as Timeout; other tenants unaffected", async (_fixture, schema, logs) => {
      await expectHealthy(h, "mallory"); // so the timing below covers the attack, not the first host start
      const started = performance.now();
      const result = await expectTenantUnaffected(h, () => h.call("mallory", schema), {
        anima: "bob",
        attacker: "mallory",
        ...(logs ? { waitForLog: "started" } : {}),
      });
      const elapsedMs = performance.now() - started;
      expectError(result, "Timeout", new RegExp(`within ${TIMEOUT_MS} ms`));
      expect(elapsedMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      // The first call also loads (bundles) the tool: allow for that on top of the lateness bound.
      expect(elapsedMs).toBeLessThan(TIMEOUT_MS + LATENESS_MS + 1_000);
      if (result.status === "error") expect(result.durationMs).toBeLessThan(TIMEOUT_MS + LATENESS_MS);
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
      // The same attack a second time (tool already loaded): stopped just as promptly.
      const again = await h.call("mallory", schema);
      expectError(again, "Timeout");
      if (again.status === "error") expect(again.durationMs).toBeLessThan(TIMEOUT_MS + LATENESS_MS);
      await expectHealthy(h, "mallory");
    });

    it("timers left behind by a finished call never fire into the next call", async () => {
      const first = await h.call("mallory", "timer_loop_after_return");
      expect(expectOk(first)).toBe("returned with timers pending");
      // The same pooled isolate serves the next call; a spinning leftover timer would time it out.
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        expect(expectOk(await h.call("mallory", "timer_loop_after_return"))).toBe("returned with timers pending");
        expect(performance.now() - started).toBeLessThan(200);
      }
      await expectHealthy(h, "mallory");
    });

    it("top_level_loop: a tool that spins while loading fails as LoadError; others unaffected", async () => {
      const result = await expectTenantUnaffected(h, () => h.call("mallory", "top_level_loop_run"), { anima: "bob", attacker: "mallory" });
      expectError(result, "LoadError", /did not finish within 800 ms/);
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
      // The failure is remembered for this version of the file; it is not re-run on every call.
      const started = performance.now();
      expectError(await h.call("mallory", "top_level_loop_run"), "LoadError");
      expect(performance.now() - started).toBeLessThan(200);
    });

    it("schema_hang: get_tool_schemas() that never settles fails as LoadError; others unaffected", async () => {
      const result = await expectTenantUnaffected(h, () => h.call("mallory", "schema_hang_run"), { anima: "bob", attacker: "mallory" });
      expectError(result, "LoadError");
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
    });
  });
}
