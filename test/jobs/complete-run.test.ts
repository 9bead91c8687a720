import { describe, expect, it } from "vitest";
import { type JobRun, completeRun } from "../../src/jobs/run-state.js";
import type { Job, JobStore } from "../../src/jobs/store.js";

/**
 * A finished run's outcome is written even when the store is unreachable for longer than a few seconds
 * (a PostgreSQL restart on a busy machine): the write is tried again for as long as the lease lasts, since
 * the lease fences it (a job recovered meanwhile refuses a stale write). Before, it gave up after ≈ 4 s and
 * the finished job ended `interrupted` when its lease ran out.
 */
const run = { lease: { id: "j1", owner: "w1", attempt: 1 } } as unknown as JobRun;
const RECORDED = { id: "j1", status: "succeeded" } as unknown as Job;

function storeFailing(times: number): { store: JobStore; tries: () => number } {
  let tries = 0;
  const store = {
    complete: () => {
      tries++;
      return tries <= times ? Promise.reject(new Error("Connection terminated unexpectedly")) : Promise.resolve(RECORDED);
    },
  } as unknown as JobStore;
  return { store, tries: () => tries };
}

describe("recording a run's outcome", () => {
  it("keeps trying while the store is down, for as long as the lease lasts (6 failures ≈ 5.9 s)", async () => {
    const { store, tries } = storeFailing(6);
    expect(await completeRun(store, run, { status: "succeeded", result: "ok" }, () => false, 30_000)).toBe(RECORDED);
    expect(tries()).toBe(7);
  }, 20_000);

  it("gives up once the lease would have run out, or at once when the worker stops", async () => {
    const down = storeFailing(Number.POSITIVE_INFINITY);
    expect(await completeRun(down.store, run, { status: "succeeded", result: "ok" }, () => false, 400)).toMatchObject({ failed: expect.any(Error) as unknown });
    // At 0, 100 and 350 ms (fewer on a busy machine); the next, 500 ms later, would pass the 400 ms.
    expect(down.tries()).toBeGreaterThanOrEqual(2);
    expect(down.tries()).toBeLessThanOrEqual(3);
    const stopping = storeFailing(Number.POSITIVE_INFINITY);
    expect(await completeRun(stopping.store, run, { status: "succeeded", result: "ok" }, () => true, 30_000)).toMatchObject({
      failed: expect.any(Error) as unknown,
    });
    expect(stopping.tries()).toBe(1);
  });
});
