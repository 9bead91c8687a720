// Host-side limits under a read flood (issue: capability reads exhaust the host's memory). An attacker
// Anima keeps 64 reads of a 10 MiB file in flight; beside it a quiet Anima calls a trivial tool, one call
// every 5 ms. Measured in the same run, as ratios against the quiet Anima unloaded:
//   - host RSS growth during the attack (aim ≤ 256 MB)
//   - host event-loop lag p99 during the attack (aim ≤ 100 ms)
//   - the quiet Anima's call p99 under attack / unloaded (aim ≤ 2×)
// The floor beside it: the same quiet calls while an attacker only spins (`for (;;) {}`, no capability
// calls). On a 2-core machine the attacker's sandbox process holds one core either way; what the read
// flood adds over that floor is the host's own work for the reads.
//
// Each round measures the three in turn (unloaded, spin, flood), and the rounds repeat, so that the
// machine's drift over a run weighs on all three alike; percentiles are over the calls of all rounds.
// Each attack is its Anima's first call (a fresh Anima per attack: nothing is demoted beforehand), stopped
// by its caller once the quiet calls are done. The quiet calls of its first second (the build-up, while
// the host finds the attacker over its share and demotes it) are reported apart, as `buildUp`.
// Run: `npm run build && node --no-node-snapshot benchmarks/read-flood.mjs [--quick]`.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createHost } from "../dist/src/index.js";

const quick = process.argv.includes("--quick");
const ROUNDS = quick ? 2 : 4;
const QUIET_CALLS = quick ? 150 : 250;
const BUILD_UP_MS = 1_000;

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
const sorted = (calls) => calls.map((c) => c.wall).sort((a, b) => a - b);
const p99 = (calls) => percentile(sorted(calls), 99);

// Each call's wall time, and the part of it from the host's dispatch to a sandbox process until its
// answer arrived (`durationMs`, host-measured); the rest is the host before and after (its queue and
// event loop). Calls that start within `buildUpMs` are kept apart (`buildUp`), and `count` calls follow.
async function quietCalls(host, count, pauseMs, buildUpMs = 0) {
  const calls = [];
  const buildUp = [];
  const startedAt = performance.now();
  while (calls.length < count) {
    const during = performance.now() - startedAt < buildUpMs;
    const start = process.hrtime.bigint();
    const result = await host.call("quiet", "quiet_ping", {});
    (during ? buildUp : calls).push({ wall: Number(process.hrtime.bigint() - start) / 1e6, sandbox: result.durationMs });
    if (result.status !== "ok") throw new Error(`quiet call failed: ${JSON.stringify(result)}`);
    if (pauseMs) await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  return Object.assign(calls, { buildUp });
}

/** The slowest 1 % of `calls`, split at the host's dispatch. */
function slowest(calls) {
  return [...calls]
    .sort((a, b) => b.wall - a.wall)
    .slice(0, Math.max(1, Math.floor(calls.length / 100)))
    .map(({ wall, sandbox }) => `${wall.toFixed(1)} = host ${(wall - sandbox).toFixed(1)} + sandbox ${sandbox.toFixed(1)}`);
}

const dir = mkdtempSync(join(tmpdir(), "awt-bench-flood-"));
try {
  const anima = (name, tools) => {
    mkdirSync(join(dir, "animas", name, "tools"), { recursive: true });
    for (const [file, code] of Object.entries(tools)) writeFileSync(join(dir, "animas", name, file), code);
  };
  anima("quiet", { "tools/quiet.ts": QUIET });
  const big = "x".repeat(10 * 1024 * 1024);
  for (let round = 1; round <= ROUNDS; round++) {
    anima(`spin${round}`, { "tools/spin.ts": SPIN });
    anima(`flood${round}`, { "tools/flood.ts": FLOOD, "big.txt": big });
  }
  const attackerBytes = new Map();
  const onLog = (record) => {
    const match = /^read (\d+)$/.exec(record.message);
    if (match) attackerBytes.set(record.anima, Number(match[1]));
  };
  const host = createHost({ dataDir: dir, timeoutMs: 60_000, onLog });
  await quietCalls(host, 50, 0); // warm

  const underAttack = async (attacker, tool) => {
    const lag = monitorEventLoopDelay({ resolution: 10 });
    const rssBefore = process.memoryUsage().rss;
    let rssMax = rssBefore;
    const sampler = setInterval(() => (rssMax = Math.max(rssMax, process.memoryUsage().rss)), 20);
    const stop = new AbortController();
    const startedAt = performance.now();
    const attack = host.call(attacker, tool, {}, { signal: stop.signal });
    // The quiet Anima keeps calling through the build-up (the host demotes the attacker meanwhile);
    // the lag is measured with the calls that count.
    setTimeout(() => lag.enable(), BUILD_UP_MS);
    const calls = await quietCalls(host, QUIET_CALLS, 5, BUILD_UP_MS);
    lag.disable();
    stop.abort();
    const result = await attack;
    const seconds = (performance.now() - startedAt) / 1000;
    clearInterval(sampler);
    if (result.status !== "error" || result.error_type !== "ExecutionError") throw new Error(`attack did not run until stopped: ${JSON.stringify(result)}`);
    return { calls, lagP99Ms: lag.percentile(99) / 1e6, rssGrowth: rssMax - rssBefore, readMBPerSecond: (attackerBytes.get(attacker) ?? 0) / 1e6 / seconds };
  };

  const unloaded = [];
  const spins = [];
  const floods = [];
  for (let round = 1; round <= ROUNDS; round++) {
    unloaded.push(await quietCalls(host, QUIET_CALLS, 5));
    spins.push(await underAttack(`spin${round}`, "spin_run"));
    floods.push(await underAttack(`flood${round}`, "flood_read"));
  }
  await host.close();

  const all = (rounds) => rounds.flat();
  const base = all(unloaded);
  const spinCalls = all(spins.map((r) => r.calls));
  const floodCalls = all(floods.map((r) => r.calls));
  const round2 = (x) => +x.toFixed(2);
  const report = {
    rounds: ROUNDS,
    quietCallsPerPhase: QUIET_CALLS,
    attackerReadMBPerSecond: floods.map((r) => Math.round(r.readMBPerSecond)),
    rssGrowthMB: floods.map((r) => Math.round(r.rssGrowth / 1e6)),
    eventLoopLagP99Ms: { floorSpin: spins.map((r) => Math.round(r.lagP99Ms)), readFlood: floods.map((r) => Math.round(r.lagP99Ms)) },
    quietP50Ms: {
      unloaded: round2(percentile(sorted(base), 50)),
      floorSpin: round2(percentile(sorted(spinCalls), 50)),
      readFlood: round2(percentile(sorted(floodCalls), 50)),
    },
    quietP99Ms: { unloaded: round2(p99(base)), floorSpin: round2(p99(spinCalls)), readFlood: round2(p99(floodCalls)) },
    quietP99Ratio: { floorSpin: round2(p99(spinCalls) / p99(base)), readFlood: round2(p99(floodCalls) / p99(base)) },
    quietP99RatioPerRound: {
      floorSpin: spins.map((r, i) => round2(p99(r.calls) / p99(unloaded[i]))),
      readFlood: floods.map((r, i) => round2(p99(r.calls) / p99(unloaded[i]))),
    },
    buildUp: {
      quietCalls: floods.reduce((n, r) => n + r.calls.buildUp.length, 0) + spins.reduce((n, r) => n + r.calls.buildUp.length, 0),
      slowestMs: {
        floorSpin: spins.map((r) => round2(Math.max(...r.calls.buildUp.map((c) => c.wall)))),
        readFlood: floods.map((r) => round2(Math.max(...r.calls.buildUp.map((c) => c.wall)))),
      },
    },
    slowestQuietCallsMs: { unloaded: slowest(base), floorSpin: slowest(spinCalls), readFlood: slowest(floodCalls) },
  };
  console.log(JSON.stringify(report, null, 2));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
