// Two or more builds side by side in ONE process: each build's host (its own dist/, its own sandbox
// processes) serves the same trivial tool, and short blocks of calls alternate between them, so that the
// machine's speed of the moment (which moves a figure 15–40 % between separate runs here) weighs on every
// build alike. The host-side code of every build runs on this process's event loop, so host CPU per call
// is compared too. Usage (each DIR a checkout with `npm ci` done, which builds it):
//   node --no-node-snapshot --no-concurrent-osr benchmarks/builds-ab.mjs DIR DIR [...] [--rounds 30] [--json]
// Options: --rounds N   alternations (default 30; each runs BLOCK_CALLS one at a time, then PIPELINED_CALLS
//                       with PIPELINE_DEPTH in flight, on every build, in an order reversed every round)
//          --json       print the results as JSON as well
// Results and how to read them: benchmarks/README.md.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const ROUNDS = option("--rounds", 30);
const builds = args.filter((arg, index) => !arg.startsWith("--") && !(index > 0 && args[index - 1] === "--rounds"));
if (builds.length < 2) throw new Error("give two or more checkouts (each with npm ci done)");

/** Calls one at a time per block, each timed. */
const BLOCK_CALLS = 300;
/** Calls per pipelined block, and how many are in flight at once. */
const PIPELINED_CALLS = 4_000;
const PIPELINE_DEPTH = 128;
const WARM_UP_CALLS = 500;

const TOOL = `
export function get_tool_schemas() {
  return [{ name: "bench_echo", description: "Echo n back.", input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }];
}
export function dispatch(name, args) { return args.n + 1; }
`;

function percentile(samples, p) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function checkedCall(host, n) {
  const result = await host.call("bench", "bench_echo", { n });
  if (result.status !== "ok") throw new Error(`bench tool failed: ${JSON.stringify(result)}`);
}

async function main() {
  const runs = [];
  try {
    for (const dir of builds) {
      const { createHost } = await import(join(resolve(dir), "dist", "src", "index.js"));
      const dataDir = mkdtempSync(join(tmpdir(), "awt-builds-ab-"));
      mkdirSync(join(dataDir, "animas", "bench", "tools"), { recursive: true });
      writeFileSync(join(dataDir, "animas", "bench", "tools", "bench.mjs"), TOOL);
      const host = createHost({ dataDir, isolation: "process", sandboxProcesses: 2, onLog: () => {} });
      runs.push({ build: dir, host, dataDir, warmUs: [], callsPerSecond: [] });
      for (let i = 0; i < WARM_UP_CALLS; i++) await checkedCall(host, i);
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (const run of round % 2 === 0 ? runs : [...runs].reverse()) {
        for (let i = 0; i < BLOCK_CALLS; i++) {
          const start = process.hrtime.bigint();
          await checkedCall(run.host, i);
          run.warmUs.push(Number(process.hrtime.bigint() - start) / 1e3);
        }
        let next = 0;
        const start = process.hrtime.bigint();
        await Promise.all(
          Array.from({ length: PIPELINE_DEPTH }, async () => {
            while (next < PIPELINED_CALLS) await checkedCall(run.host, next++);
          }),
        );
        run.callsPerSecond.push(PIPELINED_CALLS / (Number(process.hrtime.bigint() - start) / 1e9));
      }
    }
  } finally {
    for (const run of runs) {
      await run.host.close();
      rmSync(run.dataDir, { recursive: true, force: true });
    }
  }
  const first = runs[0];
  const results = runs.map((run) => ({
    build: run.build,
    warmP50Us: Math.round(percentile(run.warmUs, 50) * 10) / 10,
    warmP90Us: Math.round(percentile(run.warmUs, 90) * 10) / 10,
    pipelinedCallsPerSecond: Math.round(percentile(run.callsPerSecond, 50)),
    warmRatioToFirst: Math.round((percentile(run.warmUs, 50) / percentile(first.warmUs, 50)) * 1000) / 1000,
    pipelinedRatioToFirst: Math.round((percentile(run.callsPerSecond, 50) / percentile(first.callsPerSecond, 50)) * 1000) / 1000,
  }));
  console.log(
    `node ${process.version}, ${ROUNDS} rounds of ${BLOCK_CALLS} calls one at a time and ${PIPELINED_CALLS} pipelined (${PIPELINE_DEPTH} in flight) per build`,
  );
  for (const r of results)
    console.log(
      `${r.build}: warm p50 ${r.warmP50Us} µs (p90 ${r.warmP90Us}, ${r.warmRatioToFirst}× the first), pipelined ${r.pipelinedCallsPerSecond} calls/s (${r.pipelinedRatioToFirst}× the first)`,
    );
  if (args.includes("--json")) console.log(JSON.stringify({ rounds: ROUNDS, results }, null, 2));
}

await main();
