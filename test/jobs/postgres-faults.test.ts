import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresJobStore } from "../../src/jobs/postgres-store.js";
import { JobWorker } from "../../src/jobs/worker.js";
import type { Job } from "../../src/jobs/store.js";
import { type TestDatabase, createTestDatabase } from "../helpers/postgres.js";
import { BUNDLE_CODE, BUNDLE_HASH, jobInput, waitFor } from "./helpers.js";

/**
 * Faults of a PostgreSQL job store, with two workers (each on its own store instance, as two
 * machines have): the server dropping every connection mid-run costs no job and completes none twice,
 * and the workers listen again (a cancel afterwards still arrives at once); a worker that dies with jobs
 * running has them recovered by the other after its lease.
 */
let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

async function dropEveryConnection(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()");
    return result.rowCount ?? 0;
  } finally {
    await client.end();
  }
}

/**
 * A caller's request right after the drop may meet a pooled connection the server already ended, before
 * the pool heard of it: that request fails (a connection error, nothing written) and the broken connection
 * is discarded. The caller tries again; at most once per pooled connection (4).
 */
async function retryingStaleConnections<T>(request: () => Promise<T>): Promise<T> {
  for (let failures = 0; ; failures++) {
    try {
      return await request();
    } catch (error) {
      if (failures >= 4 || !/terminat/i.test(String((error as Error).message))) throw error;
    }
  }
}

function worker(
  schema: string,
  runs: Map<string, number>,
  runJob?: (job: Job, signal: AbortSignal) => Promise<{ ok: true; result: string }>,
  timing: { leaseMs: number; heartbeatIntervalMs: number; cancelGraceMs?: number } = { leaseMs: 1_500, heartbeatIntervalMs: 300 },
) {
  const store = new PostgresJobStore({ url: database.url, schema });
  const worker = new JobWorker({
    store,
    runJob: async (job, context) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      if (runJob) return runJob(job, context.signal);
      await new Promise((resolve) => setTimeout(resolve, 5));
      return { ok: true, result: "ok" };
    },
    animaDirOf: () => "/nonexistent",
    concurrency: 4,
    perAnimaConcurrency: 4,
    ...timing,
    pollIntervalMs: 200,
    notices: false,
    onLog: (r) => {
      if (process.env.PGF_DEBUG) console.error("LOG", r.message);
    },
  });
  return { store, worker };
}

describe("PostgresJobStore faults", () => {
  it("the server dropping every connection mid-run costs no job, completes none twice, and the workers listen again", async () => {
    const schema = "faults_drop";
    const submitter = new PostgresJobStore({ url: database.url, schema });
    await submitter.putBundle(BUNDLE_HASH, BUNDLE_CODE);
    const runs = new Map<string, number>();
    const workers = [worker(schema, runs), worker(schema, runs)];
    for (const w of workers) w.worker.start();
    const ids: string[] = [];
    for (let i = 0; i < 120; i++) ids.push((await submitter.submit(jobInput(`anima${i % 5}`))).job.id);
    await waitFor("some jobs to finish", () => runs.size >= 30, 15_000);
    expect(await dropEveryConnection(database.url)).toBeGreaterThan(0);
    for (let i = 0; i < 40; i++) ids.push((await retryingStaleConnections(() => submitter.submit(jobInput(`anima${i % 5}`)))).job.id);
    const done = async () =>
      (await Promise.all(ids.map(async (id) => (await retryingStaleConnections(() => submitter.get(`anima${ids.indexOf(id) % 5}`, id)))?.status))).every(
        (s) => s === "succeeded",
      );
    await waitFor("every job to succeed", done, 30_000, 100);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(runs.size).toBe(ids.length);

    // Listening again: a cancel reaches the worker running the job well before its heartbeat (10 s) would
    // (its run's signal aborts 100 ms after the request: the grace).
    const held = new Map<string, number>();
    const runner = worker(
      schema,
      held,
      (_job, signal) => new Promise((resolve) => signal.addEventListener("abort", () => resolve({ ok: true, result: "stopped" }))),
      { leaseMs: 30_000, heartbeatIntervalMs: 10_000, cancelGraceMs: 100 },
    );
    for (const w of workers) await w.worker.stop();
    runner.worker.start();
    await dropEveryConnection(database.url);
    await new Promise((resolve) => setTimeout(resolve, 2_500)); // past RELISTEN_AFTER_MS and LISTEN_RETRY_MS
    const { job } = await submitter.submit(jobInput("alice"));
    await waitFor("the job to run", () => held.has(job.id), 10_000);
    const cancelledAt = Date.now();
    await submitter.requestCancel("alice", job.id);
    await waitFor("the job to end", async () => (await submitter.get("alice", job.id))?.status !== "running", 5_000, 10);
    // Through the restored LISTEN, not the next heartbeat (10 s): a bound half that, so a busy machine passes.
    expect(Date.now() - cancelledAt).toBeLessThan(5_000);
    expect((await submitter.get("alice", job.id))?.status).toBe("succeeded"); // finished within its grace: reported as it is
    await runner.worker.stop();
    for (const w of [...workers, runner]) await w.store.close();
    await submitter.close();
  }, 60_000);

  it("a worker that dies with jobs running has them recovered by the other after its lease", async () => {
    const schema = "faults_death";
    const submitter = new PostgresJobStore({ url: database.url, schema });
    await submitter.putBundle(BUNDLE_HASH, BUNDLE_CODE);
    const runs = new Map<string, number>();
    // The first worker takes the jobs and never finishes them (its process "dies": its store goes away).
    const dying = worker(schema, runs, () => new Promise(() => {}));
    dying.worker.start();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await submitter.submit(jobInput("alice", { maxAttempts: 2, retryBackoffMs: 0 }))).job.id);
    await waitFor("the first worker to run them", () => runs.size === 3, 10_000);
    await dying.store.close(); // no more heartbeats, no completions
    const runsAfter = new Map<string, number>();
    const survivor = worker(schema, runsAfter);
    survivor.worker.start();
    await waitFor(
      "the survivor to finish them",
      async () => (await Promise.all(ids.map((id) => submitter.get("alice", id)))).every((j) => j?.status === "succeeded"),
      20_000,
      100,
    );
    expect([...runsAfter.values()]).toEqual([1, 1, 1]);
    expect((await submitter.get("alice", ids[0]!))?.attempts).toBe(2);
    await survivor.worker.stop();
    await survivor.store.close();
    await submitter.close();
  }, 40_000);
});
