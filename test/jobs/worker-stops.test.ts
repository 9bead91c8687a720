import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { noticePath } from "../../src/jobs/notices.js";
import { stopErrorFor } from "../../src/jobs/run-state.js";
import { type JobRunResult, JobWorker } from "../../src/jobs/worker.js";
import { monotonicMs } from "../../src/clock.js";
import { aborted, jobInput, waitFor } from "./helpers.js";
import { OK, workerHarness } from "./worker-harness.js";

/**
 * How runs are stopped: a cancel (queued or running, seen through any store instance) and a deadline, the
 * tool told first and its signal aborted after the grace (at once at a deadline), a runner that ignores
 * its signal abandoned, and each stop blamed on whoever caused it.
 */
describe("JobWorker: cancels and deadlines", () => {
  const { setup, cleanups } = workerHarness();

  it("cancels a queued job without running it, and still notifies", async () => {
    const { store, worker, runs, animaDir, jobOf } = await setup();
    runs.auto = OK;
    const { job } = await store.submit(jobInput("alice"));
    const other = (await store.submit(jobInput("alice"))).job;
    expect(await store.requestCancel("alice", job.id)).toMatchObject({ status: "cancelled" });
    await worker.run({ untilDrained: true });
    expect(runs.started.map((j) => j.id)).toEqual([other.id]);
    expect((await jobOf(job)).status).toBe("cancelled");
    expect(readFileSync(noticePath(animaDir("alice"), job.id), "utf8")).toContain("- Status: cancelled\n");
  });

  it("cancels a running job in two steps: the tool is told at once, its signal aborts after the grace", async () => {
    const { store, worker, runs, jobOf } = await setup({ cancelGraceMs: 300 });
    const { job } = await store.submit(jobInput("alice"));
    worker.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    const { ctx } = runs.live.get(job.id)!;
    expect(ctx.stopRequested()).toBeUndefined();
    void aborted(ctx.signal).then(() => runs.release(job.id, { ok: false, error: { type: "ExecutionError", fault: "tool", message: "stopped" } }));
    // The real path of a cancel: through the store (JobService.cancel), seen at the next heartbeat.
    expect(await store.requestCancel("alice", job.id)).toMatchObject({ status: "running", cancelRequested: true });
    await waitFor("the stop request", () => ctx.stopRequested() !== undefined);
    const requestedAt = performance.now();
    expect(ctx.stopRequested()).toMatchObject({ type: "ExecutionError", message: "job cancelled by request" });
    expect(ctx.signal.aborted).toBe(false); // the tool may wrap up (isCancelled() is true) for the grace
    await aborted(ctx.signal);
    expect(performance.now() - requestedAt).toBeGreaterThanOrEqual(250);
    expect(ctx.signal.reason).toBe(ctx.stopRequested()); // one reason, carried by the signal
    await waitFor("the job cancelled", async () => (await jobOf(job)).status === "cancelled");
    expect(worker.stats.cancelled).toBe(1);
  });

  it("records a cancelled run that wraps up within the grace as it ended", async () => {
    const { store, worker, runs, jobOf } = await setup({ cancelGraceMs: 5_000 });
    const { job } = await store.submit(jobInput("alice"));
    worker.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    const { ctx } = runs.live.get(job.id)!;
    await store.requestCancel("alice", job.id);
    await waitFor("the stop request", () => ctx.stopRequested() !== undefined);
    // A runner that wraps up with an error ends cancelled; well before the grace runs out.
    runs.release(job.id, { ok: false, error: { type: "ExecutionError", fault: "tool", message: "wrapped up" } });
    await waitFor("the job cancelled", async () => (await jobOf(job)).status === "cancelled", 2_000);
    expect(ctx.signal.aborted).toBe(false);
  });

  it("keeps what a cancelled run returned as it wrapped up as the job's partial result; the job stays cancelled", async () => {
    const { store, worker, runs, jobOf, animaDir } = await setup({ cancelGraceMs: 5_000 });
    const { job } = await store.submit(jobInput("alice"));
    worker.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    const { ctx } = runs.live.get(job.id)!;
    await store.requestCancel("alice", job.id);
    await waitFor("the stop request", () => ctx.stopRequested() !== undefined);
    runs.release(job.id, { ok: false, error: ctx.stopRequested()!.toInfo(), partial: { result: '{"rows":3}', structured: true } });
    await waitFor("the job cancelled", async () => (await jobOf(job)).status === "cancelled", 2_000);
    expect(await jobOf(job)).toMatchObject({ status: "cancelled", result: '{"rows":3}', resultStructured: true });
    expect(worker.stats.cancelled).toBe(1);
    await waitFor("the notice", async () => (await jobOf(job)).notifiedAt !== undefined);
    expect(readFileSync(noticePath(animaDir("alice"), job.id), "utf8")).toContain('cancelled by request; partial result: {"rows":3}');
  });

  it("forcefully ends a run that ignores its abort signal after the grace period, freeing the slot", async () => {
    const { store, animaDir, jobOf } = await setup();
    const ignored: string[] = [];
    const worker = new JobWorker({
      store,
      animaDirOf: animaDir,
      concurrency: 1,
      cancelGraceMs: 50,
      pollIntervalMs: 20,
      heartbeatIntervalMs: 30,
      runJob: async (job) => {
        ignored.push(job.id);
        return job.argsJson === "{}" ? OK : new Promise<JobRunResult>(() => undefined); // never settles
      },
    });
    cleanups.push(() => worker.stop());
    const { job: stuck } = await store.submit(jobInput("alice"));
    const { job: next } = await store.submit(jobInput("alice", { argsJson: "{}" }));
    worker.start();
    await waitFor("the stuck job running", () => ignored.length === 1);
    await store.requestCancel("alice", stuck.id);
    await waitFor("the next job done", async () => (await jobOf(next)).status === "succeeded");
    expect((await jobOf(stuck)).status).toBe("cancelled");
  });

  it("sees a cancel requested through another store instance at its next heartbeat", async () => {
    const { store, worker, runs, jobOf, openOther } = await setup({ leaseMs: 600, heartbeatIntervalMs: 30 });
    const { job } = await store.submit(jobInput("alice"));
    worker.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    void aborted(runs.live.get(job.id)!.ctx.signal).then(() =>
      runs.release(job.id, { ok: false, error: { type: "ExecutionError", fault: "tool", message: "stopped" } }),
    );
    await openOther().requestCancel("alice", job.id);
    await waitFor("the job cancelled", async () => (await jobOf(job)).status === "cancelled");
  });

  it("fails a job that exceeds its timeout, cooperative or not", async () => {
    const { store, animaDir, jobOf } = await setup();
    const worker = new JobWorker({
      store,
      animaDirOf: animaDir,
      cancelGraceMs: 50,
      pollIntervalMs: 20,
      runJob: async (job, { signal }) => {
        if (job.argsJson === "{}") return new Promise<JobRunResult>(() => undefined); // ignores the signal
        await aborted(signal);
        return { ok: true, result: "finished after the deadline" }; // too late to count
      },
    });
    const { job: polite } = await store.submit(jobInput("alice", { timeoutMs: 80 }));
    const { job: stubborn } = await store.submit(jobInput("alice", { timeoutMs: 80, argsJson: "{}" }));
    await worker.run({ untilDrained: true });
    for (const job of [polite, stubborn]) {
      expect(await jobOf(job)).toMatchObject({ status: "failed", error: { type: "Timeout", message: "job exceeded its timeout of 80 ms" } });
    }
  });

  it("aborts the signal at the deadline itself, with Timeout, and gives the runner that deadline", async () => {
    const { store, worker, runs, jobOf } = await setup({ cancelGraceMs: 5_000 });
    const { job } = await store.submit(jobInput("alice", { timeoutMs: 150 }));
    worker.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    const { ctx } = runs.live.get(job.id)!;
    const left = ctx.deadline - monotonicMs();
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(150);
    await aborted(ctx.signal);
    // No grace at a deadline: the signal aborts as it passes, and the tool is told at the same moment.
    expect(monotonicMs() - ctx.deadline).toBeLessThan(100);
    expect(ctx.signal.reason).toMatchObject({ type: "Timeout", message: "job exceeded its timeout of 150 ms" });
    expect(ctx.stopRequested()).toBe(ctx.signal.reason);
    runs.release(job.id);
    await waitFor("the job failed", async () => (await jobOf(job)).status === "failed");
    expect((await jobOf(job)).error).toEqual({ type: "Timeout", fault: "tool", message: "job exceeded its timeout of 150 ms" });
  });

  it("blames each stop on whoever caused it: a deadline on the tool, a cancel on its caller, a lost lease or a shutdown on the host", async () => {
    const { store } = await setup();
    const { job } = await store.submit(jobInput("alice"));
    expect(stopErrorFor("timeout", job).toInfo()).toMatchObject({ type: "Timeout", fault: "tool" });
    expect(stopErrorFor("cancel", job).toInfo()).toMatchObject({ type: "ExecutionError", fault: "caller" });
    expect(stopErrorFor("lease-lost", job).toInfo()).toMatchObject({ type: "ExecutionError", fault: "host" });
    expect(stopErrorFor("shutdown", job).toInfo()).toMatchObject({ type: "ExecutionError", fault: "host" });
  });

  it("cuts a cancel's grace short at the deadline, the cancel still deciding the outcome", async () => {
    const { store, worker, runs, jobOf } = await setup({ cancelGraceMs: 5_000 });
    const { job } = await store.submit(jobInput("alice", { timeoutMs: 400 }));
    worker.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    const { ctx } = runs.live.get(job.id)!;
    void aborted(ctx.signal).then(() => runs.release(job.id, { ok: false, error: { type: "ExecutionError", fault: "tool", message: "stopped" } }));
    await store.requestCancel("alice", job.id);
    await waitFor("the job cancelled", async () => (await jobOf(job)).status === "cancelled", 3_000);
    expect(ctx.signal.reason).toMatchObject({ message: "job cancelled by request" });
  });
});
