import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { noticePath } from "../../src/jobs/notices.js";
import { type Job } from "../../src/jobs/store.js";
import { aborted, jobInput, waitFor } from "./helpers.js";
import { OK, workerHarness } from "./worker-harness.js";

/**
 * How a worker leaves: handing running jobs back when told to abort them, draining the queue (waiting for
 * a job in its retry backoff, asking before it leaves), and a graceful stop bounded by its drain time.
 */
describe("JobWorker: shutdown and drain", () => {
  const { setup } = workerHarness();

  it("hands running jobs back at shutdown when asked to abort them", async () => {
    const { store, worker, runs, jobOf, animaDir } = await setup();
    const { job: retryable } = await store.submit(jobInput("alice", { maxAttempts: 2 }));
    const { job: once } = await store.submit(jobInput("alice"));
    worker.start();
    await waitFor("both running", () => runs.live.size === 2);
    for (const { ctx, job } of runs.live.values()) {
      void aborted(ctx.signal).then(() => runs.release(job.id, { ok: false, error: { type: "ExecutionError", fault: "tool", message: "aborted" } }));
    }
    await worker.stop({ abortRunning: true });
    expect(await jobOf(retryable)).toMatchObject({ status: "queued", attempts: 1 });
    expect(await jobOf(once)).toMatchObject({ status: "interrupted" });
    expect(existsSync(noticePath(animaDir("alice"), once.id))).toBe(true);
    expect(worker.stats.released).toBe(2);
  });

  it("waits in drain mode for a job that is backing off before its retry", async () => {
    const { store, worker, runs, jobOf, openOther } = await setup({ maintenanceIntervalMs: 20 });
    runs.auto = OK;
    const { job } = await store.submit(jobInput("alice", { maxAttempts: 2, retryBackoffMs: 150 }));
    await openOther().claim({ owner: "dead", leaseMs: 1, limit: 1 });
    await worker.run({ untilDrained: true });
    expect(await jobOf(job)).toMatchObject({ status: "succeeded", attempts: 2 });
  });

  it("stops gracefully on its signal, and hands running jobs back when the drain time runs out", async () => {
    const { store, worker, runs, jobOf } = await setup();
    const { job: retryable } = await store.submit(jobInput("alice", { maxAttempts: 2 }));
    const { job: once } = await store.submit(jobInput("alice"));
    const stop = new AbortController();
    const running = worker.run({ signal: stop.signal, drainTimeoutMs: 100 });
    await waitFor("both running", () => runs.live.size === 2);
    for (const { ctx, job } of runs.live.values()) {
      void aborted(ctx.signal).then(() => runs.release(job.id, { ok: false, error: { type: "ExecutionError", fault: "tool", message: "aborted" } }));
    }
    stop.abort();
    expect(await running).toMatchObject({ started: 2, released: 2 });
    expect(await jobOf(retryable)).toMatchObject({ status: "queued", attempts: 1 });
    expect(await jobOf(once)).toMatchObject({ status: "interrupted" });
  });

  it("asks before it leaves a drained queue, and goes on when told to", async () => {
    const { store, worker, runs, jobOf } = await setup();
    runs.auto = OK;
    let asked = 0;
    let late: Job | undefined;
    const stats = await worker.run({
      untilDrained: true,
      mayLeave: async (drained) => {
        if (++asked > 1) return drained();
        late = (await store.submit(jobInput("alice"))).job; // a submit that raced the worker's leaving
        return drained();
      },
    });
    expect(asked).toBe(2);
    expect(stats).toMatchObject({ started: 1, succeeded: 1 });
    expect((await jobOf(late!)).status).toBe("succeeded");
  });
});
