// Benchmarks for background jobs (src/jobs). Every figure comes with a ratio against the same work done
// without the queue, measured in the same run, because these machines are noisy. Needs dist/ (run
// `npm run build` first). Run: `node benchmarks/jobs.mjs`. Options:
//   --quick        fewer jobs (a smoke run)
//   --json         print the results as JSON as well
//   --dir DIR      where the databases go. Default: the OS temp dir, i.e. a real disk, so "durable" means
//                  an fsync reached it. Pass /dev/shm to see the cost without the disk.
import { createHash, randomBytes } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const quick = process.argv.includes("--quick");
const dirFlag = process.argv.indexOf("--dir");
const root = dirFlag > 0 ? process.argv[dirFlag + 1] : tmpdir();
const SUBMITS = quick ? 200 : 1_000;
const JOBS = quick ? 5_000 : 20_000;
const ANIMAS = 10;
const CONCURRENCY = 64;

let jobsModule;
try {
  jobsModule = {
    ...(await import("../dist/src/jobs/sqlite-store.js")),
    ...(await import("../dist/src/jobs/worker.js")),
    ...(await import("../dist/src/jobs/notices.js")),
  };
} catch (error) {
  console.error(`benchmarks/jobs.mjs needs dist/: run \`npm run build\` first (${error.message})`);
  process.exit(1);
}
const { SqliteJobStore, JobWorker, writeNotice } = jobsModule;

const CODE = "export function dispatch() { return 'ok'; }";
const HASH = createHash("sha256").update(CODE).digest("hex");
const input = (i) => ({
  anima: `anima${i % ANIMAS}`,
  tool: "bench",
  action: "noop",
  schemaName: "bench_noop",
  argsJson: JSON.stringify({ n: i }),
  bundleHash: HASH,
});
const trivialRunner = async (job) => ({ ok: true, result: `ok ${job.argsJson}` });

const madeDirs = new Set();
function animaDir(path) {
  if (!madeDirs.has(path)) mkdirSync(path, { recursive: true });
  madeDirs.add(path);
  return path;
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
const round = (value, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;
const elapsedMs = (start) => Number(process.hrtime.bigint() - start) / 1e6;

async function timeEach(count, fn) {
  const samples = [];
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    await fn(i);
    samples.push(Number(process.hrtime.bigint() - start) / 1e3);
  }
  return samples.sort((a, b) => a - b);
}

/** Baseline for a durable submit: write the job descriptor to its own file, fsync it, rename it in place. */
function durableFileWrite(dir, i) {
  const temp = join(dir, `.${i}.tmp`);
  const fd = openSync(temp, "w");
  writeSync(fd, JSON.stringify({ id: randomBytes(6).toString("hex"), ...input(i), status: "queued" }));
  fsyncSync(fd);
  closeSync(fd);
  renameSync(temp, join(dir, `${i}.json`));
}

async function benchSubmit(work) {
  const store = new SqliteJobStore({ path: join(work, "submit.db") });
  await store.putBundle(HASH, CODE);
  const files = join(work, "files");
  mkdirSync(files);
  for (let i = 0; i < 20; i++) await store.submit(input(i)); // warm-up
  const queue = await timeEach(SUBMITS, (i) => store.submit(input(i)));
  const baseline = await timeEach(SUBMITS, (i) => durableFileWrite(files, i));
  const burstStart = process.hrtime.bigint();
  await Promise.all(Array.from({ length: SUBMITS * 5 }, (_, i) => store.submit(input(i))));
  const burstMs = elapsedMs(burstStart);
  await store.close();
  return {
    submitP50Us: round(percentile(queue, 50), 1),
    submitP95Us: round(percentile(queue, 95), 1),
    baselineFsyncFileP50Us: round(percentile(baseline, 50), 1),
    submitVsFsyncFileRatio: round(percentile(queue, 50) / percentile(baseline, 50)),
    burstSubmitsPerSec: Math.round((SUBMITS * 5) / (burstMs / 1000)),
  };
}

/** Runs `count` jobs through store + worker: submit all, then a drain worker runs them to the end. */
async function throughQueue(work, name, count, notices) {
  const store = new SqliteJobStore({ path: join(work, `${name}.db`) });
  await store.putBundle(HASH, CODE);
  const worker = new JobWorker({
    store,
    runJob: trivialRunner,
    animaDirOf: (anima) => animaDir(join(work, name, anima)),
    concurrency: CONCURRENCY,
    perAnimaConcurrency: CONCURRENCY,
    pollIntervalMs: 5,
    notices,
  });
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: count }, (_, i) => store.submit(input(i))));
  const submittedMs = elapsedMs(start);
  const stats = await worker.run({ untilDrained: true });
  const totalMs = elapsedMs(start);
  await store.close();
  if (stats.succeeded !== count) throw new Error(`${name}: ${stats.succeeded} of ${count} jobs succeeded`);
  return { jobsPerSec: count / (totalMs / 1000), submitShare: submittedMs / totalMs };
}

/** The same work without the queue: call the runner (and write the notice) directly, same concurrency. */
async function withoutQueue(work, name, count, notices) {
  let next = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        const i = next++;
        const job = { id: randomBytes(6).toString("hex"), ...input(i), status: "succeeded" };
        const outcome = await trivialRunner(job);
        if (notices) await writeNotice(animaDir(join(work, name, job.anima)), { ...job, result: outcome.result });
      }
    }),
  );
  return count / (elapsedMs(start) / 1000);
}

async function main() {
  const work = mkdtempSync(join(root, "awt-jobs-bench-"));
  const results = { dir: root, jobs: JOBS, concurrency: CONCURRENCY };
  try {
    results.submit = await benchSubmit(work);
    for (const notices of [false, true]) {
      const label = notices ? "withNotices" : "noNotices";
      const queued = await throughQueue(work, `q-${label}`, JOBS, notices);
      const direct = await withoutQueue(work, `d-${label}`, JOBS, notices);
      results[label] = {
        queueJobsPerSec: Math.round(queued.jobsPerSec),
        directJobsPerSec: Math.round(direct),
        queueVsDirectRatio: round(queued.jobsPerSec / direct, 3),
        submitShareOfTime: round(queued.submitShare),
      };
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const s = results.submit;
  console.log(`job benchmarks (${JOBS} trivial jobs over ${ANIMAS} Animas, concurrency ${CONCURRENCY}, databases in ${root})`);
  console.log(
    `durable submit: p50 ${s.submitP50Us} µs, p95 ${s.submitP95Us} µs; fsync'd file write p50 ${s.baselineFsyncFileP50Us} µs ` +
      `(ratio ${s.submitVsFsyncFileRatio}); burst of concurrent submits: ${s.burstSubmitsPerSec}/s (group commit)`,
  );
  for (const label of ["noNotices", "withNotices"]) {
    const r = results[label];
    console.log(
      `end-to-end ${label === "withNotices" ? "with notices   " : "without notices"}: ${r.queueJobsPerSec} jobs/s through the store ` +
        `vs ${r.directJobsPerSec} jobs/s direct (ratio ${r.queueVsDirectRatio}; submitting is ${Math.round(r.submitShareOfTime * 100)}% of the time)`,
    );
  }
  if (process.argv.includes("--json")) console.log(JSON.stringify(results, null, 2));
}

await main();
