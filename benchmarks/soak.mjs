// Soak: calls, jobs and reloads through the daemon for N minutes, with the host's resources over time.
//
//   node benchmarks/soak.mjs --minutes N [--rate CALLS_PER_S] [--animas N] [--sample-seconds S] [--json FILE] [--keep]
//   (after npm run build; defaults: 8 calls/s over 50 Animas, a job every 5 s, a reload every 10 s, a sample every 10 s)
//
// A fresh data dir with one personal tool per Anima and a shared tool with a background-eligible action.
// Calls go through the launcher as a shell runs it (`node bin/animaworks-tool.cjs …`), so the daemon the
// first call starts serves them. Every call's exit code and output are checked: an unexpected one is
// counted and its first lines kept. A reload rewrites one Anima's tool with a new version string; every
// later call of that Anima must answer with that version or a newer one (a stale version is counted).
// Jobs are submitted through the daemon and followed with `jobs list`; each must end "succeeded".
//
// The calls come at --rate per second, at most 2 s worth in flight: on a machine too slow for the rate
// the rest are skipped and counted ("skipped"), and the rate reached is printed with each sample.
//
// Each sample: the daemon's RSS, open fds and threads; the sandbox processes under it (count and RSS);
// job workers (count and RSS); the audit log and job database sizes. The table goes to stdout as it is
// measured; --json FILE writes every sample and the totals. Flat figures over a long run are what to look
// for (benchmarks/README.md records runs).
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const BIN = join(ROOT, "bin", "animaworks-tool.cjs");

function option(name, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  if (index < 0) return fallback;
  const value = Number(process.argv[index + 1]);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} needs a positive number`);
  return value;
}
const minutes = option("minutes", undefined);
if (minutes === undefined) {
  console.error("usage: node benchmarks/soak.mjs --minutes N [--rate CALLS_PER_S] [--animas N] [--sample-seconds S] [--json FILE] [--keep]");
  process.exit(2);
}
const RATE = option("rate", 8);
const ANIMAS = Math.round(option("animas", 50));
const SAMPLE_MS = option("sample-seconds", 10) * 1000;
const JOB_EVERY_MS = 5_000;
const RELOAD_EVERY_MS = 10_000;
const MAX_CALLS_IN_FLIGHT = Math.max(4, Math.ceil(RATE * 2));
const jsonIndex = process.argv.indexOf("--json");
const jsonFile = jsonIndex >= 0 ? process.argv[jsonIndex + 1] : undefined;
const keep = process.argv.includes("--keep");

const dir = mkdtempSync(join(tmpdir(), "awt-soak-"));
const dataDir = join(dir, "data");
const animaName = (i) => `anima${String(i).padStart(3, "0")}`;
const toolSource = (version) => `export function get_tool_schemas() {
  return [{ name: "soak_echo", description: "echo with the tool's version", input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }];
}
export function dispatch(name, args) { return "v${version}:" + args.n; }
`;
for (let i = 0; i < ANIMAS; i++) {
  mkdirSync(join(dataDir, "animas", animaName(i), "tools"), { recursive: true });
  writeFileSync(join(dataDir, "animas", animaName(i), "tools", "soak.mjs"), toolSource(0));
}
mkdirSync(join(dataDir, "common_tools"), { recursive: true });
writeFileSync(
  join(dataDir, "common_tools", "slow.mjs"),
  `import { progress, sleep } from "@animaworks/tool";
export const EXECUTION_PROFILE = { work: { background_eligible: true, timeout_seconds: 60 } };
export function get_tool_schemas() {
  return [{ name: "slow_work", description: "a job in steps", input_schema: { type: "object", properties: { steps: { type: "integer" } }, required: ["steps"] } }];
}
export async function dispatch(name, args) {
  for (let i = 0; i < args.steps; i++) { await sleep(200); await progress((i + 1) / args.steps, "step " + (i + 1)); }
  return "done " + args.steps;
}
`,
);

const env = { ...process.env };
delete env.ANIMAWORKS_NO_DAEMON;
delete env.NODE_OPTIONS;

/** Runs the CLI as a shell does; resolves with its exit code and output (never rejects). */
function cli(args, timeoutMs = 120_000) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, "--data-dir", dataDir, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 1), stdout: stdout.trim(), stderr: stderr.trim() });
    });
  });
}

const totals = { calls: 0, skipped: 0, unexpected: 0, stale: 0, reloads: 0, jobsSubmitted: 0, jobsSucceeded: 0, jobsOther: 0 };
const unexpectedExamples = [];
const versions = new Array(ANIMAS).fill(0);
const jobIds = new Map(); // id → anima
const samples = [];

function unexpected(what, run) {
  totals.unexpected++;
  if (unexpectedExamples.length < 10) {
    const example = { what, code: run.code, stdout: run.stdout.slice(0, 300), stderr: run.stderr.slice(0, 300) };
    unexpectedExamples.push(example);
    // Shown as it happens too: a long run's first surprises are worth seeing before it ends.
    console.error(`unexpected ${JSON.stringify(example)}`);
  }
}

async function oneCall(n) {
  const i = n % ANIMAS;
  const atLeast = versions[i];
  const run = await cli(["--anima", animaName(i), "soak", "echo", String(n)]);
  totals.calls++;
  const match = /^v(\d+):(\d+)$/.exec(run.stdout);
  if (run.code !== 0 || !match || Number(match[2]) !== n) return unexpected("call", run);
  if (Number(match[1]) < atLeast) totals.stale++;
}

async function reload(k) {
  const i = (k * 7) % ANIMAS;
  const version = versions[i] + 1;
  writeFileSync(join(dataDir, "animas", animaName(i), "tools", "soak.mjs"), toolSource(version));
  versions[i] = version;
  totals.reloads++;
}

async function submitJob(k) {
  const anima = animaName((k * 3) % ANIMAS);
  const run = await cli(["--anima", anima, "-j", "submit", "slow", "work", "--steps", "3"]);
  try {
    const id = JSON.parse(run.stdout).job_id;
    if (run.code !== 0 || typeof id !== "string") throw new Error("no job id");
    jobIds.set(id, anima);
    totals.jobsSubmitted++;
  } catch {
    unexpected("submit", run);
  }
}

/** Looks at the jobs still open; counts the ones that ended. */
async function followJobs() {
  const byAnima = new Map();
  for (const [id, anima] of jobIds) byAnima.set(anima, [...(byAnima.get(anima) ?? []), id]);
  await Promise.all([...byAnima].map(([anima, ids]) => followAnimaJobs(anima, ids)));
}

async function followAnimaJobs(anima, ids) {
  {
    const run = await cli(["--anima", anima, "-j", "jobs", "list", "--limit", "1000"]);
    let jobs;
    try {
      jobs = JSON.parse(run.stdout).jobs;
      if (!Array.isArray(jobs)) throw new Error("no jobs");
    } catch {
      unexpected("jobs list", run);
      return;
    }
    for (const job of jobs) {
      if (!ids.includes(job.job_id) || ["queued", "running"].includes(job.status)) continue;
      jobIds.delete(job.job_id);
      if (job.status === "succeeded") totals.jobsSucceeded++;
      else {
        totals.jobsOther++;
        unexpected(`job ${job.status}`, { code: 0, stdout: JSON.stringify(job), stderr: "" });
      }
    }
  }
}

// ---- what the machine says about the host's processes --------------------------------------------

function procStatus(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/status`, "utf8");
    const field = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(text)?.[1] ?? 0);
    return { rssKb: field("VmRSS"), threads: field("Threads"), ppid: field("PPid") };
  } catch {
    return undefined;
  }
}
function fdCount(pid) {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}
function cmdline(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return "";
  }
}
function allPids() {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
}
/** Every process below `root` (sandbox processes, and bubblewrap around them when it is used). */
function descendants(root) {
  const children = new Map();
  for (const pid of allPids()) {
    const status = procStatus(pid);
    if (status) children.set(status.ppid, [...(children.get(status.ppid) ?? []), pid]);
  }
  const found = [];
  const queue = [root];
  while (queue.length > 0) for (const child of children.get(queue.shift()) ?? []) (found.push(child), queue.push(child));
  return found;
}
function fileBytes(...paths) {
  return paths.reduce((sum, path) => sum + (statSync(path, { throwIfNoEntry: false })?.size ?? 0), 0);
}
function auditBytes() {
  const folder = join(dataDir, "logs", "animaworks-tool");
  if (!existsSync(folder)) return 0;
  return readdirSync(folder)
    .filter((name) => name.startsWith("audit"))
    .reduce((sum, name) => sum + fileBytes(join(folder, name)), 0);
}

/** The daemon serving the data dir, found in /proc (asking it through the CLI would cost a process per sample). */
function daemonPid() {
  return allPids().find((pid) => {
    const line = cmdline(pid);
    return line.includes(" daemon run ") && line.includes(dataDir);
  });
}

async function sample(startedAt) {
  const pid = daemonPid();
  const daemon = pid ? procStatus(pid) : undefined;
  // Sandbox processes are the daemon's node children running the sandbox entry (and what they start).
  const sandbox = pid ? descendants(pid).filter((child) => /node/.test(readlinkSafe(child))) : [];
  const workers = allPids().filter((other) => cmdline(other).includes("serve") && cmdline(other).includes(dataDir));
  const sum = (pids) => pids.reduce((total, p) => total + (procStatus(p)?.rssKb ?? 0), 0);
  const row = {
    minute: Math.round(((Date.now() - startedAt) / 60_000) * 100) / 100,
    daemonPid: pid ?? null,
    daemonRssMb: daemon ? Math.round(daemon.rssKb / 1024) : null,
    daemonFds: pid ? fdCount(pid) : null,
    daemonThreads: daemon?.threads ?? null,
    sandboxProcesses: sandbox.length,
    sandboxRssMb: Math.round(sum(sandbox) / 1024),
    jobWorkers: workers.length,
    jobWorkersRssMb: Math.round(sum(workers) / 1024),
    auditKb: Math.round(auditBytes() / 1024),
    jobsDbKb: Math.round(
      fileBytes(join(dataDir, "state", "animaworks-tool", "jobs.sqlite"), join(dataDir, "state", "animaworks-tool", "jobs.sqlite-wal")) / 1024,
    ),
    calls: totals.calls,
    callsPerS: Math.round((totals.calls / Math.max(1, (Date.now() - startedAt) / 1000)) * 10) / 10,
    skipped: totals.skipped,
    unexpected: totals.unexpected,
  };
  samples.push(row);
  if (samples.length === 1) console.log(Object.keys(row).join("\t"));
  console.log(Object.values(row).join("\t"));
}
function readlinkSafe(pid) {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return "";
  }
}

// ---- the run ----------------------------------------------------------------------------------

const startedAt = Date.now();
const endAt = startedAt + minutes * 60_000;
const inFlight = new Set();
const track = (promise) => {
  inFlight.add(promise);
  promise.finally(() => inFlight.delete(promise));
};
console.log(
  `soak: ${minutes} min, ${RATE} calls/s over ${ANIMAS} Animas, a job every ${JOB_EVERY_MS / 1000} s, a reload every ${RELOAD_EVERY_MS / 1000} s; data dir ${dataDir}`,
);
try {
  const first = await cli(["daemon", "start"]);
  if (first.code !== 0) throw new Error(`daemon start failed: ${first.stderr}`);
  let n = 0;
  let jobs = 0;
  let reloads = 0;
  let nextSample = Date.now();
  let callsInFlight = 0;
  let sampling = false;
  while (Date.now() < endAt) {
    const now = Date.now();
    // Calls at RATE per second, each on its own (a slow one does not hold the next back), at most
    // MAX_CALLS_IN_FLIGHT at once: on a machine too slow for RATE the calls that do not fit are skipped
    // (counted), rather than started in a burst that would measure the burst instead of the host.
    const due = Math.floor(((now - startedAt) / 1000) * RATE);
    while (n < due) {
      if (callsInFlight >= MAX_CALLS_IN_FLIGHT) {
        totals.skipped += due - n;
        n = due;
        break;
      }
      callsInFlight++;
      track(oneCall(n++).finally(() => callsInFlight--));
    }
    if (now - startedAt >= (jobs + 1) * JOB_EVERY_MS) track(submitJob(jobs++));
    if (now - startedAt >= (reloads + 1) * RELOAD_EVERY_MS) track(reload(reloads++));
    if (now >= nextSample && !sampling) {
      nextSample = now + SAMPLE_MS;
      sampling = true;
      track(
        sample(startedAt)
          .then(followJobs)
          .finally(() => (sampling = false)),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  await Promise.allSettled([...inFlight]);
  // The last jobs finish (≈ 1 s each): give them a bounded while.
  for (let i = 0; i < 60 && jobIds.size > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await followJobs();
  }
  await sample(startedAt);
  const summary = { minutes, rate: RATE, animas: ANIMAS, ...totals, jobsUnfinished: jobIds.size, unexpectedExamples };
  console.log(JSON.stringify(summary, null, 2));
  if (jsonFile) writeFileSync(jsonFile, JSON.stringify({ summary, samples }, null, 2));
  process.exitCode = totals.unexpected > 0 || totals.stale > 0 || jobIds.size > 0 ? 1 : 0;
} finally {
  await cli(["daemon", "stop"]);
  if (!keep) rmSync(dir, { recursive: true, force: true });
}
