import { describe, expect, it } from "vitest";
import { TextPieces } from "../../../src/isolation/wire/text-pieces.js";

declare global {
  interface String {
    isWellFormed(): boolean;
  }
}

describe("TextPieces.groups", () => {
  it.each([
    ["many small parts", Array.from({ length: 50 }, (_, i) => `part ${i};`), 32],
    ["one long part", ["x".repeat(1_000)], 64],
    ["long and short parts mixed", ["a".repeat(10), "b".repeat(300), "c", "d".repeat(64), "e".repeat(65)], 64],
    ["parts exactly the group size", ["a".repeat(16), "b".repeat(16), "c".repeat(16)], 16],
    ["no parts", [], 8],
  ])("%s: the groups joined are the text, each at most the size asked", (_name, parts, chars) => {
    const text = new TextPieces(parts);
    const groups = [...text.groups(chars)];
    expect(groups.join("")).toBe(parts.join(""));
    expect(text.join()).toBe(parts.join(""));
    expect(text.length).toBe(parts.join("").length);
    for (const group of groups) {
      expect(group.length).toBeGreaterThan(0);
      expect(group.length).toBeLessThanOrEqual(chars);
    }
  });

  it("never cuts between the halves of a surrogate pair", () => {
    const text = "a😀".repeat(1_000);
    for (const chars of [2, 3, 64, 101]) {
      const groups = [...new TextPieces([text]).groups(chars)];
      expect(groups.join("")).toBe(text);
      for (const group of groups) expect(group.isWellFormed(), `${chars}: ${JSON.stringify(group)}`).toBe(true);
    }
  });

  it("joins small parts up to the size rather than one entry each", () => {
    const groups = [...new TextPieces(Array.from({ length: 64 }, () => "x".repeat(16))).groups(256)];
    expect(groups).toHaveLength(4);
  });

  it("goes out as its whole text in JSON", () => {
    expect(JSON.stringify({ value: new TextPieces(['a"', "b\n"]) })).toBe(JSON.stringify({ value: 'a"b\n' }));
  });
});
