import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, MODES, assertNoLeak, expectError, expectHealthy, expectOk, expectTenantUnaffected, isHeapLimitReport, startHost } from "./harness.js";

/**
 * docs/design.md §9: a tool cannot exhaust host memory. Heap and ArrayBuffer bombs end as `MemoryLimit`
 * (never a crashed host, never an error the tool can swallow and keep allocating after), the host keeps
 * serving, and another Anima's calls made while a bomb grows stay fast. Huge results are cut, never
 * rejected or copied whole.
 */
const MEMORY_LIMIT_MB = 32;
/**
 * Long enough that every bomb meets the memory limit first, and deep_recursion its stack overflow, on a
 * machine other work keeps busy (beside two spinning processes on two cores it took over 4 s of wall
 * time): a bound for a hang, not a figure.
 */
const TIMEOUT_MS = 15_000;

const BOMBS: Array<[string, string]> = [
  ["heap_bomb", "heap_bomb_objects"],
  ["heap_bomb", "heap_bomb_strings"],
  ["heap_bomb", "heap_bomb_map"],
  ["heap_bomb", "heap_bomb_osr_arrays"],
  ["array_buffer_bomb", "array_buffer_bomb_huge"],
  ["array_buffer_bomb", "array_buffer_bomb_many"],
  ["array_buffer_bomb", "array_buffer_bomb_caught"],
];

/** Bombs that grow slowly (yielding between steps), so another tenant's calls can be measured meanwhile. */
const SLOW_BOMBS: Array<[string, string]> = [
  ["heap_bomb", "heap_bomb_slow"],
  ["array_buffer_bomb", "array_buffer_bomb_slow"],
];

for (const mode of MODES) {
  describe(`memory (${mode})`, () => {
    let h: Harness;
    beforeAll(() => {
      h = startHost({ mode, timeoutMs: TIMEOUT_MS, memoryLimitMb: MEMORY_LIMIT_MB, loadTimeoutMs: 2_000 });
      for (const fixture of [
        "heap_bomb",
        "array_buffer_bomb",
        "string_bomb_result",
        "top_level_heap_bomb",
        "deep_recursion",
        "returns_cycle",
        "json_indent_bomb",
        "intl_hoard",
        "guarded_builtins_behave",
      ]) {
        h.install("mallory", fixture);
      }
    });
    afterAll(() => h.close());

    it.each(BOMBS)("%s: %s ends as MemoryLimit", async (_fixture, schema) => {
      const result = await h.call("mallory", schema);
      expectError(result, "MemoryLimit", new RegExp(`memory limit of ${MEMORY_LIMIT_MB} MB`));
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
      await expectHealthy(h, "bob");
    });

    it.each(SLOW_BOMBS)("%s: %s ends as MemoryLimit; other tenants unaffected meanwhile", async (_fixture, schema) => {
      const result = await expectTenantUnaffected(h, () => h.call("mallory", schema), {
        anima: "bob",
        attacker: "mallory",
        waitForLog: "started",
        calls: 5,
      });
      expectError(result, "MemoryLimit");
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
    });

    it("top_level_heap_bomb: a tool that exhausts memory while loading fails as LoadError", async () => {
      const result = await h.call("mallory", "top_level_heap_bomb_run");
      expectError(result, "LoadError", /memory limit/);
      assertNoLeak(result, h.data);
      await expectHealthy(h, "mallory");
    });

    it("deep_recursion: stack overflow is an ExecutionError, also in the host's serialiser, driven deeper and deeper", async () => {
      const overflow = await h.call("mallory", "deep_recursion_call");
      expectError(
        overflow,
        "ExecutionError",
        /^RangeError: Maximum call stack size exceeded \(in deep_recursion\.ts:\d+:\d+(?:, called from deep_recursion\.ts:\d+:\d+)*\)$/,
      );
      assertNoLeak(overflow, h.data);
      // The result is framed as indented JSON (json-guard.ts): V8 14 would indent ever deeper outside
      // the memory limit until the timeout; compact JSON first overflows the stack.
      for (const schema of ["deep_recursion_to_json", "returns_cycle_deep"]) {
        const result = await h.call("mallory", schema);
        expectError(result, "ExecutionError", /could not be turned into JSON: RangeError: Maximum call stack size exceeded/);
        assertNoLeak(result, h.data);
      }
      await expectHealthy(h, "mallory");
    });

    it.each([
      ["json_indent_bomb_to_json", /^RangeError: Maximum call stack size exceeded \(in json_indent_bomb\.ts:\d+:\d+\)$/],
      ["json_indent_bomb_deep", /^RangeError: Invalid string length: indented JSON longer than/],
      ["json_indent_bomb_result", /could not be turned into JSON: RangeError: Invalid string length: indented JSON longer than/],
    ])(
      "json_indent_bomb: %s ends at once as an ExecutionError (indented JSON bounded), not at the timeout outside the memory limit",
      async (schema, message) => {
        const result = await h.call("mallory", schema);
        expectError(result, "ExecutionError", message);
        assertNoLeak(result, h.data);
        await expectHealthy(h, "mallory");
        await expectHealthy(h, "bob");
      },
    );

    it("json_indent_bomb_plain: indented JSON is the text V8 makes", async () => {
      const texts = JSON.parse(expectOk(await h.call("mallory", "json_indent_bomb_plain"))) as string[];
      const value = { a: [1, { b: 'x"y\\z', c: [] }, {}], "d:e": null, f: { g: [true, -0, 1e21] }, h: { toJSON: () => "later" } };
      expect(texts).toEqual([
        JSON.stringify(value, null, 2),
        JSON.stringify(value, null, "\t-"),
        JSON.stringify(value, ["a", "f", "g"], 3),
        JSON.stringify(value, (k, v: unknown) => (k === "b" ? undefined : v), 20),
      ]);
    });

    it.each(["intl_hoard_run", "intl_hoard_segments"])("%s: Intl objects (memory outside the heap limit) are budgeted per isolate", async (schema) => {
      const result = await h.call("mallory", schema);
      expectError(result, "ExecutionError", /too many Intl objects in this sandbox \(limit 500\)/);
      assertNoLeak(result, h.data);
      // The isolate that used its budget is retired: the tool's module state starts afresh.
      expect(JSON.parse(expectOk(await h.call("mallory", "intl_hoard_some")))).toEqual({ calls: 1, held: 100 });
    });

    it("intl_hoard: hoarding across calls retires the isolate instead of failing forever", async () => {
      let previous = 0;
      let restarts = 0;
      for (let i = 0; i < 12; i++) {
        const { calls } = JSON.parse(expectOk(await h.call("mallory", "intl_hoard_some"))) as { calls: number };
        if (calls <= previous) restarts++;
        previous = calls;
      }
      expect(restarts).toBeGreaterThanOrEqual(2); // 100 per call, 500 per isolate
    });

    it.each(["string_bomb_result_too_big", "string_bomb_result_split_object", "string_bomb_result_split_this"])(
      "%s: a split V8 would abort the process on is refused with a RangeError",
      async (schema) => {
        const result = await h.call("mallory", schema);
        expectError(result, "ExecutionError", /^RangeError: Invalid array length: the split would give too many pieces \(in string_bomb_result\.ts:\d+:\d+\)$/);
        assertNoLeak(result, h.data);
        await expectHealthy(h, "mallory");
        await expectHealthy(h, "bob");
      },
    );

    it("guarded built-ins still behave like standard JavaScript", async () => {
      expect(JSON.parse(expectOk(await h.call("mallory", "guarded_builtins_behave_run")))).toEqual({
        bytes: [1, 2, 3],
        fromIterable: [8, 10],
        instanceOf: true,
        constructorIs: true,
        sliced: 4,
        isView: true,
        names: ["Uint8Array", "ArrayBuffer", 3, 8],
        subclass: [10, true, 20],
        bigints: ["1", "2"],
        dataView: 4,
        number: "1,234.5",
        legacyCall: "1",
        date: "1/1/1970",
        supported: ["en-US"],
        segments: ["hi", " ", "there"],
        localeString: "1,234.5",
        splits: [["a", "b", "", "c"], ["a", "b", "c"], ["a", "b", "c"], ["a", "b"], ["ab"], ["1", "3", "1"], ["x-y", "custom"], ["split", 2, false]],
      });
    });

    describe("huge results are cut inside the sandbox, with the original size reported", () => {
      // maxOutputBytes is 50,000 (docs/design.md §3); the transfer cap is 1 MiB.
      it.each([
        ["string_bomb_result_big_text", 5_000_000, "x"],
        ["string_bomb_result_escaped", 3_000_000, "\u0001"],
        ["string_bomb_result_big_json", undefined, "["],
        ["string_bomb_result_wide", 8_000_000, "\u{1F600}"],
      ])("%s", async (schema, originalBytes, startsWith) => {
        const result = await h.call("mallory", schema);
        const output = expectOk(result);
        if (result.status !== "ok") return;
        expect(result.truncated).toBe(true);
        if (originalBytes !== undefined) expect(result.originalBytes).toBe(originalBytes);
        else expect(result.originalBytes).toBeGreaterThan(4_000_000);
        expect(output.startsWith(startsWith)).toBe(true);
        expect(output).toMatch(/\[Output truncated because it exceeded 50KB\. Original size: \d+ bytes\]$/);
        expect(Buffer.byteLength(output)).toBeLessThan(50_000 + 200);
        expect(output).not.toContain("\uFFFD"); // never cut inside a character
      });
    });

    // Last: it looks back over every bomb above. V8 reports an isolate meeting its heap limit on the
    // stderr of the process that holds the isolate: the in-process host's own (the harness sets those
    // reports aside), or a sandbox process's, which the host forwards to its log. There, a sandbox
    // process whose isolate V8 could not stop also says it retires. Nothing else is written.
    it("the host's stderr and its sandbox processes' stderr carry nothing but V8's heap-limit reports", () => {
      expect(h.strayStderr).toEqual([]);
      const forwarded = h.logs.map((record) => /^sandbox process \d+: (.*)$/.exec(record.message)?.[1]).filter((line) => line !== undefined);
      const retiring = /^animaworks sandbox \d+: an isolate was lost: .*; retiring this process$/;
      expect(forwarded.filter((line) => !isHeapLimitReport(line) && !retiring.test(line))).toEqual([]);
    });
  });
}
