// What the audit log costs the host's thread to write, as a host serving many Animas pays it: ANIMAS
// Animas each get one call's records (call_start, a capability use, call) between two flushes, so that every
// flush appends to ANIMAS trails; and, for contrast, one Anima whose flush carries many calls' records.
// Figures: the host's CPU time per trail append, beside the floor measured in the same run: the same
// lines appended to as many plain files (open, write, close), with no lock, head or chain.
// Run after `npm run build`: node benchmarks/audit-writes.mjs [--animas 500] [--rounds 20] [--dist DIR] [--json]
// (`--dist`: another build's dist folder, e.g. the build before's worktree, for an A/B in one sitting.)
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";

const { values: flags } = parseArgs({
  options: { animas: { type: "string" }, rounds: { type: "string" }, dist: { type: "string" }, json: { type: "boolean" } },
});
const ANIMAS = Number(flags.animas ?? 500);
const ROUNDS = Number(flags.rounds ?? 20);
const dist = resolve(flags.dist ?? "dist");
const { JsonlAuditLog } = await import(pathToFileURL(join(dist, "src", "audit", "jsonl-audit-log.js")).href);

const round = (value, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;
const cpuUs = () => {
  const { user, system } = process.cpuUsage();
  return user + system;
};
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** One call's records, as the host writes them (sizes as in a real trail). */
function callRecords(log, anima, i) {
  const callId = `c${i}-${anima}`;
  log.append({ kind: "call_start", anima, tool: "alpha_run", callId });
  log.append({ kind: "capability", anima, tool: "alpha_run", callId, operation: "fs.readFile", target: `notes/${i}.txt`, outcome: "ok" });
  log.append({ kind: "call", anima, tool: "alpha_run", callId, outcome: "ok", durationMs: 0.4 });
}

async function manyTrails(dir) {
  const log = new JsonlAuditLog(join(dir, "audit"), { isAnima: () => true, flushIntervalMs: 60_000 });
  const animas = Array.from({ length: ANIMAS }, (_, i) => `a${i}`);
  const perAppend = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const anima of animas) callRecords(log, anima, r);
    const start = cpuUs();
    await log.flush();
    if (r > 0) perAppend.push((cpuUs() - start) / ANIMAS); // the first round makes the files
  }
  await log.close();
  return median(perAppend);
}

async function oneTrail(dir) {
  const log = new JsonlAuditLog(join(dir, "audit"), { isAnima: () => true, flushIntervalMs: 60_000 });
  const perAppend = [];
  for (let r = 0; r < ROUNDS * 10; r++) {
    for (let i = 0; i < 40; i++) callRecords(log, "hot", r * 40 + i);
    const start = cpuUs();
    await log.flush();
    if (r > 0) perAppend.push(cpuUs() - start);
  }
  await log.close();
  return median(perAppend);
}

/** The floor: each trail's bytes appended to a plain file of its own, nothing else. */
function plainFloor(dir) {
  const folder = join(dir, "plain");
  mkdirSync(folder);
  const line =
    `${JSON.stringify({ v: 1, seq: 1, ts: new Date().toISOString(), prev: "0".repeat(32), kind: "call", anima: "a1", tool: "alpha_run", outcome: "ok" })}\n`.repeat(
      3,
    );
  const perAppend = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = cpuUs();
    for (let a = 0; a < ANIMAS; a++) {
      const fd = openSync(join(folder, `a${a}.jsonl`), "a", 0o600);
      writeSync(fd, line);
      closeSync(fd);
    }
    if (r > 0) perAppend.push((cpuUs() - start) / ANIMAS);
  }
  return median(perAppend);
}

const dir = mkdtempSync(join(tmpdir(), "awt-audit-writes-"));
try {
  const floorUs = plainFloor(dir);
  const manyUs = await manyTrails(dir);
  const oneUs = await oneTrail(dir);
  const results = {
    build: dist,
    animas: ANIMAS,
    rounds: ROUNDS,
    perTrailAppendUs: round(manyUs),
    floorPlainAppendUs: round(floorUs),
    ratioToFloor: round(manyUs / floorUs, 2),
    oneTrailFlushOf40CallsUs: round(oneUs),
  };
  console.log(flags.json ? JSON.stringify(results) : JSON.stringify(results, null, 2));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
