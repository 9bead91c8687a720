// Many tenants on one host (issue: "1,000 tools as fast as one"). Through `createHost` with default
// options: ANIMAS Animas with 2 small tools each (their own sources, so their own bundles). Figures:
//   - hot call: one tool called again and again (the baseline every ratio uses), in the same run;
//   - first call of each tool (bundle, describe, isolate), p50;
//   - round-robin over every tool, one call after another: p50/p99 and the ratio to the hot call, beside
//     two floors measured in the same run: bare isolated-vm isolates called in turn, and bare Node IPC to
//     as many idle processes as the round-robin wakes;
//   - RSS per loaded tool: host plus sandbox processes, after the round-robin, over an empty host; and
//     again once the host compacted the idle isolates;
//   - cold isolate floor: a bare isolated-vm isolate + context, and our cold path without bundling;
//   - noisy neighbour: tenant B's p99 unloaded, beside spinning processes outside the host (the floor),
//     and while tenant A keeps 8 `while (true) {}` calls in flight (each stopped at its 500 ms timeout
//     and sent again).
//   - with one cordon per Anima (`--cordons anima`): the first call of each new Anima with a spare
//     process ready (its cordon's first process), and RSS per warm Anima.
// Run: `npm run build && node --no-node-snapshot benchmarks/tenancy.mjs [--quick] [--json] [--animas N]
// [--cordons all|anima] [--tools-per-isolate N]` (default all: every Anima in one cordon, the density figures
// of before cordons; tools per isolate: the host's default, 4).
import { fork, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import ivm from "isolated-vm";
import { createHost } from "../dist/src/index.js";
import { sandboxOf } from "../dist/src/host.js";
import { rssKb, sandboxRssMb } from "./process-memory.mjs";
import { compactionsSettled } from "./warm-pools.mjs";

const { values: flags } = parseArgs({
  options: {
    quick: { type: "boolean" },
    json: { type: "boolean" },
    animas: { type: "string" },
    rounds: { type: "string" },
    cordons: { type: "string" },
    "tools-per-isolate": { type: "string" },
  },
});
const CORDONS = flags.cordons ?? "all";
/** One Anima's tools whose contexts a warm isolate may hold (HostOptions.toolsPerIsolate); undefined: the host's default. */
const TOOLS_PER_ISOLATE = flags["tools-per-isolate"] === undefined ? undefined : Number(flags["tools-per-isolate"]);
const hostOptions = TOOLS_PER_ISOLATE === undefined ? {} : { toolsPerIsolate: TOOLS_PER_ISOLATE };
if (CORDONS !== "all" && CORDONS !== "anima") throw new Error(`--cordons ${CORDONS}: all or anima`);
const ANIMAS = Number(flags.animas ?? (flags.quick ? 100 : 500));
const ROUNDS = Number(flags.rounds ?? (flags.quick ? 2 : 4));
const HOT_CALLS = flags.quick ? 1_000 : 3_000;
/** How long tenant B calls in each window (unloaded, floor, with A saturating), ms; and how many rounds. */
const NEIGHBOUR_MS = flags.quick ? 2_000 : 3_000;
const WINDOWS = flags.quick ? 1 : 3;
const NOISY_IN_FLIGHT = 8;

const toolSource = (anima, tool) => `// ${anima}'s ${tool}
export function get_tool_schemas() {
  return [{ name: "${tool}_run", description: "Adds one.", input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }];
}
export function dispatch(name, args) { return { tool: "${tool}", anima: "${anima}", n: args.n + 1 }; }
`;
const SPIN = `
export function get_tool_schemas() { return [{ name: "spin_run", description: "Spins.", input_schema: { type: "object", properties: {} } }]; }
export function dispatch() { while (true) {} }
`;

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const round = (value, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;
const stats = (samples) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50Ms: round(percentile(sorted, 50), 3), p99Ms: round(percentile(sorted, 99), 3), maxMs: round(sorted.at(-1), 2) };
};

let failures = 0;
async function timed(fn) {
  const start = process.hrtime.bigint();
  const result = await fn();
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result && result.status !== "ok") {
    failures++;
    if (failures <= 5) console.error("call failed:", JSON.stringify(result).slice(0, 300));
  }
  return ms;
}

const totalRssMb = (host) => rssKb(process.pid) / 1024 + sandboxRssMb(host);

async function bareIsolateFloor(count) {
  const samples = [];
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    const isolate = new ivm.Isolate({ memoryLimit: 128 });
    const context = await isolate.createContext();
    await context.eval("1");
    samples.push(Number(process.hrtime.bigint() - start) / 1e6);
    isolate.dispose();
  }
  return stats(samples);
}

/**
 * The floor of touching another isolate: bare isolated-vm in this process, `isolates` isolates of
 * `contextsPerIsolate` contexts each (as the warm pool packs one Anima's tools), one small call into each
 * context in turn (a JSON argument parsed, a JSON string back, as a tool call's envelope), against the same
 * call into one context again and again. What the machine's caches charge for another isolate's heap and
 * code, before anything of ours runs.
 */
async function isolateRoundRobinFloor(isolates, contextsPerIsolate, count) {
  const made = [];
  const entries = [];
  for (let i = 0; i < isolates; i++) {
    const isolate = new ivm.Isolate({ memoryLimit: 128 });
    made.push(isolate);
    for (let j = 0; j < contextsPerIsolate; j++) {
      const context = isolate.createContextSync();
      context.evalSync("globalThis.call = async (payload) => JSON.stringify({ ok: true, value: { n: JSON.parse(payload).n + 1 } });");
      entries.push(context.global.getSync("call", { reference: true }));
    }
  }
  const { one, inTurn, ratioP50 } = await oneAgainstInTurn(entries, count, (entry, i) =>
    entry.apply(undefined, [`{"n":${i}}`], { result: { promise: true, copy: true } }),
  );
  for (const isolate of made) isolate.dispose();
  return { isolates, contextsPerIsolate, oneContext: one, roundRobin: inTurn, ratioP50 };
}

/**
 * `count` calls to the first of `targets` one after another, then `count` calls to each target in turn
 * (each after a warm-up of at least 500 calls, and of every target), timed one by one.
 */
async function oneAgainstInTurn(targets, count, call) {
  const measure = async (over) => {
    for (let i = 0; i < Math.max(500, over); i++) await call(targets[i % over], i);
    const samples = [];
    for (let i = 0; i < count; i++) {
      const start = process.hrtime.bigint();
      await call(targets[i % over], i);
      samples.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    return stats(samples);
  };
  const one = await measure(1);
  const inTurn = await measure(targets.length);
  return { one, inTurn, ratioP50: round(inTurn.p50Ms / one.p50Ms) };
}

/**
 * The floor of a call that goes to another process each time: a small message round trip to `processes`
 * idle echo processes (Node's IPC channel, each child answering on its own), one after another in turn,
 * against the same round trip to one process. What waking an idle process costs by itself, before any
 * isolate runs.
 */
async function processRoundRobinFloor(dir, processes, count) {
  const echo = join(dir, "echo-child.cjs");
  writeFileSync(echo, "process.on('message', (m) => process.send(m)); process.on('disconnect', () => process.exit(0));\n");
  const children = [];
  for (let i = 0; i < processes; i++) {
    const child = fork(echo, [], { stdio: ["ignore", "ignore", "inherit", "ipc"], serialization: "json" });
    await new Promise((resolve) => child.once("spawn", resolve));
    children.push(child);
  }
  const roundTrip = (child, i) =>
    new Promise((resolve) => {
      child.once("message", resolve);
      child.send({ n: i });
    });
  const { one, inTurn, ratioP50 } = await oneAgainstInTurn(children, count, roundTrip);
  for (const child of children) child.kill();
  return { oneProcess: one, roundRobin: inTurn, ratioP50 };
}

async function until(check, timeoutMs) {
  const deadline = performance.now() + timeoutMs;
  while (!check() && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), "awt-tenancy-"));
  const animas = Array.from({ length: ANIMAS }, (_, i) => `t${String(i).padStart(4, "0")}`);
  const tools = [];
  for (const anima of animas) {
    const dir = join(dataDir, "animas", anima, "tools");
    mkdirSync(dir, { recursive: true });
    for (const tool of ["alpha", "beta"]) {
      writeFileSync(join(dir, `${tool}.mjs`), toolSource(anima, tool));
      tools.push([anima, `${tool}_run`]);
    }
  }
  mkdirSync(join(dataDir, "animas", "noisy", "tools"), { recursive: true });
  writeFileSync(join(dataDir, "animas", "noisy", "tools", "spin.mjs"), SPIN);
  // Tenant B: four Animas, so that some share a sandbox process with tenant A whatever the placement.
  const quiet = ["quiet", "quiet1", "quiet2", "quiet3"];
  for (const anima of quiet) {
    mkdirSync(join(dataDir, "animas", anima, "tools"), { recursive: true });
    writeFileSync(join(dataDir, "animas", anima, "tools", "alpha.mjs"), toolSource(anima, "alpha"));
  }

  const results = { animas: ANIMAS, tools: tools.length, rounds: ROUNDS, cordons: CORDONS, toolsPerIsolate: TOOLS_PER_ISOLATE ?? "default" };
  const host = createHost({ dataDir, cordons: CORDONS, ...hostOptions, onLog: () => {} });
  try {
    const bareFloor = await bareIsolateFloor(flags.quick ? 50 : 200);
    await host.call("quiet", "alpha_run", { n: 1 });
    const emptyRssMb = totalRssMb(host);
    const emptySandboxMb = sandboxRssMb(host);

    // Hot call: the baseline.
    for (let i = 0; i < 500; i++) await host.call("quiet", "alpha_run", { n: i });
    const hot = [];
    for (let i = 0; i < HOT_CALLS; i++) hot.push(await timed(() => host.call("quiet", "alpha_run", { n: i })));
    results.hotCall = stats(hot);

    const first = [];
    const firstOfAnima = [];
    const seen = new Set();
    for (const [anima, tool] of tools) {
      const newAnima = !seen.has(anima);
      seen.add(anima);
      // A new Anima's cordon takes a spare process: measured with one ready, as a host between arrivals has.
      if (newAnima && CORDONS === "anima") await until(() => sandboxOf(host).sparesReady() > 0, 10_000);
      const ms = await timed(() => host.call(anima, tool, { n: 1 }));
      first.push(ms);
      if (newAnima) firstOfAnima.push(ms);
    }
    results.firstCall = stats(first);
    results.firstCallOfNewAnima = {
      ...stats(firstOfAnima),
      aim: CORDONS === "anima" ? "p50 ≤ 30 ms with a spare process ready" : "(one cordon: no process to start)",
    };

    const roundRobin = [];
    for (let r = 0; r < ROUNDS; r++) {
      for (const [anima, tool] of tools) roundRobin.push(await timed(() => host.call(anima, tool, { n: r })));
    }
    results.roundRobin = { ...stats(roundRobin), ratioP50VsHot: round(stats(roundRobin).p50Ms / results.hotCall.p50Ms), aim: "p50 ≤ 1.5× the hot call" };
    const roundRobinProcesses = CORDONS === "anima" ? ANIMAS : sandboxOf(host).pids().length;
    const loadedRssMb = totalRssMb(host);
    const loadedSandboxMb = sandboxRssMb(host);
    results.rss = {
      emptyHostMb: round(emptyRssMb, 1),
      loadedMb: round(loadedRssMb, 1),
      perLoadedToolMb: round((loadedRssMb - emptyRssMb) / tools.length, 3),
      perWarmAnimaMb: round((loadedRssMb - emptyRssMb) / ANIMAS, 2),
      ofWhichSandboxProcessesMb: round((loadedSandboxMb - emptySandboxMb) / tools.length, 3),
      aim: "≤ 1.5 MB per loaded tool",
    };
    // Again once the host compacted the idle isolates (idle-compaction.ts).
    const settled = await compactionsSettled(host);
    const compactedRssMb = totalRssMb(host);
    results.rss.compacted = {
      afterMs: settled.waitedMs,
      compactions: settled.compactions,
      perLoadedToolMb: round((compactedRssMb - emptyRssMb) / tools.length, 3),
      ofWhichSandboxProcessesMb: round((sandboxRssMb(host) - emptySandboxMb) / tools.length, 3),
    };
    // Cold isolates: the same loaded tools, on a host whose warm pool keeps nothing, so that every call
    // builds its isolate (bundles and descriptions come from the first host's on-disk cache).
    const coldHost = createHost({ dataDir, cordons: CORDONS, ...hostOptions, warmIsolatesMb: 1, onLog: () => {} });
    const coldTools = tools.slice(0, flags.quick ? 100 : 300);
    try {
      for (const [anima, tool] of coldTools) await coldHost.call(anima, tool, { n: 0 });
      const cold = [];
      for (const [anima, tool] of coldTools) cold.push(await timed(() => coldHost.call(anima, tool, { n: 1 })));
      const coldStats = stats(cold);
      results.coldIsolate = {
        bareIsolateAndContext: bareFloor,
        callBuildingItsIsolate: coldStats,
        ratioP50VsBare: round(coldStats.p50Ms / bareFloor.p50Ms),
        aim: "close to a bare isolate's creation",
      };
    } finally {
      await coldHost.close();
    }

    // Noisy neighbour: B alone, B beside spinners that are not the host's (the floor), and B while A
    // saturates; in WINDOWS rounds of the three, so that the machine's own swings hit all of them alike.
    await host.call("noisy", "spin_run", {}, { timeoutMs: 1 });
    for (const anima of quiet) await host.call(anima, "alpha_run", { n: 0 });
    const samples = { unloaded: [], floor: [], noisy: [] };
    const quietWindow = async (into) => {
      const end = performance.now() + NEIGHBOUR_MS;
      for (let i = 0; performance.now() < end; i++) {
        const anima = quiet[i % quiet.length];
        into.push(await timed(() => host.call(anima, "alpha_run", { n: i })));
      }
    };
    let noisyCalls = 0;
    const noisyOutcomes = {};
    let placement;
    for (let window = 0; window < WINDOWS; window++) {
      await quietWindow(samples.unloaded);
      // Floor: spinning processes at the low-priority process's scheduling class (SCHED_IDLE through
      // chrt, else nice 19): what the cores themselves give when something else keeps them busy.
      const spinners = Array.from({ length: 4 }, () =>
        existsSync("/usr/bin/chrt")
          ? spawn("/usr/bin/chrt", ["--idle", "0", process.execPath, "-e", "for (;;) {}"], { stdio: "ignore" })
          : spawn("nice", ["-n", "19", process.execPath, "-e", "for (;;) {}"], { stdio: "ignore" }),
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      await quietWindow(samples.floor);
      for (const spinner of spinners) spinner.kill("SIGKILL");
      let noisyRunning = true;
      const noisy = Array.from({ length: NOISY_IN_FLIGHT }, async () => {
        while (noisyRunning) {
          const result = await host.call("noisy", "spin_run", {}, { timeoutMs: 500 });
          noisyCalls++;
          const code = result.status === "ok" ? "ok" : result.error_type;
          noisyOutcomes[code] = (noisyOutcomes[code] ?? 0) + 1;
        }
      });
      // A's steady state: once its first calls (at normal priority, until the host sees them) ended.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await quietWindow(samples.noisy);
      const pids = sandboxOf(host).pids();
      const where = (anima) => {
        const pid = sandboxOf(host).pidFor(anima);
        if (CORDONS === "anima") return `own process ${pid}`;
        const index = pids.indexOf(pid);
        return index === 2 ? "low-priority" : `process ${index}`;
      };
      placement = Object.fromEntries(["noisy", ...quiet].map((anima) => [anima, where(anima)]));
      noisyRunning = false;
      await Promise.all(noisy);
    }
    const unloaded = { calls: samples.unloaded.length, ...stats(samples.unloaded) };
    const floor = { calls: samples.floor.length, ...stats(samples.floor) };
    const loaded = { calls: samples.noisy.length, ...stats(samples.noisy) };
    results.noisyNeighbour = {
      windows: WINDOWS,
      quietUnloaded: unloaded,
      quietBesideIdleSpinners: floor,
      quietWithNoisy: loaded,
      floorRatioP99: round(floor.p99Ms / unloaded.p99Ms),
      ratioP99: round(loaded.p99Ms / unloaded.p99Ms),
      noisyCalls,
      noisyOutcomes,
      placement,
      aim: "B's p99 with A saturating ≤ 2× B's p99 unloaded",
    };
    results.failedCalls = failures;
    // The round-robin's floors, last (isolates made and disposed here would stay in this process's RSS):
    // each call of the round-robin touches another isolate, and wakes another process (one cordon per
    // Anima: every call; one cordon: first calls alternate between its processes).
    const floorCalls = flags.quick ? 1_000 : 3_000;
    results.roundRobin.floorIsolates = await isolateRoundRobinFloor(ANIMAS, 2, floorCalls);
    results.roundRobin.floorIdleProcesses = await processRoundRobinFloor(dataDir, roundRobinProcesses, floorCalls);
  } finally {
    await host.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  if (flags.json) console.log(JSON.stringify(results));
  else console.log(JSON.stringify(results, null, 2));
}

await main();
