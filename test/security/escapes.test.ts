import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, MODES, assertNoLeak, expectError, expectHealthy, expectOk, startHost } from "./harness.js";

/**
 * docs/design.md §9: a tool cannot reach the host realm (`process`, `require`, host objects or references).
 * Each fixture hunts for the host from inside the isolate and reports what it reached; the report must
 * show the hunt ran (so the test can fail) and found nothing.
 */
for (const mode of MODES) {
  describe(`escapes (${mode})`, () => {
    let h: Harness;
    beforeAll(() => {
      h = startHost({ mode, timeoutMs: 1_000 });
      for (const fixture of [
        "escape_via_constructor",
        "escape_via_error_stack",
        "wasm_memory",
        "shared_array_buffer",
        "weakref_finalizer",
        "throws_with_host_path",
        "resizable_buffer",
      ]) {
        h.install("mallory", fixture);
      }
    });
    afterAll(() => h.close());

    it("escape_via_constructor: constructor chains reach only this isolate's own global", async () => {
      const result = await h.call("mallory", "escape_via_constructor_probe");
      const report = JSON.parse(expectOk(result)) as Record<string, unknown>;
      expect(report).toEqual({ found: {}, unexpected: [], symbols: [], oddTags: [], checked: 17, callersSeen: 3 });
      assertNoLeak(result, h.data);
    });

    it("escape_via_constructor: this.constructor.constructor('return process')() is a ReferenceError", async () => {
      const result = await h.call("mallory", "escape_via_constructor_direct");
      expectError(result, "ExecutionError", /^ReferenceError: process is not defined \(in escape_via_constructor\.ts:\d+:\d+\)$/);
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
    });

    it("escape_via_error_stack: call sites expose no host frame, function or receiver", async () => {
      const result = await h.call("mallory", "escape_via_error_stack_probe");
      const report = JSON.parse(expectOk(result)) as { frames: number; files: string[]; leaks: string[]; hostText: string[] };
      expect(report.frames).toBeGreaterThan(8); // the traps ran in every place
      expect(report.leaks).toEqual([]);
      expect(report.hostText).toEqual([]);
      for (const file of report.files) expect(file).toMatch(/^(tool:personal\/escape_via_error_stack\.ts|animaworks:prelude\.js|)$/);
      assertNoLeak(result, h.data);
    });

    it("escape_via_error_stack: a stack formatter that never returns does not hang the call", async () => {
      const result = await h.call("mallory", "escape_via_error_stack_hang");
      // The tool's own error, not the call's Timeout (1 s): the formatter was never waited on.
      expectError(result, "ExecutionError", /formatting my stack never ends/);
      await expectHealthy(h, "mallory");
    });

    it("wasm_memory: WebAssembly is not reachable", async () => {
      expect(JSON.parse(expectOk(await h.call("mallory", "wasm_memory_probe")))).toEqual({
        global: "undefined",
        viaFunction: "undefined",
        inGlobalNames: false,
      });
      const result = await h.call("mallory", "wasm_memory_grow");
      expectError(result, "ExecutionError", /^TypeError: Cannot read properties of undefined \(reading 'Memory'\) \(in wasm_memory\.ts:\d+:\d+\)$/);
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
    });

    it("shared_array_buffer: SharedArrayBuffer and Atomics are not reachable", async () => {
      expect(JSON.parse(expectOk(await h.call("mallory", "shared_array_buffer_probe")))).toEqual({
        SharedArrayBuffer: "undefined",
        Atomics: "undefined",
        viaWasm: "unavailable",
      });
      const result = await h.call("mallory", "shared_array_buffer_wait");
      expectError(result, "ExecutionError", /^TypeError: .*not a constructor \(in shared_array_buffer\.ts:\d+:\d+\)$/);
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
    });

    it("weakref_finalizer: WeakRef and FinalizationRegistry are not reachable", async () => {
      expect(JSON.parse(expectOk(await h.call("mallory", "weakref_finalizer_probe")))).toEqual({ WeakRef: "undefined", FinalizationRegistry: "undefined" });
      const result = await h.call("mallory", "weakref_finalizer_register");
      expectError(result, "ExecutionError", /not a constructor/);
      await expectHealthy(h, "mallory");
    });

    it("resizable_buffer: resizable ArrayBuffers (memory outside the isolate's limit) are refused", async () => {
      expect(JSON.parse(expectOk(await h.call("mallory", "resizable_buffer_probe")))).toEqual({
        resizable: false,
        hasResize: false,
        viaConstructor: "refused",
      });
      const result = await h.call("mallory", "resizable_buffer_grow");
      expectError(result, "ExecutionError", /resizable ArrayBuffers are not available/);
      await expectHealthy(h, "mallory");
    });

    it("throws_with_host_path: forged stack frames are stripped from error messages", async () => {
      const result = await h.call("mallory", "throws_with_host_path_forged_frames");
      expectError(result, "ExecutionError");
      if (result.status === "error") expect(result.message).toBe("disk full");
      assertNoLeak(result, h.data);
    });

    it("throws_with_host_path: a thrown plain object is described without its fake stack", async () => {
      const result = await h.call("mallory", "throws_with_host_path_non_error");
      expectError(result, "ExecutionError", /non-Error value/);
      assertNoLeak(result, h.data);
    });

    it("throws_with_host_path: logging hostile values never throws host errors into the tool", async () => {
      const result = await h.call("mallory", "throws_with_host_path_log_bridge");
      expect(JSON.parse(expectOk(result))).toEqual({ thrown: [] });
      const lines = h.logs.filter((r) => r.anima === "mallory" && r.message.startsWith("hostile"));
      expect(lines.map((r) => r.message)).toEqual([
        expect.stringMatching(/^hostile x+… \[cut\]$/),
        "hostile Symbol(s)",
        "hostile 10",
        "hostile [unprintable value]",
      ]);
      await expectHealthy(h, "mallory");
    });
  });

  describe(`host callbacks that fail (${mode})`, () => {
    let h: Harness;
    beforeAll(() => {
      // An operator's log sink that throws (a closed stream, a full disk): the error carries host paths
      // and host stack frames, and must neither reach the tool nor crash the host.
      h = startHost({ mode, timeoutMs: 1_000, throwFromLogSink: "hostile" });
      h.install("mallory", "throws_with_host_path");
    });
    afterAll(() => h.close());

    it("a throwing onLog never surfaces inside the sandbox", async () => {
      const result = await h.call("mallory", "throws_with_host_path_log_bridge");
      expect(JSON.parse(expectOk(result))).toEqual({ thrown: [] });
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
      await expectHealthy(h, "bob");
    });
  });
}
