// Background jobs through the whole host path: `JobService.submit` (validation, pinned bundle, durable
// store) and a worker (`runWorker`: claim, lease, sandbox process, isolate, result, notice) for trivial
// jobs of a real tool, against the same calls made directly with `host.call` at the same concurrency, in
// the same run (these machines are noisy: the ratio is the figure). Needs dist/ (`npm run build`).
// Run: `node --no-node-snapshot benchmarks/jobs-host.mjs [--quick] [--json]`.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const quick = process.argv.includes("--quick");
const JOBS = quick ? 500 : 3_000;
const ANIMAS = 4;
const CONCURRENCY = 32;

let api;
try {
  api = await import("../dist/src/index.js");
} catch (error) {
  console.error(`benchmarks/jobs-host.mjs needs dist/: run \`npm run build\` first (${error.message})`);
  process.exit(1);
}
const { createHost, JobService } = api;

const TOOL = `
export const EXECUTION_PROFILE = { noop: { background_eligible: true } };
export function get_tool_schemas() {
  return [{ name: "bench_noop", description: "does nothing", input_schema: { type: "object", properties: { n: { type: "integer" } } } }];
}
export function dispatch(name, args) { return "ok " + args.n; }
`;

const elapsedMs = (start) => Number(process.hrtime.bigint() - start) / 1e6;
const round = (value, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;
const anima = (i) => `anima${i % ANIMAS}`;

async function direct(host, count) {
  let next = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        const i = next++;
        const result = await host.call(anima(i), "bench_noop", { n: i });
        if (result.status !== "ok") throw new Error(`direct call failed: ${JSON.stringify(result)}`);
      }
    }),
  );
  return count / (elapsedMs(start) / 1000);
}

async function throughJobs(service, count, notices) {
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: count }, (_, i) => service.submit(anima(i), "bench_noop", { n: i })));
  const submittedMs = elapsedMs(start);
  const stats = await service.runWorker({ untilDrained: true });
  const totalMs = elapsedMs(start);
  if (stats.succeeded !== count) throw new Error(`${stats.succeeded} of ${count} jobs succeeded (${JSON.stringify(stats)})`);
  return { jobsPerSec: count / (totalMs / 1000), submitShare: submittedMs / totalMs, notices };
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), "awt-jobs-host-bench-"));
  for (let a = 0; a < ANIMAS; a++) {
    mkdirSync(join(dataDir, "animas", anima(a), "tools"), { recursive: true });
    writeFileSync(join(dataDir, "animas", anima(a), "tools", "bench.ts"), TOOL);
  }
  const host = createHost({ dataDir, isolation: "process", onLog: () => {} });
  const results = { jobs: JOBS, animas: ANIMAS, concurrency: CONCURRENCY };
  try {
    await direct(host, 200); // warm-up: bundles, descriptions, pooled isolates
    for (const notices of [false, true]) {
      const service = new JobService({
        host,
        worker: { concurrency: CONCURRENCY, perAnimaConcurrency: CONCURRENCY, pollIntervalMs: 5, notices },
        idleCheckIntervalMs: 20,
      });
      const queued = await throughJobs(service, JOBS, notices);
      await service.close();
      const directPerSec = await direct(host, JOBS);
      results[notices ? "withNotices" : "noNotices"] = {
        jobsPerSec: Math.round(queued.jobsPerSec),
        directCallsPerSec: Math.round(directPerSec),
        jobsVsDirectRatio: round(queued.jobsPerSec / directPerSec, 3),
        submitShareOfTime: round(queued.submitShare),
      };
    }
  } finally {
    await host.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(`jobs through the whole host path (${JOBS} trivial jobs over ${ANIMAS} Animas, concurrency ${CONCURRENCY}, process isolation)`);
  for (const label of ["noNotices", "withNotices"]) {
    const r = results[label];
    console.log(
      `${label === "withNotices" ? "with notices   " : "without notices"}: ${r.jobsPerSec} jobs/s vs ${r.directCallsPerSec} direct host.call/s ` +
        `(ratio ${r.jobsVsDirectRatio}; submitting is ${Math.round(r.submitShareOfTime * 100)}% of the time)`,
    );
  }
  if (process.argv.includes("--json")) console.log(JSON.stringify(results, null, 2));
}

await main();
