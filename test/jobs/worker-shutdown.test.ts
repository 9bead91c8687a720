import { existsSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { noticeDir, noticePath } from "../../src/jobs/notices.js";
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

  /**
   * notice_left_behind: a notice that failed as its job ended is postponed (1 s, then longer); the drained
   * worker's last sweep read only due notices, so it left, and no worker was left to write it. Its last
   * sweep now tries postponed notices too.
   */
  it("notice_left_behind: a drained worker writes a notice postponed as its job ended before it leaves", async () => {
    const { store, worker, runs, jobOf, animaDir } = await setup();
    const folder = noticeDir(animaDir("alice"));
    const elsewhere = `${animaDir("alice")}-elsewhere`;
    mkdirSync(join(animaDir("alice"), "state"), { recursive: true });
    mkdirSync(elsewhere);
    symlinkSync(elsewhere, folder); // the notice folder fails for a moment: no notice is written through a link
    runs.auto = OK;
    const { job } = await store.submit(jobInput("alice"));
    const stats = await worker.run({
      untilDrained: true,
      mayLeave: async (drained) => {
        // The job ended, its notice failed and was postponed; the folder is put right before the worker leaves.
        expect((await jobOf(job)).notifiedAt).toBeUndefined();
        expect(await store.pendingNotices({ minAgeMs: 0, limit: 10 })).toEqual([]);
        rmSync(folder);
        return drained();
      },
    });
    expect(stats).toMatchObject({ started: 1, succeeded: 1 });
    expect(existsSync(noticePath(animaDir("alice"), job.id))).toBe(true);
    expect((await jobOf(job)).notifiedAt).toBeDefined();
  });
});
