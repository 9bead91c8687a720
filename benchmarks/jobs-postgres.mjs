// Background jobs on PostgreSQL against the embedded SQLite store, in the same run (store path: the store
// and the worker with a trivial runner, no sandbox). Needs dist/ (`npm run build`) and PostgreSQL on
// 127.0.0.1:5432 (or $PG_ADMIN_URL). Run: `node benchmarks/jobs-postgres.mjs [--quick] [--json]`.
// Figures, for each store:
//   - durable submit p50/p99: one submit at a time, no worker running (floor: a bare INSERT into a
//     one-column table, and for SQLite an fsync'd file write, both in this run);
//   - submit → claimed: one submit at a time with an idle worker waiting; from the submit call to the
//     start of the job's run;
//   - end-to-end jobs/s with one worker and with two (each its own store instance, as two processes or
//     machines would have), while 8 submitters add N jobs one by one; from the first submit to the last
//     completion (the peers' measure in ../shared/bench/pg-peers.mjs).
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { PostgresJobStore } from "../dist/src/jobs/postgres-store.js";
import { JobWorker } from "../dist/src/jobs/worker.js";
import { SqliteJobStore } from "../dist/src/jobs/sqlite-store.js";

const quick = process.argv.includes("--quick");
const SUBMITS = quick ? 200 : 1_000;
const LATENCY_SAMPLES = quick ? 50 : 200;
const JOBS = quick ? 2_000 : 5_000;
const SUBMITTERS = 8;
const CONCURRENCY = 8;
const ANIMAS = 10;
const ADMIN_URL = process.env.PG_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

const CODE = "export function dispatch() { return 'ok'; }";
const HASH = createHash("sha256").update(CODE).digest("hex");
const input = (i) => ({ anima: `anima${i % ANIMAS}`, tool: "bench", action: "noop", schemaName: "bench_noop", argsJson: `{"n":${i}}`, bundleHash: HASH });

const pct = (samples, p) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};
const round = (value, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

async function freshDatabase() {
  const name = `awt_bench_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: ADMIN_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

async function timeEach(count, fn) {
  const samples = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await fn(i);
    samples.push(performance.now() - start);
  }
  return { p50Ms: round(pct(samples, 50), 3), p99Ms: round(pct(samples, 99), 3) };
}

/** A worker on `store` whose runner calls `onRun(job)`; polling at 1 s, as a real worker. */
function worker(store, onRun) {
  return new JobWorker({
    store,
    runJob: async (job) => {
      onRun(job);
      return { ok: true, result: "ok" };
    },
    animaDirOf: () => "/nonexistent",
    concurrency: CONCURRENCY,
    perAnimaConcurrency: CONCURRENCY,
    pollIntervalMs: 1_000,
    notices: false,
  });
}

async function submitToClaim(makeStore) {
  const store = await makeStore();
  const started = new Map();
  const running = worker(store, (job) => started.get(job.id)?.(performance.now()));
  running.start();
  await new Promise((resolve) => setTimeout(resolve, 300)); // listening
  const samples = [];
  const submitter = await makeStore();
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const t0 = performance.now();
    let resolveRun;
    const ran = new Promise((resolve) => (resolveRun = resolve));
    const { job } = await submitter.submit(input(i));
    started.set(job.id, resolveRun);
    const t1 = await Promise.race([ran, new Promise((resolve) => setTimeout(() => resolve(undefined), 5_000))]);
    if (t1 === undefined) throw new Error("a job was not claimed within 5 s");
    samples.push(t1 - t0);
  }
  await running.stop();
  await submitter.close();
  await store.close();
  return { p50Ms: round(pct(samples, 50), 2), p99Ms: round(pct(samples, 99), 2) };
}

async function endToEnd(makeStore, workers) {
  const stores = [];
  let done = 0;
  let allDone;
  const finished = new Promise((resolve) => (allDone = resolve));
  const running = [];
  for (let w = 0; w < workers; w++) {
    const store = await makeStore();
    stores.push(store);
    running.push(worker(store, () => ++done === JOBS && allDone()));
  }
  const submitter = await makeStore();
  for (const w of running) w.start();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: SUBMITTERS }, async () => {
      while (next < JOBS) await submitter.submit(input(next++));
    }),
  );
  await Promise.race([finished, new Promise((_, reject) => setTimeout(() => reject(new Error(`only ${done} of ${JOBS} jobs ran`)), 120_000))]);
  const jobsPerS = JOBS / ((performance.now() - t0) / 1000);
  for (const w of running) await w.stop();
  for (const store of [...stores, submitter]) await store.close();
  return Math.round(jobsPerS);
}

async function main() {
  const results = { jobs: JOBS, submitters: SUBMITTERS, concurrencyPerWorker: CONCURRENCY };
  const db = await freshDatabase();
  const dir = mkdtempSync(join(tmpdir(), "awt-jobs-pg-"));
  try {
    // Floor: a bare INSERT, one at a time.
    const floor = new pg.Pool({ connectionString: db.url, max: 8 });
    await floor.query("CREATE TABLE floor (id bigserial PRIMARY KEY, payload text)");
    results.insertFloor = await timeEach(SUBMITS, (i) => floor.query("INSERT INTO floor (payload) VALUES ($1)", [`{"n":${i}}`]));
    await floor.end();

    let schema = 0;
    const stores = {
      postgres: async () => {
        const store = new PostgresJobStore({ url: db.url, schema: `bench_${schema}`, maxConnections: 8 });
        await store.putBundle(HASH, CODE);
        return store;
      },
      sqlite: async () => {
        const store = new SqliteJobStore({ path: join(dir, `bench_${schema}.db`) });
        await store.putBundle(HASH, CODE);
        return store;
      },
    };
    for (const [name, make] of Object.entries(stores)) {
      schema++;
      const store = await make();
      for (let i = 0; i < 20; i++) await store.submit(input(i));
      const submit = await timeEach(SUBMITS, (i) => store.submit(input(i)));
      await store.close();
      schema++;
      const claim = await submitToClaim(make);
      schema++;
      const one = await endToEnd(make, 1);
      schema++;
      const two = await endToEnd(make, 2);
      results[name] = { submit, submitToClaimed: claim, jobsPerSecOneWorker: one, jobsPerSecTwoWorkers: two, twoVsOne: round(two / one) };
    }
    results.postgres.submitVsInsertFloor = round(results.postgres.submit.p50Ms / results.insertFloor.p50Ms);
  } finally {
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(JSON.stringify(results, null, process.argv.includes("--json") ? 0 : 2));
}

await main();
