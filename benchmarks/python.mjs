// Python tools beside TypeScript tools, in one run, through `createHost` with default options (sandbox
// processes, one cordon per Anima). Figures:
//   - warm call p50/p95 of a trivial TypeScript tool and of the same tool in Python (the ratio is the
//     aim: ≤ 2×), alternating blocks so that both see the same machine;
//   - first call of a Python tool in a process whose interpreter snapshot exists (another Python tool
//     was loaded there before), bundle, describe, isolate and call: with a spare interpreter ready in
//     the process (describe takes it, the call takes the described isolate over), and one tool after
//     another with no wait (the spare of the one before is still starting: an interpreter restored);
//   - first call of a Python tool in a fresh host (a new sandbox process, no snapshot yet);
//   - a memory bomb (16 MB bytearrays until MemoryError, caught by the tool itself): how long from its
//     first allocation to the MemoryError, as the tool's own clock says, and how far it got; beside its
//     floor, measured right after each bomb in this process: the first touch of as much fresh WebAssembly
//     memory (what the bomb's allocations cost the machine: page faults, ≈ 2.7 ms per MB on these VMs);
//   - RSS per live interpreter: the sandbox processes' resident memory after K Python tools of one Anima
//     were called, over the same before them, per interpreter its process reports holding (idle in its
//     warm pool, spare or described).
// Run: `npm run build && node --no-node-snapshot benchmarks/python.mjs [--quick] [--json]`.
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { createHost } from "../dist/src/index.js";
import { sandboxOf } from "../dist/src/host.js";
import { sandboxRssMb } from "./process-memory.mjs";

const { values: flags } = parseArgs({ options: { quick: { type: "boolean" }, json: { type: "boolean" } } });
const WARM_CALLS = flags.quick ? 300 : 2_000;
const BLOCKS = 4;
const FIRST_CALLS = flags.quick ? 3 : 6;
const LIVE_INTERPRETERS = flags.quick ? 2 : 4;

const tsTool = (name) => `export function get_tool_schemas() {
  return [{ name: "${name}_run", description: "Adds one.", input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }];
}
export function dispatch(name, args) { return { n: args.n + 1 }; }
`;
const pyTool = (name) => `from __future__ import annotations


def get_tool_schemas() -> list[dict]:
    return [{"name": "${name}_run", "description": "Adds one.", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}]


def dispatch(name, args):
    args.pop("anima_dir", None)
    return {"n": args["n"] + 1}
`;

/** Time to first touch `mb` MB of fresh WebAssembly memory in this process, ms: the machine's cost of what a bomb allocates. */
function firstTouchMs(mb) {
  const memory = new WebAssembly.Memory({ initial: 1, maximum: 65_536 });
  const started = performance.now();
  memory.grow(mb * 16); // 64 KiB pages
  new Uint8Array(memory.buffer).fill(1);
  return performance.now() - started;
}

/** The warm-pool report of `anima`'s sandbox process, once `ready` holds for it (polled, at most 60 s). */
async function untilHeld(host, anima, ready) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const report = (await sandboxOf(host).warmPoolReport()).find((each) => each.cordon === `anima:${anima}`);
    if (report && ready(report)) return report;
    if (Date.now() > deadline) throw new Error(`${anima}'s process: not ready within 60 s (${JSON.stringify(report)})`);
    await sleep(20);
  }
}

const BOMB = `def get_tool_schemas():
    return [{"name": "py_bomb_run", "description": "Hoards.", "input_schema": {"type": "object", "properties": {}}}]


def dispatch(name, args):
    import time

    start = time.monotonic()
    hoard = []
    try:
        while True:
            hoard.append(bytearray(16 * 1024 * 1024))
    except MemoryError:
        stopped = time.monotonic() - start
    reached = 16 * len(hoard)
    hoard.clear()
    return {"stopped_ms": stopped * 1000, "reached_mb": reached}
`;

const percentile = (samples, p) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};
async function timed(host, anima, schema) {
  const start = process.hrtime.bigint();
  const result = await host.call(anima, schema, { n: 1 });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== "ok") throw new Error(`${schema}: ${JSON.stringify(result).slice(0, 300)}`);
  return ms;
}

const dir = mkdtempSync(join(tmpdir(), "awt-bench-python-"));
try {
  mkdirSync(join(dir, "animas", "bench", "tools"), { recursive: true });
  writeFileSync(join(dir, "animas", "bench", "tools", "ts_echo.ts"), tsTool("ts_echo"));
  writeFileSync(join(dir, "animas", "bench", "tools", "py_echo.py"), pyTool("py_echo"));
  for (let i = 0; i < FIRST_CALLS; i++) writeFileSync(join(dir, "animas", "bench", "tools", `py_first${i}.py`), pyTool(`py_first${i}`));
  for (let i = 0; i < FIRST_CALLS; i++) writeFileSync(join(dir, "animas", "bench", "tools", `py_next${i}.py`), pyTool(`py_next${i}`));
  mkdirSync(join(dir, "animas", "rss", "tools"), { recursive: true });
  writeFileSync(join(dir, "animas", "rss", "tools", "ts_base.ts"), tsTool("ts_base"));
  for (let i = 0; i < LIVE_INTERPRETERS; i++) writeFileSync(join(dir, "animas", "rss", "tools", `py_live${i}.py`), pyTool(`py_live${i}`));
  writeFileSync(join(dir, "animas", "bench", "tools", "py_bomb.py"), BOMB);
  mkdirSync(join(dir, "animas", "cold", "tools"), { recursive: true });
  writeFileSync(join(dir, "animas", "cold", "tools", "py_cold.py"), pyTool("py_cold"));

  // A fresh host's first Python call: a new sandbox process, an interpreter booted without a snapshot.
  const coldHost = createHost({ dataDir: dir, onLog: () => {} });
  const coldFirstMs = await timed(coldHost, "cold", "py_cold_run");
  await coldHost.close();

  const host = createHost({ dataDir: dir, onLog: () => {} });
  // Warm both (the Python one's process makes its snapshot here).
  for (let i = 0; i < 50; i++) {
    await timed(host, "bench", "ts_echo_run");
    await timed(host, "bench", "py_echo_run");
  }
  // The steady state of a process between calls: its spare interpreter booted (it boots in the
  // background after a Python tool's first call; measured while it boots, a Python call shares the
  // cores with that boot).
  await untilHeld(host, "bench", (report) => (report.spareInterpreters ?? 0) >= 1);
  const ts = [];
  const py = [];
  for (let block = 0; block < BLOCKS; block++) {
    for (let i = 0; i < WARM_CALLS / BLOCKS; i++) ts.push(await timed(host, "bench", "ts_echo_run"));
    for (let i = 0; i < WARM_CALLS / BLOCKS; i++) py.push(await timed(host, "bench", "py_echo_run"));
  }
  // First calls of new Python tools of the same Anima: its process already holds a snapshot. With a
  // spare interpreter ready, as a process has between a tool's first calls; then one after another.
  const firsts = [];
  for (let i = 0; i < FIRST_CALLS; i++) {
    await untilHeld(host, "bench", (report) => report.spareInterpreters > 0);
    firsts.push(await timed(host, "bench", `py_first${i}_run`));
  }
  const backToBack = [];
  for (let i = 0; i < FIRST_CALLS; i++) backToBack.push(await timed(host, "bench", `py_next${i}_run`));
  const bombs = [];
  const bombFloorsMs = [];
  for (let i = 0; i < 3; i++) {
    const result = await host.call("bench", "py_bomb_run", {});
    if (result.status !== "ok") throw new Error(`py_bomb_run: ${JSON.stringify(result).slice(0, 300)}`);
    bombs.push(JSON.parse(result.output));
    bombFloorsMs.push(firstTouchMs(bombs.at(-1).reached_mb));
  }

  // RSS per live interpreter: K Python tools of one Anima (its cordon's process, already running a
  // TypeScript tool), each with its interpreter warm, over that process before them.
  await timed(host, "rss", "ts_base_run");
  const before = sandboxRssMb(host);
  for (let i = 0; i < LIVE_INTERPRETERS; i++) await timed(host, "rss", `py_live${i}_run`);
  // Once its spare has started: every interpreter the process keeps is in the figure.
  const held = await untilHeld(host, "rss", (report) => report.spareInterpreters > 0);
  const interpreters = held.idleInterpreters + held.spareInterpreters;
  const after = sandboxRssMb(host);
  await host.close();

  const results = {
    warmTs: { p50: percentile(ts, 50), p95: percentile(ts, 95) },
    warmPython: { p50: percentile(py, 50), p95: percentile(py, 95) },
    ratioP50: percentile(py, 50) / percentile(ts, 50),
    firstCallWithSnapshot: { p50: percentile(firsts, 50), max: Math.max(...firsts) },
    firstCallBackToBack: { p50: percentile(backToBack, 50), max: Math.max(...backToBack) },
    firstCallColdHost: coldFirstMs,
    memoryBomb: { stoppedMs: bombs.map((bomb) => bomb.stopped_ms), reachedMb: bombs.map((bomb) => bomb.reached_mb), floorMs: bombFloorsMs },
    interpretersHeld: interpreters,
    rssPerInterpreterMb: (after - before) / interpreters,
  };
  console.log(
    `warm call p50: TypeScript ${results.warmTs.p50.toFixed(3)} ms, Python ${results.warmPython.p50.toFixed(3)} ms → ${results.ratioP50.toFixed(2)}× [aim ≤ 2×]`,
  );
  console.log(`warm call p95: TypeScript ${results.warmTs.p95.toFixed(3)} ms, Python ${results.warmPython.p95.toFixed(3)} ms`);
  console.log(
    `first call of a Python tool, a spare interpreter ready: p50 ${results.firstCallWithSnapshot.p50.toFixed(0)} ms, max ${results.firstCallWithSnapshot.max.toFixed(0)} ms [aim ≤ 150 ms]`,
  );
  console.log(
    `first call of a Python tool, one after another (no spare ready, the process's snapshot made): p50 ${results.firstCallBackToBack.p50.toFixed(0)} ms, max ${results.firstCallBackToBack.max.toFixed(0)} ms [aim ≤ 2,000 ms]`,
  );
  console.log(`first call of a Python tool in a fresh host (new process, no snapshot): ${results.firstCallColdHost.toFixed(0)} ms [aim ≤ 2,000 ms]`);
  console.log(
    `memory bomb stopped by MemoryError after ${results.memoryBomb.stoppedMs.map((ms) => ms.toFixed(0)).join(" / ")} ms, at ${results.memoryBomb.reachedMb.join(" / ")} MB [aim ≤ 500 ms]; floor (first touch of as much fresh WebAssembly memory here): ${results.memoryBomb.floorMs.map((ms) => ms.toFixed(0)).join(" / ")} ms`,
  );
  console.log(`RSS per live interpreter (in one sandbox process, ${interpreters} held): ${results.rssPerInterpreterMb.toFixed(1)} MB`);
  if (flags.json) console.log(JSON.stringify(results, null, 2));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
