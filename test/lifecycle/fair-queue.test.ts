import { describe, expect, it } from "vitest";
import { FairQueue } from "../../src/lifecycle/fair-queue.js";

describe("FairQueue", () => {
  it("serves askers in turn, each asker's items in order", () => {
    const queue = new FairQueue<string>(100, 100);
    for (const item of ["m1", "m2", "m3"]) queue.push("mallory", item);
    queue.push("alice", "a1");
    queue.push("bob", "b1");
    queue.push("alice", "a2");
    const order: string[] = [];
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) order.push(item);
    expect(order).toEqual(["m1", "a1", "b1", "m2", "a2", "m3"]);
    expect(queue.length).toBe(0);
  });

  it("refuses past its bound per asker, and past its bound in all, adding nothing", () => {
    const queue = new FairQueue<number>(5, 2);
    expect(queue.push("mallory", 1)).toBeUndefined();
    expect(queue.push("mallory", 2)).toBeUndefined();
    expect(queue.push("mallory", 3)).toBe("asker");
    expect(queue.waitingOf("mallory")).toBe(2);
    for (const asker of ["a", "b"]) expect(queue.push(asker, 0)).toBeUndefined();
    expect(queue.push("c", 0)).toBeUndefined();
    expect(queue.push("d", 0)).toBe("all");
    expect(queue.length).toBe(5);
    expect(queue.drain()).toHaveLength(5);
    expect(queue.length).toBe(0);
    expect(queue.shift()).toBeUndefined();
  });
});
