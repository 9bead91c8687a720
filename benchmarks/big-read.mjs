// Large file reads through the fs capability, and what they cost a neighbour in the same sandbox process.
// A reader Anima reads a 10 MiB file, one call per read, back to back; beside it, in the one sandbox
// process of the host, a quiet Anima calls a trivial tool every 5 ms. Measured in the same run:
//   - a read's wall time through the tool, against `fs.promises.readFile(path, "utf8")` of the same file
//     in this process (the baseline: what the bytes cost without a sandbox)
//   - the quiet Anima's call p99 beside the reads, against its p99 with no reader (both in rounds that
//     alternate, so that the machine's drift weighs on both alike)
// Run: `npm run build && node --no-node-snapshot benchmarks/big-read.mjs [--quick] [--mib N]`.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHost } from "../dist/src/index.js";

const quick = process.argv.includes("--quick");
const ROUNDS = quick ? 2 : 4;
const QUIET_CALLS = quick ? 150 : 250;
const mibArg = process.argv.indexOf("--mib");
/** The file's size: `--mib N` (default 10, the fs capability's default read limit). */
const FILE_BYTES = (mibArg > 0 ? Number(process.argv[mibArg + 1]) : 10) * 1024 * 1024;

const READER = `
import { fs } from "@animaworks/tool";
export function get_tool_schemas() { return [{ name: "reader_read", description: "read the big file", input_schema: { type: "object", properties: {} } }]; }
export async function dispatch() { return (await fs.readFile("big.txt")).length; }`;
const QUIET = `
export function get_tool_schemas() { return [{ name: "quiet_ping", description: "ping", input_schema: { type: "object", properties: {} } }]; }
export function dispatch() { return "pong"; }`;

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};
const round2 = (x) => +x.toFixed(2);

async function timed(fn) {
  const start = process.hrtime.bigint();
  const result = await fn();
  return { ms: Number(process.hrtime.bigint() - start) / 1e6, result };
}

const dir = mkdtempSync(join(tmpdir(), "awt-bench-bigread-"));
try {
  for (const [anima, file, code] of [
    ["reader", "reader.ts", READER],
    ["quiet", "quiet.ts", QUIET],
  ]) {
    mkdirSync(join(dir, "animas", anima, "tools"), { recursive: true });
    writeFileSync(join(dir, "animas", anima, "tools", file), code);
  }
  // Mostly ASCII with multi-byte characters through it, as real text is.
  const line = "The quick brown fox jumps over the lazy dog; café, naïve, 東京, 😀.\n";
  const big = line.repeat(Math.floor(FILE_BYTES / Buffer.byteLength(line))); // within the default 10 MiB read limit
  const bigPath = join(dir, "animas", "reader", "big.txt");
  writeFileSync(bigPath, big);
  const host = createHost({ dataDir: dir, timeoutMs: 30_000, sandboxProcesses: 1 });

  const quietCalls = async () => {
    const walls = [];
    while (walls.length < QUIET_CALLS) {
      const { ms, result } = await timed(() => host.call("quiet", "quiet_ping", {}));
      if (result.status !== "ok") throw new Error(`quiet call failed: ${JSON.stringify(result)}`);
      walls.push(ms);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return walls;
  };
  const read = async () => {
    const { ms, result } = await timed(() => host.call("reader", "reader_read", {}));
    if (result.status !== "ok" || Number(result.output) !== big.length) throw new Error(`read failed: ${JSON.stringify(result).slice(0, 300)}`);
    return ms;
  };

  for (let i = 0; i < 3; i++) await read(); // warm: isolates, code caches, read buffers
  await quietCalls();

  const unloaded = [];
  const beside = [];
  const reads = [];
  const direct = [];
  for (let round = 0; round < ROUNDS; round++) {
    unloaded.push(...(await quietCalls()));
    for (let i = 0; i < 5; i++) direct.push((await timed(() => readFile(bigPath, "utf8"))).ms);
    let reading = true;
    const reader = (async () => {
      while (reading) reads.push(await read());
    })();
    beside.push(...(await quietCalls()));
    reading = false;
    await reader;
  }
  await host.close();

  const report = {
    rounds: ROUNDS,
    fileMiB: FILE_BYTES / 2 ** 20,
    readP50Ms: { tool: round2(percentile(reads, 50)), direct: round2(percentile(direct, 50)), ratio: round2(percentile(reads, 50) / percentile(direct, 50)) },
    readP99Ms: round2(percentile(reads, 99)),
    readsDone: reads.length,
    quietP50Ms: { unloaded: round2(percentile(unloaded, 50)), besideReads: round2(percentile(beside, 50)) },
    quietP99Ms: { unloaded: round2(percentile(unloaded, 99)), besideReads: round2(percentile(beside, 99)) },
    quietP99Ratio: round2(percentile(beside, 99) / percentile(unloaded, 99)),
    quietMaxMs: round2(Math.max(...beside)),
  };
  console.log(JSON.stringify(report, null, 2));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
