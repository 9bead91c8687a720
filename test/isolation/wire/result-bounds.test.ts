import { describe, expect, it } from "vitest";
import { MAX_ORIGINAL_RESULT_BYTES, boundedResult } from "../../../src/isolation/wire/result-bounds.js";
import type { ResultValue } from "../../../src/isolation/wire/messages.js";

const text = (value: string, bytes: number, truncated: boolean): ResultValue => ({ kind: "text", text: value, bytes, truncated });

describe("boundedResult: a result as the host may believe it", () => {
  it("keeps what the prelude frames, with the size measured on the text", () => {
    expect(boundedResult({ kind: "none" }, 10)).toEqual({ value: { kind: "none" } });
    expect(boundedResult(text("héllo", 999, false), 10)).toEqual({ value: text("héllo", 6, false) });
    // Cut in the isolate to 10 characters (20 bytes): the host makes the byte cut, and keeps the original size.
    expect(boundedResult(text("é".repeat(10), 5_000, true), 10)).toEqual({ value: text("é".repeat(5), 5_000, true) });
    expect(boundedResult(text("a😀", 100, true), 4)).toEqual({ value: text("a", 100, true) });
  });

  it("oversized_structured_result: a text over the call's limit, or one over it in bytes said not to be cut, is broken", () => {
    expect(boundedResult({ kind: "json", text: "x".repeat(11), bytes: 2, truncated: false }, 10)).toEqual({
      broken: "a result of 11 characters, over the call's 10-byte limit",
    });
    expect(boundedResult({ kind: "json", text: "x".repeat(11), bytes: 2, truncated: true }, 10)).toMatchObject({ broken: expect.any(String) });
    expect(boundedResult(text("é".repeat(10), 10, false), 10)).toEqual({ broken: "a result of 20 bytes it said was not cut, over the call's 10-byte limit" });
  });

  it.each([
    ["1e308", 1e308, 9],
    ["a negative size", -5, 9],
    ["a fraction", 12.5, 9],
    ["more than V8's longest string", 2 ** 50, MAX_ORIGINAL_RESULT_BYTES],
    ["a plausible size", 123_456, 123_456],
  ])("forged_original_size: %s as the original size of a cut result", (_label, claimed, believed) => {
    expect(boundedResult(text("cut short", claimed, true), 100)).toEqual({ value: text("cut short", believed, true) });
  });
});
