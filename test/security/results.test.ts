import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, MODES, assertNoLeak, expectError, expectHealthy, expectOk, startHost } from "./harness.js";

/**
 * Hostile return values. Results leave the isolate only as one JSON envelope built by the prelude; a
 * value JSON cannot carry, or one whose getters/traps fight back, fails as a clear `ExecutionError` (or
 * `Timeout` when it spins, see timeouts.test.ts), and patched intrinsics cannot forge the envelope.
 */
const CASES: Array<[string, "ok" | "ExecutionError", RegExp]> = [
  ["returns_function_top", "ExecutionError", /returned a function/],
  ["returns_function_nested", "ExecutionError", /"then_call_me" is a function/],
  ["returns_function_symbol", "ExecutionError", /returned a symbol/],
  ["returns_cycle_self", "ExecutionError", /contains a cycle/],
  ["returns_bigint_top", "ok", /^1267650600228229401496703205376$/],
  ["returns_bigint_nested", "ExecutionError", /"total" is a BigInt/],
  ["throwing_getter_plain", "ExecutionError", /getter refused/],
  ["throwing_getter_hostile_error", "ExecutionError", /could not be turned into JSON/],
  ["throwing_getter_to_json", "ExecutionError", /could not be turned into JSON/],
  ["proxy_result_throwing_traps", "ExecutionError", /trap refused/],
  ["proxy_result_lying_keys", "ExecutionError", /TypeError/],
  ["proxy_result_revoked", "ExecutionError", /revoked/],
  ["proxy_result_hostile_thenable", "ok", /^\{\n {2}"first": true\n\}$/],
];

for (const mode of MODES) {
  describe(`hostile results (${mode})`, () => {
    let h: Harness;
    beforeAll(() => {
      h = startHost({ mode, timeoutMs: 1_000 });
      for (const fixture of ["returns_function", "returns_cycle", "returns_bigint", "throwing_getter", "proxy_result", "patches_intrinsics"]) {
        h.install("mallory", fixture);
      }
      h.install("bob", "patches_intrinsics");
    });
    afterAll(() => h.close());

    it.each(CASES)("%s → %s", async (schema, expected, pattern) => {
      const result = await h.call("mallory", schema);
      if (expected === "ok") expect(expectOk(result)).toMatch(pattern);
      else expectError(result, expected, pattern);
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
    });

    it("patches_intrinsics: patched JSON/Promise/Array/Reflect/Function cannot change how the result is framed", async () => {
      const result = await h.call("mallory", "patches_intrinsics_run");
      expect(expectOk(result)).toBe(JSON.stringify({ items: [1, 2, 3], nested: { ok: "yes" } }, null, 2));
      expect(h.logs.filter((r) => r.anima === "mallory" && r.message.startsWith("patched")).map((r) => r.message)).toContain('patched {"a":1}');
      // The isolate keeps its patches (module state lives per Anima and tool) and still frames correctly.
      expect(JSON.parse(expectOk(await h.call("mallory", "patches_intrinsics_check")))).toEqual({ stillPatched: true });
      // ...but no other Anima's isolate, even for the same tool, and no other tool of this Anima, sees them.
      expect(JSON.parse(expectOk(await h.call("bob", "patches_intrinsics_check")))).toEqual({ stillPatched: false });
      await expectHealthy(h, "mallory");
    });

    it("patches_intrinsics: Promise species and Object.prototype.toJSON cannot forge the envelope", async () => {
      const result = await h.call("mallory", "patches_intrinsics_forge");
      const output = expectOk(result);
      expect(output).not.toBe("FORGED");
      // The tool's own objects now serialise through its toJSON: that is its output to choose.
      expect(output).toBe('"FORGED"');
      expect(result.status === "ok" && result.truncated).toBe(false);
      // Everything this isolate returns now goes through the tool's toJSON; other tools are untouched.
      expect(expectOk(await h.call("mallory", "patches_intrinsics_check"))).toBe('"FORGED"');
      expect(await expectHealthy(h, "mallory")).toBeGreaterThan(1);
    });
  });
}
