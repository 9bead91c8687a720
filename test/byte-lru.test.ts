import { describe, expect, it } from "vitest";
import { ByteLru } from "../src/byte-lru.js";

describe("ByteLru", () => {
  it("drops the least recently used entries beyond its byte bound, and never keeps one larger than the bound", () => {
    const lru = new ByteLru<string>(10);
    lru.set("a", "A", 4);
    lru.set("b", "B", 4);
    expect(lru.get("a")).toBe("A"); // now the most recent
    lru.set("c", "C", 4);
    expect([lru.get("a"), lru.get("b"), lru.get("c")]).toEqual(["A", undefined, "C"]);
    expect(lru.bytes).toBe(8);
    lru.set("huge", "H", 11);
    expect(lru.get("huge")).toBeUndefined();
    lru.set("a", "A2", 6); // replacing counts the new size only
    expect([lru.get("a"), lru.get("c"), lru.bytes, lru.size]).toEqual(["A2", "C", 10, 2]);
    lru.delete("a");
    expect([lru.bytes, lru.size]).toEqual([4, 1]);
  });
});
