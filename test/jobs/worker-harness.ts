import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach } from "vitest";
import { type JobRunContext, type JobRunResult, JobWorker, type JobWorkerOptions } from "../../src/jobs/worker.js";
import { SqliteJobStore } from "../../src/jobs/sqlite-store.js";
import type { Job } from "../../src/jobs/store.js";
import { gate, tempDir, withBundle } from "./helpers.js";

/**
 * What the JobWorker tests (test/jobs/worker-*.test.ts) share: a runner the test drives, and a worker on a
 * fresh SQLite store with short intervals, everything it made undone after each test.
 */

export const OK: JobRunResult = { ok: true, result: "done" };

/** A runner the test drives: each run waits until released, unless `auto` says how runs end. */
export class Runs {
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

/**
 * Registers the clean-up after each test of the calling file and returns `setup`, which makes a store, a
 * `Runs` and a worker (its options overridden by `options`), and `cleanups`, for what a test makes itself.
 */
export function workerHarness() {
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
    cleanups.push(
      dir.cleanup,
      () => store.close(),
      () => worker.stop({ abortRunning: true }),
      () => runs.releaseAll(),
    );
    const jobOf = async (job: Job) => (await store.get(job.anima, job.id))!;
    const openOther = () => {
      const other = new SqliteJobStore({ path });
      cleanups.push(() => other.close());
      return other;
    };
    return { store, worker, runs, logs, animaDir, jobOf, openOther };
  }

  return { setup, cleanups };
}
