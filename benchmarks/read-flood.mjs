// Host-side limits under a read flood (issue: capability reads exhaust the host's memory). An attacker
// Anima keeps 64 reads of a 10 MiB file in flight for the whole of a long call; beside it a quiet Anima
// calls a trivial tool. Measured in the same run, as ratios against the quiet Anima unloaded:
//   - host RSS growth during the attack (aim ≤ 256 MB)
//   - host event-loop lag p99 during the attack (aim ≤ 100 ms)
//   - the quiet Anima's call p99 under attack / unloaded (aim ≤ 2×)
// The floor beside it: the same quiet calls while the attacker only spins (`for (;;) {}`, no capability
// calls) for as long. On a 2-core machine the attacker's sandbox process holds one core either way; what the
// read flood adds over that floor is the host's own work for the reads.
// Run: `npm run build && node --no-node-snapshot benchmarks/read-flood.mjs [--quick]`.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createHost } from "../dist/src/index.js";

const quick = process.argv.includes("--quick");
const ATTACK_MS = quick ? 6_000 : 15_000;
const QUIET_CALLS = quick ? 200 : 500;

const FLOOD = `
import { fs, logger } from "@animaworks/tool";
export function get_tool_schemas() { return [{ name: "flood_read", description: "read flood", input_schema: { type: "object", properties: {} } }]; }
export async function dispatch() {
  let bytes = 0;
  for (;;) {
    const reads = [];
    for (let i = 0; i < 64; i++) reads.push(fs.readFile("big.txt").then((t) => { bytes += t.length; logger.info("read " + bytes); }, () => {}));
    await Promise.all(reads);
  }
}`;
const SPIN = `
export function get_tool_schemas() { return [{ name: "spin_run", description: "spin", input_schema: { type: "object", properties: {} } }]; }
export function dispatch() { for (;;) {} }`;
const QUIET = `
export function get_tool_schemas() { return [{ name: "quiet_ping", description: "ping", input_schema: { type: "object", properties: {} } }]; }
export function dispatch() { return "pong"; }`;

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

// Per hop: each call's wall time, and the part of it from the host's dispatch to a sandbox process until
// its answer arrived (`durationMs`, host-measured); the rest is the host before and after (its queue and
// event loop). `hops` keeps both for the slowest 1 % of calls.
const hops = new WeakMap();
async function quietCalls(host, count, pauseMs) {
  const samples = [];
  const split = [];
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    const result = await host.call("quiet", "quiet_ping", {});
    const wall = Number(process.hrtime.bigint() - start) / 1e6;
    samples.push(wall);
    split.push({ wall, sandbox: result.durationMs });
    if (result.status !== "ok") throw new Error(`quiet call failed: ${JSON.stringify(result)}`);
    if (pauseMs) await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  samples.sort((a, b) => a - b);
  const slowest = split.sort((a, b) => b.wall - a.wall).slice(0, Math.max(1, Math.floor(count / 100)));
  hops.set(samples, slowest.map(({ wall, sandbox }) => `${wall.toFixed(1)} = host ${(wall - sandbox).toFixed(1)} + sandbox ${sandbox.toFixed(1)}`));
  return samples;
}

const dir = mkdtempSync(join(tmpdir(), "awt-bench-flood-"));
try {
  for (const anima of ["eve", "quiet"]) mkdirSync(join(dir, "animas", anima, "tools"), { recursive: true });
  writeFileSync(join(dir, "animas/eve/tools/flood.ts"), FLOOD);
  writeFileSync(join(dir, "animas/eve/tools/spin.ts"), SPIN);
  writeFileSync(join(dir, "animas/eve/big.txt"), "x".repeat(10 * 1024 * 1024));
  writeFileSync(join(dir, "animas/quiet/tools/quiet.ts"), QUIET);
  let attackerBytes = 0;
  const onLog = (record) => {
    const match = /^read (\d+)$/.exec(record.message);
    if (match) attackerBytes = Number(match[1]);
  };
  const host = createHost({ dataDir: dir, timeoutMs: ATTACK_MS, onLog });
  await quietCalls(host, 50, 0); // warm
  const unloaded = await quietCalls(host, QUIET_CALLS, 5);

  const underAttack = async (tool) => {
    const lag = monitorEventLoopDelay({ resolution: 10 });
    const rssBefore = process.memoryUsage().rss;
    let rssMax = rssBefore;
    const sampler = setInterval(() => (rssMax = Math.max(rssMax, process.memoryUsage().rss)), 20);
    const attack = host.call("eve", tool, {});
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // let the attack build up
    lag.enable();
    const samples = await quietCalls(host, QUIET_CALLS, 5);
    lag.disable();
    const result = await attack;
    clearInterval(sampler);
    return { samples, lag, rssGrowth: rssMax - rssBefore, result };
  };
  const spin = await underAttack("spin_run");
  attackerBytes = 0;
  const flood = await underAttack("flood_read");
  const loaded = flood.samples;
  const attackResult = flood.result;
  await host.close();

  const p99 = (s) => percentile(s, 99);
  const report = {
    attack: attackResult.status === "error" ? attackResult.error_type : attackResult.status,
    attackerReadMBPerSecond: Math.round(attackerBytes / 1e6 / (ATTACK_MS / 1000)),
    rssGrowthMB: Math.round(flood.rssGrowth / 1e6),
    eventLoopLagP99Ms: { floorSpin: Math.round(spin.lag.percentile(99) / 1e6), readFlood: Math.round(flood.lag.percentile(99) / 1e6) },
    quietP50Ms: { unloaded: +percentile(unloaded, 50).toFixed(2), floorSpin: +percentile(spin.samples, 50).toFixed(2), readFlood: +percentile(loaded, 50).toFixed(2) },
    quietP99Ms: { unloaded: +p99(unloaded).toFixed(2), floorSpin: +p99(spin.samples).toFixed(2), readFlood: +p99(loaded).toFixed(2) },
    quietP99Ratio: { floorSpin: +(p99(spin.samples) / p99(unloaded)).toFixed(2), readFlood: +(p99(loaded) / p99(unloaded)).toFixed(2) },
    slowestQuietCallsMs: { unloaded: hops.get(unloaded), floorSpin: hops.get(spin.samples), readFlood: hops.get(loaded) },
  };
  console.log(JSON.stringify(report, null, 2));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
