import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AFTER_ITS_STOP, type Harness, MODES, assertNoLeak, expectError, expectHealthy, expectOk, expectTenantUnaffected, startHost } from "./harness.js";

/**
 * docs/design.md §9: a tool cannot run past its timeout, and tenant A's misbehaving tool does not stall
 * tenant B's calls. Every way of keeping an isolate busy (or idle forever) ends as `Timeout`, stopped by
 * the isolate's own deadline (not by the pool killing its process), while another Anima's calls complete
 * and the attacker's own next call works. Nothing here bounds how long a call takes on a loaded machine:
 * how close to the deadline a call stops is a benchmark's figure, not a test's.
 */
const TIMEOUT_MS = 500;
/**
 * The attack that the victim's calls run beside lasts this long: long enough that they finish while it
 * still runs (the harness checks that they overlapped) even when a loaded machine slows them.
 */
const ATTACK_TIMEOUT_MS = 1_500;
/** A tool's load is stopped after this long: long enough that a remembered load failure is told from a re-run by time. */
const LOAD_TIMEOUT_MS = 3_000;
/** The isolate stopped the call at its deadline; the pool's last-resort kill says "its sandbox was restarted". */
const stoppedAt = (timeoutMs: number) => new RegExp(`did not finish within ${timeoutMs} ms and was stopped`);

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
      h = startHost({ mode, timeoutMs: TIMEOUT_MS, loadTimeoutMs: LOAD_TIMEOUT_MS });
      for (const fixture of new Set(RUNTIME_ATTACKS.map(([f]) => f))) h.install("mallory", fixture);
      for (const fixture of ["top_level_loop", "schema_hang", "timer_loop"]) h.install("mallory", fixture);
    });
    afterAll(() => h.close());

    it.each(RUNTIME_ATTACKS)("%s: %s ends as Timeout; other tenants unaffected", async (_fixture, schema, logs) => {
      await expectHealthy(h, "mallory");
      const started = performance.now();
      // Bob's calls, made while the attack runs, each complete (not stopped, not failed) before it ends.
      const result = await expectTenantUnaffected(h, () => h.call("mallory", schema, {}, { timeoutMs: ATTACK_TIMEOUT_MS }), {
        anima: "bob",
        attacker: "mallory",
        boundMs: ATTACK_TIMEOUT_MS,
        ...(logs ? { waitForLog: "started" } : {}),
      });
      expectError(result, "Timeout", stoppedAt(ATTACK_TIMEOUT_MS));
      // Not stopped early: a lower bound, which load cannot break.
      expect(performance.now() - started).toBeGreaterThanOrEqual(ATTACK_TIMEOUT_MS - 50);
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory", AFTER_ITS_STOP);
      // The same attack a second time (tool already loaded), at the host's deadline: stopped the same way.
      expectError(await h.call("mallory", schema), "Timeout", stoppedAt(TIMEOUT_MS));
      await expectHealthy(h, "mallory", AFTER_ITS_STOP);
    });

    it("timers left behind by a finished call never fire into the next call", async () => {
      const first = await h.call("mallory", "timer_loop_after_return");
      expect(expectOk(first)).toBe("returned with timers pending");
      // The same pooled isolate serves the next calls; a leftover timer (each spins forever) firing into
      // one would keep it from returning, and it would end as Timeout.
      for (let i = 0; i < 3; i++) expect(expectOk(await h.call("mallory", "timer_loop_after_return"))).toBe("returned with timers pending");
      await expectHealthy(h, "mallory");
    });

    it("top_level_loop: a tool that spins while loading fails as LoadError; others unaffected", async () => {
      const result = await expectTenantUnaffected(h, () => h.call("mallory", "top_level_loop_run"), { anima: "bob", attacker: "mallory" });
      expectError(result, "LoadError", new RegExp(`did not finish within ${LOAD_TIMEOUT_MS} ms`));
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory", AFTER_ITS_STOP);
      // The failure is remembered for this version of the file; it is not re-run on every call. A re-run
      // would spin until the load timeout again; the remembered failure is answered from memory, well
      // within it on any machine that is not hung.
      const started = performance.now();
      expectError(await h.call("mallory", "top_level_loop_run"), "LoadError", new RegExp(`did not finish within ${LOAD_TIMEOUT_MS} ms`));
      expect(performance.now() - started).toBeLessThan(LOAD_TIMEOUT_MS);
    });

    it("schema_hang: get_tool_schemas() that never settles fails as LoadError; others unaffected", async () => {
      const result = await expectTenantUnaffected(h, () => h.call("mallory", "schema_hang_run"), { anima: "bob", attacker: "mallory" });
      expectError(result, "LoadError");
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory", AFTER_ITS_STOP);
    });
  });
}
