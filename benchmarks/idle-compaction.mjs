// Idle isolates after the host compacted them (src/isolation/isolate/idle-compaction.ts), through
// `createHost` with default options and all Animas in one cordon (as tenancy.mjs's density figures):
// ANIMAS Animas, each with one tool that does real work per call (builds and parses a JSON document of
// ≈ 230 KB) or, with --small, tenancy.mjs's tool that adds one. Figures, in one run:
//   - RSS per warm tool (host plus sandbox processes, over the host with one tool warm) right after
//     the calls, and again once the host compacted the idle isolates; V8's heap as the warm pool
//     measures it, before and after;
//   - a warm call p50 (the same tool called again and again) against the first call of each tool after
//     its isolate was compacted: what a compaction costs the next call (run on a build without
//     compaction, with warm-pools.mjs beside it, the same figure is the first call after as long idle:
//     its baseline).
// Run: `npm run build && node --no-node-snapshot benchmarks/idle-compaction.mjs [--animas N] [--small] [--json]`
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createHost } from "../dist/src/index.js";
import { rssKb, sandboxRssMb } from "./process-memory.mjs";
import { compactionsSettled, warmPoolTotals } from "./warm-pools.mjs";

const { values: flags } = parseArgs({ options: { animas: { type: "string" }, small: { type: "boolean" }, json: { type: "boolean" } } });
const ANIMAS = Number(flags.animas ?? 100);
const WARM_CALLS = 2_000;

const WORKING_TOOL = `export function get_tool_schemas() {
  return [{ name: "work_run", description: "Parses a document.", input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }];
}
export function dispatch(name, args) {
  const doc = JSON.stringify(Array.from({ length: 3000 }, (_, i) => ({ id: i, title: "item " + i, tags: ["a", "b"], score: i / 7 })));
  const parsed = JSON.parse(doc);
  return { n: args.n, over: parsed.filter((item) => item.score > 100).length, bytes: doc.length };
}
`;
const SMALL_TOOL = `export function get_tool_schemas() {
  return [{ name: "work_run", description: "Adds one.", input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }];
}
export function dispatch(name, args) { return { n: args.n + 1 }; }
`;

const round = (value, digits = 3) => Number(value.toFixed(digits));
const p50 = (samples) => round([...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)]);
const totalRssMb = (host) => rssKb(process.pid) / 1024 + sandboxRssMb(host);
async function timed(call) {
  const started = performance.now();
  const result = await call();
  if (result.status !== "ok") throw new Error(`call failed: ${JSON.stringify(result)}`);
  return performance.now() - started;
}
async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), "awt-compaction-"));
  const animas = Array.from({ length: ANIMAS }, (_, i) => `c${String(i).padStart(4, "0")}`);
  for (const anima of ["hot", ...animas]) {
    mkdirSync(join(dataDir, "animas", anima, "tools"), { recursive: true });
    writeFileSync(join(dataDir, "animas", anima, "tools", "work.mjs"), flags.small ? SMALL_TOOL : WORKING_TOOL);
  }
  const host = createHost({ dataDir, cordons: "all", onLog: () => {} });
  try {
    await host.call("hot", "work_run", { n: 0 });
    const emptyMb = totalRssMb(host);
    for (const anima of animas) await host.call(anima, "work_run", { n: 0 });
    for (const anima of animas) await host.call(anima, "work_run", { n: 1 });
    const loadedMb = totalRssMb(host);
    const loadedPool = await warmPoolTotals(host);
    const { waitedMs } = await compactionsSettled(host);
    const compactedMb = totalRssMb(host);
    const compactedPool = await warmPoolTotals(host);
    // What a compaction costs the next call: each tool's first call now, against a warm call.
    const afterCompaction = [];
    for (const anima of animas) afterCompaction.push(await timed(() => host.call(anima, "work_run", { n: 2 })));
    for (let i = 0; i < 200; i++) await host.call("hot", "work_run", { n: i });
    const warm = [];
    for (let i = 0; i < WARM_CALLS; i++) warm.push(await timed(() => host.call("hot", "work_run", { n: i })));
    const results = {
      animas: ANIMAS,
      tool: flags.small ? "adds one" : "builds and parses ≈ 230 KB of JSON",
      rssPerWarmToolMb: { afterCalls: round((loadedMb - emptyMb) / ANIMAS), compacted: round((compactedMb - emptyMb) / ANIMAS) },
      heapPerIdleIsolateMb: {
        afterCalls: round(loadedPool.idleBytes / loadedPool.idleIsolates / 2 ** 20),
        compacted: round(compactedPool.idleBytes / compactedPool.idleIsolates / 2 ** 20),
      },
      compactions: compactedPool.compactions - loadedPool.compactions,
      settledAfterMs: waitedMs,
      warmCallP50Ms: p50(warm),
      firstCallAfterCompactionP50Ms: p50(afterCompaction),
    };
    results.firstCallAfterCompactionRatio = round(results.firstCallAfterCompactionP50Ms / results.warmCallP50Ms, 2);
    console.log(flags.json ? JSON.stringify(results) : JSON.stringify(results, null, 2));
  } finally {
    await host.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
