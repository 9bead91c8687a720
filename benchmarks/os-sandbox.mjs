// Cost of the OS sandbox (bubblewrap around each sandbox process): the same host with osSandbox "off"
// and "required", measured in the same run, alternating, as ratios on/off. Aim: warm call and
// pipelined calls no more than 5 % worse. Run: `npm run build && node --no-node-snapshot benchmarks/os-sandbox.mjs [--quick]`.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHost } from "../dist/src/index.js";

const quick = process.argv.includes("--quick");
const WARM_CALLS = quick ? 1_000 : 5_000;
const PIPELINED_CALLS = quick ? 5_000 : 30_000;
const CAPABILITY_CALLS = quick ? 200 : 1_000;
const ROUNDS = quick ? 2 : 4;
const DEPTH = 256;

const TOOL = `
import { fs } from "@animaworks/tool";
export function get_tool_schemas() {
  return [
    { name: "osb_echo", description: "n + 1", input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } },
    { name: "osb_read", description: "n reads", input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } },
  ];
}
export async function dispatch(name, args) {
  if (name === "osb_echo") return args.n + 1;
  let total = 0;
  for (let i = 0; i < args.n; i++) total += (await fs.readFile("data.txt")).length;
  return total;
}`;

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function measure(dataDir, osSandbox) {
  const started = process.hrtime.bigint();
  const host = createHost({ dataDir, osSandbox, sandboxProcesses: 2, onLog: () => {} });
  const first = await host.call("bench", "osb_echo", { n: 1 });
  if (first.status !== "ok") throw new Error(JSON.stringify(first));
  const startMs = Number(process.hrtime.bigint() - started) / 1e6;
  for (let i = 0; i < 200; i++) await host.call("bench", "osb_echo", { n: i });
  const warm = [];
  for (let i = 0; i < WARM_CALLS; i++) {
    const t = process.hrtime.bigint();
    await host.call("bench", "osb_echo", { n: i });
    warm.push(Number(process.hrtime.bigint() - t) / 1e3);
  }
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: DEPTH }, async () => {
      while (next < PIPELINED_CALLS) await host.call("bench", "osb_echo", { n: next++ });
    }),
  );
  const perSecond = PIPELINED_CALLS / (Number(process.hrtime.bigint() - t0) / 1e9);
  const t1 = process.hrtime.bigint();
  await host.call("bench", "osb_read", { n: CAPABILITY_CALLS });
  const capabilityUs = Number(process.hrtime.bigint() - t1) / 1e3 / CAPABILITY_CALLS;
  await host.close();
  return { startMs, warmP50Us: median(warm), perSecond, capabilityUs };
}

const dir = mkdtempSync(join(tmpdir(), "awt-bench-osb-"));
try {
  mkdirSync(join(dir, "animas", "bench", "tools"), { recursive: true });
  writeFileSync(join(dir, "animas/bench/tools/osb.ts"), TOOL);
  writeFileSync(join(dir, "animas/bench/data.txt"), "x".repeat(1024));
  const runs = { off: [], required: [] };
  for (let round = 0; round < ROUNDS; round++)
    for (const mode of round % 2 ? ["required", "off"] : ["off", "required"]) runs[mode].push(await measure(dir, mode));
  const pick = (mode, key) => median(runs[mode].map((r) => r[key]));
  const row = (key, digits = 1) => ({
    off: +pick("off", key).toFixed(digits),
    on: +pick("required", key).toFixed(digits),
    ratio: +(pick("required", key) / pick("off", key)).toFixed(3),
  });
  console.log(
    JSON.stringify(
      {
        startToFirstCallMs: row("startMs"),
        warmCallP50Us: row("warmP50Us"),
        pipelinedCallsPerSecond: row("perSecond", 0),
        capabilityCallUs: row("capabilityUs"),
      },
      null,
      2,
    ),
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
