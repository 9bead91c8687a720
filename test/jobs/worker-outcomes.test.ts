import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ToolHostError } from "../../src/errors.js";
import { noticeDir, noticePath } from "../../src/jobs/notices.js";
import { type JobRunResult, JobWorker } from "../../src/jobs/worker.js";
import { jobInput, tempDir, waitFor } from "./helpers.js";
import { OK, workerHarness } from "./worker-harness.js";

/**
 * How a run's end becomes the job's outcome: results and failures recorded, completion notices written
 * (or dropped for an Anima that is gone), progress stored while the job runs.
 */
describe("JobWorker: outcomes, notices and progress", () => {
  const { setup, cleanups } = workerHarness();

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
    mkdirSync(join(parent.dir, "bob")); // the folder of Animas holds others: it is not a mount that is down
    const worker = new JobWorker({ store, animaDirOf: () => gone, runJob: async () => OK, onLog: (r) => logs.push(r.message) });
    const { job } = await store.submit(jobInput("alice"));
    await worker.run({ untilDrained: true });
    expect((await jobOf(job)).notifiedAt).toBeDefined(); // not retried forever
    expect(existsSync(gone)).toBe(false);
    expect(logs.join("\n")).toMatch(/dropped: Anima folder .* no longer exists/);
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
});
