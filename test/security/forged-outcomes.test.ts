import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, MODES, expectError, expectOk, startHost } from "./harness.js";

/**
 * An outcome the host decides from what it measured (a memory limit) cannot be claimed by a tool: a real
 * host error the tool re-labels `MemoryLimit` and lets through is the tool's own error, and its isolate
 * serves the next call as any other would; nor is one re-labelled as a denial it never was the host's. A
 * real memory limit still ends as MemoryLimit. The Python twin
 * is in test/isolation/python/python-hostile.test.ts.
 */
const MEMORY_LIMIT_MB = 64;

for (const mode of MODES) {
  describe(`forged outcomes (${mode})`, () => {
    let h: Harness;
    beforeAll(() => {
      h = startHost({ mode, timeoutMs: 15_000, memoryLimitMb: MEMORY_LIMIT_MB, loadTimeoutMs: 5_000 });
      h.install("mallory", "forged_memory_limit");
      h.install("mallory", "forged_allocation_failure");
    });
    afterAll(() => h.close());

    it("forged_memory_limit: a re-labelled host error is the tool's own, and its isolate is kept", async () => {
      const result = await h.call("mallory", "forged_memory_limit_run");
      expectError(result, "ExecutionError");
      expect(result).toMatchObject({ fault: "tool" });
      expect(result.status === "error" ? result.message : "").not.toMatch(/memory limit/);
      // The same isolate serves the next call: its module state counts both.
      expect(JSON.parse(expectOk(await h.call("mallory", "forged_memory_limit_count")))).toEqual({ calls: 2 });
    });

    it("forged_host_denial: a host NotFound re-labelled SandboxViolation is framed as the NotFound it was", async () => {
      const result = await h.call("mallory", "forged_memory_limit_run", { as: "SandboxViolation" });
      // The prelude frames it by the type the host gave it, not by the one written on it: the host is
      // never even asked whether it issued a SandboxViolation.
      expect(result).toMatchObject({ status: "error", error_type: "ExecutionError", fault: "tool", message: 'fs.readFile: "no-such-file.txt" does not exist' });
    });

    it("forged_allocation_failure: the engine's allocation failure thrown by tool code inside a buffer constructor is not the memory limit", async () => {
      expect(JSON.parse(expectOk(await h.call("mallory", "forged_allocation_failure_run")))).toEqual({ caught: 6, after: 16 });
      expect(JSON.parse(expectOk(await h.call("mallory", "forged_allocation_failure_count")))).toEqual({ calls: 2 });
    });

    it("forged_memory_limit: a real memory limit still ends as MemoryLimit", async () => {
      expectError(await h.call("mallory", "forged_memory_limit_real"), "MemoryLimit", new RegExp(`memory limit of ${MEMORY_LIMIT_MB} MB`));
      // That isolate is not used again.
      expect(JSON.parse(expectOk(await h.call("mallory", "forged_memory_limit_count")))).toEqual({ calls: 1 });
    });
  });
}
