import { describe, expect, it } from "vitest";
import { jobInput, waitFor } from "./helpers.js";
import { OK, workerHarness } from "./worker-harness.js";

/**
 * Which job runs next and how many at once: Animas take turns, an Anima's higher priorities go first, the
 * per-Anima and global limits hold, and a freed slot is filled at once rather than at the next poll.
 */
describe("JobWorker: which job runs next", () => {
  const { setup } = workerHarness();

  it("is fair: one Anima's 1,000 queued jobs delay another Anima's job by at most one slot", async () => {
    const { store, worker, runs } = await setup({ concurrency: 2, perAnimaConcurrency: 2 });
    await Promise.all(Array.from({ length: 1_000 }, () => store.submit(jobInput("a"))));
    worker.start();
    await waitFor("two of A's jobs running", () => runs.live.size === 2);
    const { job: b } = await store.submit(jobInput("b"));
    runs.release(runs.started[0]!.id); // one slot frees up
    await waitFor("a third start", () => runs.started.length === 3);
    expect(runs.started[2]!.id).toBe(b.id);
  });

  it("runs an Anima's higher priorities first, Animas taking turns", async () => {
    const { store, worker, runs } = await setup({ concurrency: 1 });
    runs.auto = OK;
    const submit = async (anima: string, priority: number) => (await store.submit(jobInput(anima, { priority }))).job.id;
    const low1 = await submit("a", 0);
    const low2 = await submit("a", 0);
    const mid = await submit("a", 5);
    const top = await submit("a", 10);
    const bHigh = await submit("b", 7);
    await worker.run({ untilDrained: true });
    expect(runs.started.map((j) => j.id)).toEqual([top, bHigh, mid, low1, low2]);
  });

  it("starts an Anima's next job as soon as the previous outcome is recorded, not at the next poll", async () => {
    const { store, worker, runs } = await setup({ concurrency: 2, perAnimaConcurrency: 1, pollIntervalMs: 60_000 });
    runs.auto = OK;
    await Promise.all(Array.from({ length: 5 }, () => store.submit(jobInput("a"))));
    worker.start();
    // One missed wake-up would leave the rest waiting for the 60 s poll.
    await waitFor("all five jobs run", () => runs.started.length === 5, 10_000);
  });

  it("keeps the per-Anima limit even when global slots are free", async () => {
    const { store, worker, runs } = await setup({ concurrency: 4, perAnimaConcurrency: 2 });
    await Promise.all(Array.from({ length: 6 }, () => store.submit(jobInput("a"))));
    await store.submit(jobInput("b"));
    worker.start();
    await waitFor("a's two jobs and b's one running", () => runs.live.size >= 3);
    runs.releaseAll();
    await worker.run({ untilDrained: true });
    expect(runs.started).toHaveLength(7);
    expect(runs.maxPerAnima.get("a")).toBe(2);
    expect(runs.maxGlobal).toBe(3); // the fourth slot stayed free rather than break a's limit
  });

  it("never runs more than the global limit, even with one job per Anima", async () => {
    const { store, worker, runs } = await setup({ concurrency: 3 });
    await Promise.all(Array.from({ length: 10 }, (_, i) => store.submit(jobInput(`anima${i}`))));
    worker.start();
    await waitFor("three running", () => runs.live.size === 3);
    runs.releaseAll();
    await worker.run({ untilDrained: true });
    expect(runs.started).toHaveLength(10);
    expect(runs.maxGlobal).toBe(3);
  });
});
