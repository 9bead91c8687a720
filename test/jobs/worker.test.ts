import { existsSync, mkdirSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ToolHostError } from "../../src/errors.js";
import { noticeDir, noticePath } from "../../src/jobs/notices.js";
import { JOB_DEFAULTS } from "../../src/jobs/defaults.js";
import { stopErrorFor } from "../../src/jobs/run-state.js";
import { type JobRunContext, type JobRunResult, JobWorker, type JobWorkerOptions, resolveWorkerSettings } from "../../src/jobs/worker.js";
import { SqliteJobStore } from "../../src/jobs/sqlite-store.js";
import { type Job, leaseOf } from "../../src/jobs/store.js";
import { monotonicMs } from "../../src/clock.js";
import { aborted, gate, jobInput, tempDir, waitFor, withBundle } from "./helpers.js";

const OK: JobRunResult = { ok: true, result: "done" };

/** A runner the test drives: each run waits until released, unless `auto` says how runs end. */
class Runs {
  readonly started: Job[] = [];
  readonly live = new Map<string, { job: Job; ctx: JobRunContext; release(result: JobRunResult): void }>();
  auto: JobRunResult | undefined;
  maxGlobal = 0;
  readonly maxPerAnima = new Map<string, number>();

  readonly run = async (job: Job, ctx: JobRunContext): Promise<JobRunResult> => {
    this.started.push(job);
    const g = gate<JobRunResult>();
    this.live.set(job.id, { job, ctx, release: g.open });
    this.maxGlobal = Math.max(this.maxGlobal, this.live.size);
    const mine = [...this.live.values()].filter((r) => r.job.anima === job.anima).length;
    this.maxPerAnima.set(job.anima, Math.max(this.maxPerAnima.get(job.anima) ?? 0, mine));
    try {
      return this.auto ?? (await g.promise);
    } finally {
      this.live.delete(job.id);
    }
  };

  release(id: string, result: JobRunResult = OK): void {
    this.live.get(id)!.release(result);
  }

  releaseAll(result: JobRunResult = OK): void {
    this.auto = result;
    for (const r of this.live.values()) r.release(result);
  }
}

describe("JobWorker", () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(options: Partial<JobWorkerOptions> = {}) {
    const dir = tempDir();
    const path = join(dir.dir, "jobs.db");
    const store = await withBundle(new SqliteJobStore({ path }));
    const runs = new Runs();
    const logs: string[] = [];
    const animaDir = (anima: string) => {
      const path = join(dir.dir, "animas", anima);
      mkdirSync(path, { recursive: true }); // Animas exist before their jobs do
      return path;
    };
    // Heartbeats every 30 ms: a cancel requested through the store (JobService.cancel) is seen that soon.
    const worker = new JobWorker({
      store,
      runJob: runs.run,
      animaDirOf: animaDir,
      pollIntervalMs: 20,
      idleCheckIntervalMs: 20,
      leaseMs: 2_000,
      heartbeatIntervalMs: 30,
      cancelGraceMs: 100,
      onLog: (r) => logs.push(r.message),
      ...options,
    });
    cleanups.push(dir.cleanup, () => store.close(), () => worker.stop({ abortRunning: true }), () => runs.releaseAll());
    const jobOf = async (job: Job) => (await store.get(job.anima, job.id))!;
    const openOther = () => {
      const other = new SqliteJobStore({ path });
      cleanups.push(() => other.close());
      return other;
    };
    return { store, worker, runs, logs, animaDir, jobOf, openOther };
  }

  it("runs a job, records its result and writes the notice in AnimaWorks' format, atomically", async () => {
    const { store, worker, runs, animaDir, jobOf, logs } = await setup();
    runs.auto = { ok: true, result: "x".repeat(250) };
    const { job } = await store.submit(jobInput("alice"));
    expect(await worker.run({ untilDrained: true })).toMatchObject({ started: 1, succeeded: 1 });
    // One log line as it starts and one as it ends.
    expect(logs).toContainEqual(`job ${job.id} web:fetch started (attempt 1 of 1)`);
    expect(logs.some((line) => new RegExp(`^job ${job.id} web:fetch succeeded after \\d+ ms$`).test(line))).toBe(true);
    const done = await jobOf(job);
    expect(done).toMatchObject({ status: "succeeded", result: "x".repeat(250), attempts: 1 });
    expect(done.notifiedAt).toBeDefined();
    expect(readFileSync(noticePath(animaDir("alice"), job.id), "utf8")).toBe(
      `# Background task completed: web:fetch\n\n- Task ID: ${job.id}\n- Tool: web:fetch\n- Status: completed\n` +
        `- Result: [web:fetch] completed: ${"x".repeat(200)}\n`,
    );
    expect(readdirSync(noticeDir(animaDir("alice")))).toEqual([`${job.id}.md`]); // no temp file left behind
  });

  it("records failures from returned errors, thrown errors and invalid results", async () => {
    const { store, runs, animaDir, jobOf } = await setup();
    const results: Array<() => Promise<JobRunResult>> = [
      async () => ({ ok: false, error: { type: "ExecutionError", fault: "tool", message: "boom" } }),
      async () => {
        throw new ToolHostError("PermissionDenied", "no network");
      },
      async () => ({ ok: "yes" }) as unknown as JobRunResult,
    ];
    const worker = new JobWorker({
      store,
      animaDirOf: animaDir,
      pollIntervalMs: 20,
      concurrency: 1,
      runJob: (job) => results[runs.started.push(job) - 1]!(),
    });
    const jobs = [];
    for (let i = 0; i < 3; i++) jobs.push((await store.submit(jobInput("alice"))).job);
    expect(await worker.run({ untilDrained: true })).toMatchObject({ failed: 3 });
    expect((await jobOf(jobs[0]!)).error).toEqual({ type: "ExecutionError", fault: "tool", message: "boom" });
    expect((await jobOf(jobs[1]!)).error).toEqual({ type: "PermissionDenied", fault: "tool", message: "no network" });
    expect((await jobOf(jobs[2]!)).error?.fault).toBe("host");
    expect((await jobOf(jobs[2]!)).error?.message).toMatch(/invalid result/);
    const notice = readFileSync(noticePath(animaDir("alice"), jobs[0]!.id), "utf8");
    expect(notice).toContain("# Background task failed: web:fetch\n");
    expect(notice).toContain("- Status: failed\n- Result: [web:fetch] failed: ExecutionError: boom\n");
  });

  it("drops the notice of an Anima whose folder is gone instead of recreating it", async () => {
    const { store, jobOf, logs } = await setup();
    const parent = tempDir();
    cleanups.push(parent.cleanup);
    const gone = join(parent.dir, "removed-anima");
    const worker = new JobWorker({ store, animaDirOf: () => gone, runJob: async () => OK, onLog: (r) => logs.push(r.message) });
    const { job } = await store.submit(jobInput("alice"));
    await worker.run({ untilDrained: true });
    expect((await jobOf(job)).notifiedAt).toBeDefined(); // not retried forever
    expect(existsSync(gone)).toBe(false);
    expect(logs.join("\n")).toMatch(/dropped: Anima folder .* no longer exists/);
  });

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

  it("stores progress reported while running", async () => {
    const { store, worker, runs, jobOf } = await setup();
    const { job } = await store.submit(jobInput("alice"));
    worker.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    const { ctx } = runs.live.get(job.id)!;
    for (let i = 1; i <= 10; i++) ctx.reportProgress(i / 10, `step ${i}`);
    await waitFor("the last progress stored", async () => (await jobOf(job)).progress?.message === "step 10");
    expect((await jobOf(job)).progress).toEqual({ fraction: 1, message: "step 10" });
  });

  it("renews the lease of a long job so no other worker recovers it", async () => {
    const { store, worker, runs, jobOf, openOther } = await setup({ leaseMs: 400, heartbeatIntervalMs: 40 });
    const { job } = await store.submit(jobInput("alice", { maxAttempts: 3 }));
    worker.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    const other = openOther();
    const firstExpiry = (await jobOf(job)).leaseExpiresAt!;
    // Run well past several lease lengths, recovering as a second worker would at every renewal seen.
    await waitFor("four lease lengths", async () => {
      expect((await other.recoverExpiredLeases()).requeued).toEqual([]);
      return (await jobOf(job)).leaseExpiresAt! > firstExpiry + 4 * 400;
    }, 10_000);
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
    await other.renewLeases([leaseOf(await jobOf(job))], 0); // as if this worker had stalled past its lease
    await other.recoverExpiredLeases();
    const [taken] = await other.claim({ owner: "someone-else", leaseMs: 60_000, limit: 1 });
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

  it("purges finished jobs past the retention period", async () => {
    const { store, worker, runs, jobOf } = await setup({ retentionMs: 1, purgeIntervalMs: 1, maintenanceIntervalMs: 20 });
    runs.auto = OK;
    const { job } = await store.submit(jobInput("alice"));
    worker.start();
    await waitFor("the job purged", async () => (await jobOf(job)) === undefined);
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

  it("takes every default from JOB_DEFAULTS, the lease-relative ones from the lease in force", () => {
    const d = JOB_DEFAULTS;
    expect(resolveWorkerSettings({})).toMatchObject({
      concurrency: d.concurrency,
      perAnimaConcurrency: d.perAnimaConcurrency,
      leaseMs: d.leaseMs,
      heartbeatIntervalMs: 2_000,
      pollIntervalMs: d.pollIntervalMs,
      maintenanceIntervalMs: 15_000,
      cancelGraceMs: 2_000,
      noticeGraceMs: 30_000,
      retentionMs: d.retentionMs,
      purgeIntervalMs: d.purgeIntervalMs,
      notices: true,
      idleCheckIntervalMs: d.idleCheckIntervalMs,
    });
    expect(resolveWorkerSettings({ leaseMs: 900 })).toMatchObject({ heartbeatIntervalMs: 300, maintenanceIntervalMs: 450, noticeGraceMs: 900 });
    expect(resolveWorkerSettings({ cancelGraceMs: 0 }).cancelGraceMs).toBe(0);
  });

  it("rejects invalid options", async () => {
    const { store } = await setup();
    const base = { store, runJob: async () => OK, animaDirOf: (a: string) => a };
    expect(() => new JobWorker({ ...base, concurrency: 0 })).toThrow(/concurrency/);
    expect(() => new JobWorker({ ...base, leaseMs: 100, heartbeatIntervalMs: 100 })).toThrow(/heartbeatIntervalMs/);
    expect(() => new JobWorker({ ...base, cancelGraceMs: -1 })).toThrow(/cancelGraceMs/);
    expect(() => new JobWorker({ ...base, pollIntervalMs: 2 ** 31 })).toThrow(/pollIntervalMs/);
  });
});
