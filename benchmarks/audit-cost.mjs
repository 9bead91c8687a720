// Audit at scale: `audit` (the text report), `audit --json`, `audit events` and `audit verify` over N
// records (default 1,000,000) of 200 Animas, as the CLI runs them (`node bin/animaworks-tool.cjs …`).
//
//   node benchmarks/audit-cost.mjs [--records N] [--animas N] [--keep] [--generate-only]    (after npm run build)
//
// The records are written through the host's own JsonlAuditLog (chained, per-Anima trails) with a large
// rotation size so that all of them are kept: a day of a busy host's calls, capability uses and denials.
// Each command runs 3 times; the median wall time is printed beside the records' size on disk.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const BIN = join(ROOT, "bin", "animaworks-tool.cjs");
const { JsonlAuditLog } = await import(join(ROOT, "dist", "src", "audit", "jsonl-audit-log.js"));

function option(name, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  return index < 0 ? fallback : Number(process.argv[index + 1]);
}
const RECORDS = option("records", 1_000_000);
const ANIMAS = option("animas", 200);
const dir = mkdtempSync(join(tmpdir(), "awt-audit-cost-"));
const dataDir = join(dir, "data");
const auditDir = join(dataDir, "logs", "animaworks-tool", "audit");
const name = (i) => `anima${String(i).padStart(3, "0")}`;
for (let i = 0; i < ANIMAS; i++) mkdirSync(join(dataDir, "animas", name(i), "tools"), { recursive: true });

const started = performance.now();
const log = new JsonlAuditLog(auditDir, { maxBytes: 2 ** 40, isAnima: () => true });
for (let n = 0; n < RECORDS;) {
  const anima = name(n % ANIMAS);
  const callId = `c${n}`;
  log.append({ kind: "call_start", callId, anima, tool: "notes", schema: "notes_add", version: "v1", pid: 1 });
  log.append({ kind: "capability", callId, anima, tool: "notes", operation: "fs.writeFile", target: `notes/${n}.md`, outcome: "ok" });
  const denied = n % 50 === 0;
  if (denied)
    log.append({
      kind: "capability",
      callId,
      anima,
      tool: "notes",
      operation: "fetch",
      target: "http://10.0.0.1/",
      outcome: "denied",
      reason: "SandboxViolation: private address",
      policy: "a.b",
    });
  log.append({ kind: "call", callId, anima, tool: "notes", schema: "notes_add", version: "v1", layers: ["isolate"], durationMs: 1.5, outcome: "ok" });
  n += denied ? 4 : 3;
  if (n % 30_000 < 4) await log.flush();
}
await log.close();
const written = performance.now() - started;
let bytes = 0;
for (const entry of readdirSync(join(auditDir, "animas"))) bytes += statSync(join(auditDir, "animas", entry)).size;
console.log(`${RECORDS.toLocaleString("en-US")} records of ${ANIMAS} Animas written in ${(written / 1000).toFixed(1)} s, ${(bytes / 2 ** 20).toFixed(0)} MiB`);

if (process.argv.includes("--generate-only")) {
  console.log(`kept ${dir}`);
  process.exit(0);
}

function timed(args) {
  const times = [];
  let last;
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    last = spawnSync(process.execPath, [BIN, "--data-dir", dataDir, "--no-daemon", ...args], { encoding: "utf8", maxBuffer: 2 ** 31 });
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  if (last.status !== 0) console.log(`  (exit ${last.status}: ${last.stderr.slice(0, 300)})`);
  return { ms: times[1], outBytes: last.stdout.length };
}
for (const [label, args] of [
  ["audit (text report)", ["audit"]],
  ["audit --json", ["audit", "--json"]],
  ["audit --anima anima007", ["audit", "--anima", "anima007"]],
  ["audit events --kind capability --outcome denied", ["audit", "events", "--kind", "capability", "--outcome", "denied"]],
  ["audit verify", ["audit", "verify"]],
]) {
  const { ms, outBytes } = timed(args);
  console.log(`${label}: ${(ms / 1000).toFixed(2)} s (median of 3), ${(outBytes / 1024).toFixed(0)} KiB out`);
}
if (!process.argv.includes("--keep")) rmSync(dir, { recursive: true, force: true });
else console.log(`kept ${dir}`);
