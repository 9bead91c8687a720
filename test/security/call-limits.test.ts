import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, expectError, expectHealthy, startHost } from "./harness.js";

/**
 * Per-Anima call limits of direct calls: while another Anima has calls, an Anima runs at most
 * `maxConcurrentCallsPerAnima` at once with `maxQueuedCallsPerAnima` waiting, and a call beyond its
 * queue fails at once with `Busy`; alone on the host, an Anima is not held back.
 */
describe("per-Anima call limits of direct calls", () => {
  let h: Harness;
  beforeAll(() => {
    h = startHost({ mode: "process", cordons: "all", timeoutMs: 2_000, animas: ["mallory", "bob"], maxConcurrentCallsPerAnima: 1, maxQueuedCallsPerAnima: 1 });
  });
  afterAll(() => h.close());

  it("holds an Anima to its share while another Anima has calls, and refuses a call beyond its queue with Busy", async () => {
    // Both tools loaded first, so that calls reach the gate in the order they are made.
    expect(await expectHealthy(h, "bob")).toBe(1);
    expect(await expectHealthy(h, "mallory")).toBe(1);
    // Bob has a call in flight throughout (it waits 1 s, then times out): mallory is not alone.
    const bobWaiting = h.call("bob", "counter_wait", {}, { timeoutMs: 1_000 });
    const first = h.call("mallory", "counter_slow");
    const second = h.call("mallory", "counter_slow"); // waits for the first
    const third = await h.call("mallory", "counter_count"); // the queue (1) is full
    expectError(third, "Busy", /"mallory" already has 1 call running and 1 waiting/);
    expect(third.status === "error" ? third.hint : "").toMatch(/maxQueuedCallsPerAnima 1/);
    const results = await Promise.all([first, second]);
    expect(results.map((r) => r.status)).toEqual(["ok", "ok"]);
    expectError(await bobWaiting, "Timeout");
    // One isolate served both of mallory's calls, one after the other.
    expect(results.map((r) => (r.status === "ok" ? (JSON.parse(r.output) as { calls: number }).calls : 0)).sort()).toEqual([2, 3]);
    // Alone on the host, an Anima is not held back.
    const alone = await Promise.all([h.call("mallory", "counter_count"), h.call("mallory", "counter_count"), h.call("mallory", "counter_count")]);
    expect(alone.map((r) => r.status)).toEqual(["ok", "ok", "ok"]);
  });
});
