import { existsSync, mkdirSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ToolHostError } from "../../src/errors.js";
import { noticeDir, noticePath } from "../../src/jobs/notices.js";
import { type JobRunContext, type JobRunResult, JobScheduler, type JobSchedulerOptions } from "../../src/jobs/scheduler.js";
import { SqliteJobStore } from "../../src/jobs/sqlite-store.js";
import { type Job, leaseOf } from "../../src/jobs/store.js";
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

describe("JobScheduler", () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(options: Partial<JobSchedulerOptions> = {}) {
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
    const scheduler = new JobScheduler({
      store,
      runJob: runs.run,
      animaDirOf: animaDir,
      pollIntervalMs: 20,
      leaseMs: 2_000,
      cancelGraceMs: 100,
      onLog: (r) => logs.push(r.message),
      ...options,
    });
    cleanups.push(dir.cleanup, () => store.close(), () => scheduler.stop({ abortRunning: true }), () => runs.releaseAll());
    const jobOf = async (job: Job) => (await store.get(job.anima, job.id))!;
    const openOther = () => {
      const other = new SqliteJobStore({ path });
      cleanups.push(() => other.close());
      return other;
    };
    return { store, scheduler, runs, logs, animaDir, jobOf, openOther };
  }

  it("runs a job, records its result and writes the notice in AnimaWorks' format, atomically", async () => {
    const { scheduler, runs, animaDir, jobOf, logs } = await setup();
    runs.auto = { ok: true, result: "x".repeat(250) };
    const { job } = await scheduler.submit(jobInput("alice"));
    expect(await scheduler.runUntilDrained()).toMatchObject({ started: 1, succeeded: 1 });
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
      async () => ({ ok: false, error: { type: "ExecutionError", message: "boom" } }),
      async () => {
        throw new ToolHostError("PermissionDenied", "no network");
      },
      async () => ({ ok: "yes" }) as unknown as JobRunResult,
    ];
    const scheduler = new JobScheduler({
      store,
      animaDirOf: animaDir,
      pollIntervalMs: 20,
      concurrency: 1,
      runJob: (job) => results[runs.started.push(job) - 1]!(),
    });
    const jobs = [];
    for (let i = 0; i < 3; i++) jobs.push((await scheduler.submit(jobInput("alice"))).job);
    expect(await scheduler.runUntilDrained()).toMatchObject({ failed: 3 });
    expect((await jobOf(jobs[0]!)).error).toEqual({ type: "ExecutionError", message: "boom" });
    expect((await jobOf(jobs[1]!)).error).toEqual({ type: "PermissionDenied", message: "no network" });
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
    const scheduler = new JobScheduler({ store, animaDirOf: () => gone, runJob: async () => OK, onLog: (r) => logs.push(r.message) });
    const { job } = await scheduler.submit(jobInput("alice"));
    await scheduler.runUntilDrained();
    expect((await jobOf(job)).notifiedAt).toBeDefined(); // not retried forever
    expect(existsSync(gone)).toBe(false);
    expect(logs.join("\n")).toMatch(/dropped: Anima folder .* no longer exists/);
  });

  it("is fair: one Anima's 1,000 queued jobs delay another Anima's job by at most one slot", async () => {
    const { scheduler, runs } = await setup({ concurrency: 2, perAnimaConcurrency: 2 });
    await Promise.all(Array.from({ length: 1_000 }, () => scheduler.submit(jobInput("a"))));
    scheduler.start();
    await waitFor("two of A's jobs running", () => runs.live.size === 2);
    const { job: b } = await scheduler.submit(jobInput("b"));
    runs.release(runs.started[0]!.id); // one slot frees up
    await waitFor("a third start", () => runs.started.length === 3);
    expect(runs.started[2]!.id).toBe(b.id);
  });

  it("runs an Anima's higher priorities first, Animas taking turns", async () => {
    const { store, scheduler, runs } = await setup({ concurrency: 1 });
    runs.auto = OK;
    const submit = async (anima: string, priority: number) => (await store.submit(jobInput(anima, { priority }))).job.id;
    const low1 = await submit("a", 0);
    const low2 = await submit("a", 0);
    const mid = await submit("a", 5);
    const top = await submit("a", 10);
    const bHigh = await submit("b", 7);
    await scheduler.runUntilDrained();
    expect(runs.started.map((j) => j.id)).toEqual([top, bHigh, mid, low1, low2]);
  });

  it("starts an Anima's next job as soon as the previous outcome is recorded, not at the next poll", async () => {
    const { scheduler, runs } = await setup({ concurrency: 2, perAnimaConcurrency: 1, pollIntervalMs: 60_000 });
    runs.auto = OK;
    await Promise.all(Array.from({ length: 5 }, () => scheduler.submit(jobInput("a"))));
    scheduler.start();
    // One missed wake-up would leave the rest waiting for the 60 s poll.
    await waitFor("all five jobs run", () => runs.started.length === 5, 10_000);
  });

  it("keeps the per-Anima limit even when global slots are free", async () => {
    const { scheduler, runs } = await setup({ concurrency: 4, perAnimaConcurrency: 2 });
    await Promise.all(Array.from({ length: 6 }, () => scheduler.submit(jobInput("a"))));
    await scheduler.submit(jobInput("b"));
    scheduler.start();
    await waitFor("a's two jobs and b's one running", () => runs.live.size >= 3);
    runs.releaseAll();
    await scheduler.runUntilDrained();
    expect(runs.started).toHaveLength(7);
    expect(runs.maxPerAnima.get("a")).toBe(2);
    expect(runs.maxGlobal).toBe(3); // the fourth slot stayed free rather than break a's limit
  });

  it("never runs more than the global limit, even with one job per Anima", async () => {
    const { scheduler, runs } = await setup({ concurrency: 3 });
    await Promise.all(Array.from({ length: 10 }, (_, i) => scheduler.submit(jobInput(`anima${i}`))));
    scheduler.start();
    await waitFor("three running", () => runs.live.size === 3);
    runs.releaseAll();
    await scheduler.runUntilDrained();
    expect(runs.started).toHaveLength(10);
    expect(runs.maxGlobal).toBe(3);
  });

  it("cancels a queued job without running it, and still notifies", async () => {
    const { scheduler, runs, animaDir, jobOf } = await setup();
    runs.auto = OK;
    const { job } = await scheduler.submit(jobInput("alice"));
    const other = (await scheduler.submit(jobInput("alice"))).job;
    expect(await scheduler.cancel("alice", job.id)).toMatchObject({ status: "cancelled" });
    await scheduler.runUntilDrained();
    expect(runs.started.map((j) => j.id)).toEqual([other.id]);
    expect((await jobOf(job)).status).toBe("cancelled");
    expect(readFileSync(noticePath(animaDir("alice"), job.id), "utf8")).toContain("- Status: cancelled\n");
  });

  it("cancels a running job through its abort signal", async () => {
    const { scheduler, runs, jobOf } = await setup();
    const { job } = await scheduler.submit(jobInput("alice"));
    scheduler.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    const { ctx } = runs.live.get(job.id)!;
    void aborted(ctx.signal).then(() => runs.release(job.id, { ok: false, error: { type: "ExecutionError", message: "stopped" } }));
    expect(await scheduler.cancel("alice", job.id)).toMatchObject({ status: "running", cancelRequested: true });
    await waitFor("the job cancelled", async () => (await jobOf(job)).status === "cancelled");
    expect(ctx.signal.reason).toMatchObject({ type: "ExecutionError" });
    expect(scheduler.stats.cancelled).toBe(1);
  });

  it("forcefully ends a run that ignores its abort signal after the grace period, freeing the slot", async () => {
    const { store, animaDir, jobOf } = await setup();
    const ignored: string[] = [];
    const scheduler = new JobScheduler({
      store,
      animaDirOf: animaDir,
      concurrency: 1,
      cancelGraceMs: 50,
      pollIntervalMs: 20,
      runJob: async (job) => {
        ignored.push(job.id);
        return job.argsJson === "{}" ? OK : new Promise<JobRunResult>(() => undefined); // never settles
      },
    });
    cleanups.push(() => scheduler.stop());
    const { job: stuck } = await scheduler.submit(jobInput("alice"));
    const { job: next } = await scheduler.submit(jobInput("alice", { argsJson: "{}" }));
    scheduler.start();
    await waitFor("the stuck job running", () => ignored.length === 1);
    await scheduler.cancel("alice", stuck.id);
    await waitFor("the next job done", async () => (await jobOf(next)).status === "succeeded");
    expect((await jobOf(stuck)).status).toBe("cancelled");
  });

  it("sees a cancel requested through another store instance at its next heartbeat", async () => {
    const { scheduler, runs, jobOf, openOther } = await setup({ leaseMs: 600, heartbeatIntervalMs: 30 });
    const { job } = await scheduler.submit(jobInput("alice"));
    scheduler.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    void aborted(runs.live.get(job.id)!.ctx.signal).then(() =>
      runs.release(job.id, { ok: false, error: { type: "ExecutionError", message: "stopped" } }),
    );
    await openOther().requestCancel("alice", job.id);
    await waitFor("the job cancelled", async () => (await jobOf(job)).status === "cancelled");
  });

  it("fails a job that exceeds its timeout, cooperative or not", async () => {
    const { store, animaDir, jobOf } = await setup();
    const scheduler = new JobScheduler({
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
    const { job: polite } = await scheduler.submit(jobInput("alice", { timeoutMs: 80 }));
    const { job: stubborn } = await scheduler.submit(jobInput("alice", { timeoutMs: 80, argsJson: "{}" }));
    await scheduler.runUntilDrained();
    for (const job of [polite, stubborn]) {
      expect(await jobOf(job)).toMatchObject({ status: "failed", error: { type: "Timeout", message: "job exceeded its timeout of 80 ms" } });
    }
  });

  it("stores progress reported while running", async () => {
    const { scheduler, runs, jobOf } = await setup();
    const { job } = await scheduler.submit(jobInput("alice"));
    scheduler.start();
    await waitFor("the job running", () => runs.live.has(job.id));
    const { ctx } = runs.live.get(job.id)!;
    for (let i = 1; i <= 10; i++) ctx.reportProgress(i / 10, `step ${i}`);
    await waitFor("the last progress stored", async () => (await jobOf(job)).progress?.message === "step 10");
    expect((await jobOf(job)).progress).toEqual({ fraction: 1, message: "step 10" });
  });

  it("renews the lease of a long job so no other worker recovers it", async () => {
    const { scheduler, runs, jobOf, openOther } = await setup({ leaseMs: 400, heartbeatIntervalMs: 40 });
    const { job } = await scheduler.submit(jobInput("alice", { maxAttempts: 3 }));
    scheduler.start();
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
    const { scheduler, runs, jobOf, openOther } = await setup({ concurrency: 1, leaseMs: 600, heartbeatIntervalMs: 30 });
    const { job } = await scheduler.submit(jobInput("alice", { maxAttempts: 2, retryBackoffMs: 0 }));
    scheduler.start();
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
    await waitFor("the first run released", () => scheduler.stats.released === 1);
    expect(await jobOf(job)).toMatchObject({ status: "running", leaseOwner: "someone-else", attempts: 2 });
  });

  it("recovers a dead worker's jobs: retried when allowed, else interrupted with a notice", async () => {
    const { store, scheduler, runs, animaDir, jobOf, openOther } = await setup({ maintenanceIntervalMs: 30, noticeGraceMs: 50 });
    runs.auto = OK;
    const { job: retryable } = await store.submit(jobInput("alice", { maxAttempts: 2, retryBackoffMs: 10 }));
    const { job: once } = await store.submit(jobInput("alice"));
    // A worker claims both and dies: it never renews its leases.
    expect(await openOther().claim({ owner: "dead", leaseMs: 100, limit: 2 })).toHaveLength(2);
    await scheduler.runUntilDrained();
    expect(await jobOf(retryable)).toMatchObject({ status: "succeeded", attempts: 2 });
    expect(await jobOf(once)).toMatchObject({ status: "interrupted", attempts: 1, error: { type: "ExecutionError" } });
    expect(readFileSync(noticePath(animaDir("alice"), once.id), "utf8")).toContain("- Status: interrupted\n");
  });

  it("hands running jobs back at shutdown when asked to abort them", async () => {
    const { scheduler, runs, jobOf, animaDir } = await setup();
    const { job: retryable } = await scheduler.submit(jobInput("alice", { maxAttempts: 2 }));
    const { job: once } = await scheduler.submit(jobInput("alice"));
    scheduler.start();
    await waitFor("both running", () => runs.live.size === 2);
    for (const { ctx, job } of runs.live.values()) {
      void aborted(ctx.signal).then(() => runs.release(job.id, { ok: false, error: { type: "ExecutionError", message: "aborted" } }));
    }
    await scheduler.stop({ abortRunning: true });
    expect(await jobOf(retryable)).toMatchObject({ status: "queued", attempts: 1 });
    expect(await jobOf(once)).toMatchObject({ status: "interrupted" });
    expect(existsSync(noticePath(animaDir("alice"), once.id))).toBe(true);
    expect(scheduler.stats.released).toBe(2);
  });

  it("purges finished jobs past the retention period", async () => {
    const { scheduler, runs, jobOf } = await setup({ retentionMs: 1, purgeIntervalMs: 1, maintenanceIntervalMs: 20 });
    runs.auto = OK;
    const { job } = await scheduler.submit(jobInput("alice"));
    scheduler.start();
    await waitFor("the job purged", async () => (await jobOf(job)) === undefined);
  });

  it("waits in drain mode for a job that is backing off before its retry", async () => {
    const { store, scheduler, runs, jobOf, openOther } = await setup({ maintenanceIntervalMs: 20 });
    runs.auto = OK;
    const { job } = await store.submit(jobInput("alice", { maxAttempts: 2, retryBackoffMs: 150 }));
    await openOther().claim({ owner: "dead", leaseMs: 1, limit: 1 });
    await scheduler.runUntilDrained();
    expect(await jobOf(job)).toMatchObject({ status: "succeeded", attempts: 2 });
  });

  it("rejects invalid options", async () => {
    const { store } = await setup();
    const base = { store, runJob: async () => OK, animaDirOf: (a: string) => a };
    expect(() => new JobScheduler({ ...base, concurrency: 0 })).toThrow(/concurrency/);
    expect(() => new JobScheduler({ ...base, leaseMs: 100, heartbeatIntervalMs: 100 })).toThrow(/heartbeatIntervalMs/);
  });
});
