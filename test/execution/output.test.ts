import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NO_OUTPUT, cutUtf8, formatOutput } from "../../src/execution/output.js";
import { type TestHost, installFixtures, okOutput, useTestHost } from "../helpers/tools.js";

const LIMIT = 50_000;
const NOTICE = /\n\n\[Output truncated because it exceeded 50KB\. Original size: (\d+) bytes\]$/;

describe("cutUtf8", () => {
  it("never splits a character", () => {
    expect(cutUtf8("aé", 2)).toBe("a"); // é is 2 bytes
    expect(cutUtf8("a€", 3)).toBe("a"); // € is 3 bytes
    expect(cutUtf8("a😀b", 4)).toBe("a");
    expect(cutUtf8("a😀b", 5)).toBe("a😀");
    expect(cutUtf8("abc", 10)).toBe("abc");
    expect(cutUtf8("😀", 0)).toBe("");
  });
});

describe("formatOutput", () => {
  it("passes text at the limit through and truncates one byte over, with the original size", () => {
    const exact = "a".repeat(LIMIT);
    expect(formatOutput({ kind: "text", text: exact, bytes: LIMIT, truncated: false }, LIMIT)).toEqual({ text: exact, truncated: false, originalBytes: LIMIT });
    const over = formatOutput({ kind: "text", text: `${exact}b`, bytes: LIMIT + 1, truncated: false }, LIMIT);
    expect(over.truncated).toBe(true);
    expect(over.originalBytes).toBe(LIMIT + 1);
    expect(over.text.replace(NOTICE, "")).toBe(exact);
    expect(over.text.match(NOTICE)?.[1]).toBe(String(LIMIT + 1));
  });

  it("reports the size measured inside the sandbox when the result was already cut there", () => {
    const out = formatOutput({ kind: "json", text: "x".repeat(60_000), bytes: 5_000_000, truncated: true }, LIMIT);
    expect(out.originalBytes).toBe(5_000_000);
    expect(out.text).toMatch(/Original size: 5000000 bytes\]$/);
  });

  it("turns no value into (no output)", () => {
    expect(formatOutput({ kind: "none" }, LIMIT)).toEqual({ text: NO_OUTPUT, truncated: false, originalBytes: 0 });
  });
});

/** What callers see for each kind of return value, through the host (docs/animaworks-reference.md §4.5, checklist 24, 25). */
describe("results through the host", () => {
  let t: TestHost;
  beforeAll(() => {
    t = useTestHost();
    installFixtures("results", join(t.data.dir, "animas", "alice", "tools"));
  });
  afterAll(async () => t.close());

  it("serialises objects and arrays as 2-space JSON with non-ASCII characters kept", async () => {
    expect(okOutput(await t.host.call("alice", "results_object"))).toBe(
      JSON.stringify({ greeting: "こんにちは", city: "Zürich", ok: true, nested: { list: [1, "✓"] } }, null, 2),
    );
    expect(okOutput(await t.host.call("alice", "results_object"))).toContain("こんにちは"); // not \u3053…
    expect(okOutput(await t.host.call("alice", "results_array"))).toBe('[\n  1,\n  "two",\n  {\n    "three": 3\n  }\n]');
  });

  it("shows null and undefined as (no output), and other values as text", async () => {
    expect(okOutput(await t.host.call("alice", "results_null"))).toBe("(no output)");
    expect(okOutput(await t.host.call("alice", "results_undefined"))).toBe("(no output)");
    expect(okOutput(await t.host.call("alice", "results_number"))).toBe("42.5");
    expect(okOutput(await t.host.call("alice", "results_boolean"))).toBe("false");
    expect(okOutput(await t.host.call("alice", "results_string"))).toBe("plain text, not JSON");
    expect(okOutput(await t.host.call("alice", "results_empty"))).toBe("");
  });

  it("truncates output over 50,000 UTF-8 bytes on a character boundary, with a notice giving the original size", async () => {
    // 16,667 three-byte characters = 50,001 bytes: one byte over; the cut must drop the whole last character.
    const euro = await t.host.call("alice", "results_big", { char: "€", count: 16_667 });
    expect(euro.status === "ok" && euro.truncated).toBe(true);
    const text = okOutput(euro);
    expect(text.match(NOTICE)?.[1]).toBe("50001");
    const kept = text.replace(NOTICE, "");
    expect(kept).toBe("€".repeat(16_666));
    expect(Buffer.byteLength(kept)).toBe(49_998);

    // Four-byte characters (surrogate pairs in JS): never half a pair.
    const emoji = okOutput(await t.host.call("alice", "results_big", { char: "😀", count: 20_000 }));
    const keptEmoji = emoji.replace(NOTICE, "");
    expect(keptEmoji).toBe("😀".repeat(12_500));
    expect(emoji.match(NOTICE)?.[1]).toBe("80000");

    // Exactly at the limit: untouched.
    const exact = await t.host.call("alice", "results_big", { char: "é", count: 25_000 });
    expect(exact.status === "ok" && exact.truncated).toBe(false);
    expect(okOutput(exact)).toBe("é".repeat(25_000));
  });

  it("measures much larger results by their full size, though only the start crosses the sandbox boundary", async () => {
    const huge = await t.host.call("alice", "results_big", { char: "ab", count: 1_500_000 }); // 3 MB
    expect(huge.status === "ok" && huge.originalBytes).toBe(3_000_000);
    const text = okOutput(huge);
    expect(text).toMatch(/Original size: 3000000 bytes\]$/);
    expect(Buffer.byteLength(text.replace(NOTICE, ""))).toBe(LIMIT);
  });

  it("reports errors thrown by the tool as results, not exceptions (ref 26)", async () => {
    expect(await t.host.call("alice", "results_throws")).toMatchObject({
      status: "error",
      error_type: "ExecutionError",
      message: "the upstream service said no",
    });
    expect(await t.host.call("alice", "results_config_error")).toMatchObject({
      status: "error",
      error_type: "ToolConfigError",
      message: "MYAPI_KEY is not set",
    });
    const fn = await t.host.call("alice", "results_function");
    expect(fn).toMatchObject({ status: "error", error_type: "ExecutionError" });
    expect(fn.status === "error" && fn.message).toMatch(/returned a function/);
  });
});
