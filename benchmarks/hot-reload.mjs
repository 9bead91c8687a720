// Hot reload: save → new version serving latency, and stale results over rapid-edit bursts.
// Run after `npm run build`: node --no-node-snapshot benchmarks/hot-reload.mjs [--bursts 100]
// Each burst saves the tool 4 times in quick succession (atomic saves, like an editor), then calls it
// until the last version answers. A settled call that returns an older version counts as stale.
// Baseline: the same call with no edit (a warm call), measured in the same run.
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHost } from "../dist/src/index.js";

const burstsArg = process.argv.indexOf("--bursts");
const BURSTS = burstsArg > 0 ? Number(process.argv[burstsArg + 1]) : 100;
const version = (n) => `export function get_tool_schemas(){return [{name:"live_get",description:"v"}]}\nexport function dispatch(){return "v${n}"}\n`;

const dataDir = mkdtempSync(join(tmpdir(), "awt-reload-"));
mkdirSync(join(dataDir, "animas", "a", "tools"), { recursive: true });
const toolPath = join(dataDir, "animas", "a", "tools", "live.mjs");
writeFileSync(toolPath, version(0));
const host = createHost({ dataDir, isolation: "process", watch: true, onLog: () => {} });
await host.ready();
const call = async () => {
  const r = await host.call("a", "live_get", {});
  return r.status === "ok" ? r.output : r.error_type;
};
await call();
const warm = [];
for (let i = 0; i < 200; i++) {
  const t = performance.now();
  await call();
  warm.push(performance.now() - t);
}
let n = 0;
let stale = 0;
const latencies = [];
for (let burst = 0; burst < BURSTS; burst++) {
  for (let edit = 0; edit < 4; edit++) {
    writeFileSync(`${toolPath}.swp`, version(++n));
    renameSync(`${toolPath}.swp`, toolPath);
  }
  const start = performance.now();
  while ((await call()) !== `v${n}`) {
    if (performance.now() - start > 5_000) throw new Error(`burst ${burst}: v${n} never served`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  latencies.push(performance.now() - start);
  for (let check = 0; check < 5; check++) if ((await call()) !== `v${n}`) stale++;
}
await host.close();
rmSync(dataDir, { recursive: true, force: true });
const p50 = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
console.log(
  `hot reload over ${BURSTS} bursts of 4 saves: save → serving p50 ${p50(latencies).toFixed(1)} ms (warm call p50 ${(p50(warm) * 1000).toFixed(0)} µs, ratio ${(p50(latencies) / p50(warm)).toFixed(0)}×) [aim ≤ 80 ms]; stale results after settling: ${stale} [aim 0]`,
);
