import { describe, expect, it } from "vitest";
import { MessageBudget } from "../../../src/isolation/pool/message-budget.js";

/** The token bucket that keeps a sandbox process's capability requests to their budget (pool/child-link.ts), on a clock of the test's. */
describe("MessageBudget", () => {
  it("takes a burst at once, then one message per 1/perSecond; a debt is what the reader waits", () => {
    const budget = new MessageBudget(1_000, 10, 0);
    for (let i = 0; i < 10; i++) expect(budget.take(0)).toBe(0);
    // One past the burst at the same instant: one message's worth of waiting (1 ms at 1,000 a second).
    expect(budget.take(0)).toBe(1);
    expect(budget.take(0)).toBe(2);
    // The debt is paid back by time: 2 ms later the bucket is even, and the next message waits 1 ms again.
    expect(budget.take(2)).toBe(1);
    // A quiet spell refills it up to the burst, never beyond.
    for (let i = 0; i < 10; i++) expect(budget.take(1_000_000)).toBe(0);
    expect(budget.take(1_000_000)).toBe(1);
  });

  it("a reader that waits what it is told takes burst + perSecond × seconds over a stretch, one message more at most", () => {
    const budget = new MessageBudget(2_000, 2_000, 0);
    let taken = 0;
    // Messages as fast as they come, read in deliveries of 50 (the reader waits only between deliveries).
    for (let ms = 0; ms < 3_000;) {
      let waitMs = 0;
      for (let i = 0; i < 50; i++, taken++) waitMs = budget.take(ms);
      ms += Math.max(waitMs, 0.1);
    }
    expect(taken).toBeLessThanOrEqual(2_000 + 2_000 * 3 + 50);
    expect(taken).toBeGreaterThanOrEqual(2_000 + 2_000 * 3 - 50);
  });
});
