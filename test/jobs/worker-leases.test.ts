import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { noticePath } from "../../src/jobs/notices.js";
import { leaseOf } from "../../src/jobs/store.js";
import { aborted, jobInput, waitFor } from "./helpers.js";
import { OK, workerHarness } from "./worker-harness.js";

/**
 * Leases and what maintenance does with them: a long job's lease is renewed, a run whose lease was taken
 * over is stopped and its outcome dropped, a dead worker's jobs are recovered, old jobs are purged.
 */
describe("JobWorker: leases and store maintenance", () => {
  const { setup } = workerHarness();

  it("renews the lease of a long job so no other worker recovers it", async () => {
    const { store, worker, runs, jobOf, openOther } = await setup({ leaseMs: 400, heartbeatIntervalMs: 40 });
    const { job } = await store.submit(jobInput("alice", { maxAttempts: 3 }));
    worker.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    const other = openOther();
    const firstExpiry = (await jobOf(job)).leaseExpiresAt!;
    // Run well past several lease lengths, recovering as a second worker would at every renewal seen.
    await waitFor(
      "four lease lengths",
      async () => {
        expect((await other.recoverExpiredLeases()).requeued).toEqual([]);
        return (await jobOf(job)).leaseExpiresAt! > firstExpiry + 4 * 400;
      },
      10_000,
    );
    runs.release(job.id);
    await waitFor("the job done", async () => (await jobOf(job)).status === "succeeded");
    expect((await jobOf(job)).attempts).toBe(1);
  });

  it("aborts a run whose lease was taken over, and drops its outcome", async () => {
    // One slot, so this worker cannot claim the job again while its first run is still going.
    const { store, worker, runs, jobOf, openOther } = await setup({ concurrency: 1, leaseMs: 600, heartbeatIntervalMs: 30 });
    const { job } = await store.submit(jobInput("alice", { maxAttempts: 2, retryBackoffMs: 0 }));
    worker.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    const { ctx } = runs.live.get(job.id)!;
    const other = openOther();
    // As if this worker had stalled past its lease: expired, recovered and claimed by someone else. The
    // worker's own heartbeat (every 30 ms) may renew the lease between those steps on a busy machine:
    // then the takeover is tried again.
    let taken: Awaited<ReturnType<typeof other.claim>>[number] | undefined;
    await waitFor("the lease taken over", async () => {
      await other.renewLeases([leaseOf(await jobOf(job))], 0);
      await other.recoverExpiredLeases();
      [taken] = await other.claim({ owner: "someone-else", leaseMs: 60_000, limit: 1 });
      return taken !== undefined;
    });
    expect(taken?.attempts).toBe(2);
    await aborted(ctx.signal); // the next heartbeat finds the lease gone
    expect(ctx.signal.reason).toMatchObject({ message: "job lease lost to another worker" });
    runs.release(job.id); // its result must not count
    await waitFor("the first run released", () => worker.stats.released === 1);
    expect(await jobOf(job)).toMatchObject({ status: "running", leaseOwner: "someone-else", attempts: 2 });
  });

  it("recovers a dead worker's jobs: retried when allowed, else interrupted with a notice", async () => {
    const { store, worker, runs, animaDir, jobOf, openOther } = await setup({ maintenanceIntervalMs: 30, noticeGraceMs: 50 });
    runs.auto = OK;
    const { job: retryable } = await store.submit(jobInput("alice", { maxAttempts: 2, retryBackoffMs: 10 }));
    const { job: once } = await store.submit(jobInput("alice"));
    // A worker claims both and dies: it never renews its leases.
    expect(await openOther().claim({ owner: "dead", leaseMs: 100, limit: 2 })).toHaveLength(2);
    await worker.run({ untilDrained: true });
    expect(await jobOf(retryable)).toMatchObject({ status: "succeeded", attempts: 2 });
    expect(await jobOf(once)).toMatchObject({ status: "interrupted", attempts: 1, error: { type: "ExecutionError" } });
    expect(readFileSync(noticePath(animaDir("alice"), once.id), "utf8")).toContain("- Status: interrupted\n");
  });

  it("purges finished jobs past the retention period", async () => {
    const { store, worker, runs, jobOf } = await setup({ retentionMs: 1, purgeIntervalMs: 1, maintenanceIntervalMs: 20 });
    runs.auto = OK;
    const { job } = await store.submit(jobInput("alice"));
    worker.start();
    await waitFor("the job purged", async () => (await jobOf(job)) === undefined);
  });
});
