import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { type NetNamespace, createNetNamespace, netnsAvailable, tcpRelay } from "../helpers/netns.js";
import { type TestDatabase, createTestDatabase } from "../helpers/postgres.js";
import { cli, markTool, waitFor } from "./helpers.js";

/**
 * Two `serve` workers as two machines: each in its own network namespace, reaching PostgreSQL only over
 * its veth pair (through a relay in the root namespace standing in for the network), sharing the data dir
 * and the database. Alice queues a backlog, then Bob a few jobs; one worker is killed mid-run; a third
 * process cancels a job running on the other. Every job ends, none runs to completion twice, an Anima's
 * limit holds across both workers, and Bob's jobs do not wait for Alice's backlog.
 */
const BIN = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");
const available = netnsAvailable();
// Skipped only off CI (not root, no iproute2); on CI (.ci/run installs iproute2; it runs as root) a missing one fails.
if (!available && process.env["CI"] === "true") throw new Error("network namespaces (root and `ip netns`) are required on CI but are not available here");
let data: TempDataDir;
let database: TestDatabase;
const namespaces: NetNamespace[] = [];
const relays: Array<{ port: number; close(): Promise<void> }> = [];
const workers: ChildProcess[] = [];

beforeAll(async () => {
  if (!available) return;
  data = makeDataDir({ "animas/alice/tools/mark.ts": markTool(), "animas/bob/tools/mark.ts": markTool() });
  database = await createTestDatabase();
  const target = new URL(database.url);
  for (const index of [1, 2]) {
    const namespace = createNetNamespace(index);
    namespaces.push(namespace);
    relays.push(await tcpRelay(namespace.hostAddress, { host: target.hostname, port: Number(target.port || 5432) }));
  }
});
afterAll(async () => {
  for (const worker of workers) if (worker.exitCode === null) worker.kill("SIGKILL");
  for (const relay of relays) await relay.close();
  for (const namespace of namespaces) namespace.remove();
  await database?.drop();
  data?.cleanup();
});

async function rows(): Promise<Array<{ id: string; anima: string; status: string; attempts: number; max_attempts: number; started_at: string | null }>> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    return (await client.query("SELECT id, anima, status, attempts, max_attempts, started_at FROM animaworks_tool.jobs ORDER BY seq")).rows;
  } finally {
    await client.end();
  }
}

async function owners(): Promise<string[]> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    return (await client.query("SELECT lease_owner FROM animaworks_tool.jobs WHERE status = 'running'")).rows.map(
      (row: { lease_owner: string }) => row.lease_owner,
    );
  } finally {
    await client.end();
  }
}

function marks(anima: string): Array<{ tag: string; start: number; end: number }> {
  const dir = join(data.dir, "animas", anima, "marks");
  if (!existsSync(dir)) return [];
  return readdirSync(dir).map((file) => ({
    tag: file.split(".")[0] as string,
    ...(JSON.parse(readFileSync(join(dir, file), "utf8")) as { start: number; end: number }),
  }));
}

function mostAtOnce(runs: Array<{ start: number; end: number }>): number {
  const events = runs.flatMap((run) => [[run.start, 1] as const, [run.end, -1] as const]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, step] of events) most = Math.max(most, (now += step));
  return most;
}

/** A worker on "machine" `index`: its own network namespace, the database through its veth address. */
function worker(index: number): ChildProcess {
  const namespace = namespaces[index] as NetNamespace;
  const url = new URL(database.url);
  url.hostname = namespace.hostAddress;
  url.port = String(relays[index]?.port);
  const [command, ...prefix] = namespace.exec;
  const child = spawn(
    command as string,
    [...prefix, process.execPath, "--no-node-snapshot", BIN, "--data-dir", data.dir, "serve", "--concurrency", "2", "--per-anima", "2"],
    {
      stdio: ["ignore", "ignore", "ignore"],
      env: { ...process.env, ANIMAWORKS_JOBS_URL: url.toString() },
    },
  );
  workers.push(child);
  return child;
}

describe.runIf(available)("serve workers on two machines (network namespaces) sharing one PostgreSQL database", () => {
  it("a killed worker costs only its running jobs; no job completes twice; Anima limits and turns hold across workers; a cancel crosses machines", async () => {
    const [first, second] = [worker(0), worker(1)];
    const submit = async (anima: string, argv: string[]) => {
      const run = await cli(data.dir, ["--jobs-url", database.url, "--anima", anima, "submit", "--no-worker", "mark", "run", ...argv]);
      expect(run.code, run.stderr).toBe(0);
      return run.stdout;
    };
    const jobOfTag = new Map<string, string>();
    for (let i = 0; i < 10; i++) jobOfTag.set(`a${i}`, (await submit("alice", [`a${i}`, "--ms", "300"])).trim());
    for (let i = 0; i < 4; i++) jobOfTag.set(`b${i}`, (await submit("bob", [`b${i}`, "--ms", "300"])).trim());
    // Kill the first machine's worker while it runs jobs (its lease owner id is `<host>:<pid>:…`).
    const runningOn = async (child: ChildProcess) => (await owners()).some((owner) => owner.split(":")[1] === String(child.pid));
    await waitFor("both machines to run jobs", async () => (await runningOn(first)) && (await runningOn(second)), 30_000, 20);
    first.kill("SIGKILL");

    const long = await submit("bob", ["long", "--ms", "60000"]);
    // Jobs the killed worker held count against their Anima's limit until their 30 s lease runs out, so
    // Bob's long job may have to wait for that before the survivor claims it.
    await waitFor("the long job to run on the surviving machine", async () => (await rows()).find((r) => r.id === long)?.status === "running", 60_000, 50);
    expect((await cli(data.dir, ["--jobs-url", database.url, "--anima", "bob", "jobs", "cancel", long])).code).toBe(0);
    // Reached across machines long before the job's own 60 s end: a bound for a lost cancel, not a speed figure.
    await waitFor("the long job to be cancelled", async () => (await rows()).find((r) => r.id === long)?.status === "cancelled", 30_000, 20);

    // The killed worker's running jobs come back after its 30 s lease (recovered by the survivor).
    await waitFor(
      "every job to reach an end",
      async () => (await rows()).every((r) => ["succeeded", "interrupted", "cancelled"].includes(r.status)),
      60_000,
      200,
    );
    const end = await rows();
    expect(end.every((r) => r.attempts <= r.max_attempts)).toBe(true);
    const done = [...marks("alice"), ...marks("bob")];
    const tags = done.map((mark) => mark.tag);
    expect(new Set(tags).size).toBe(tags.length); // no job ran to completion twice
    // Every success has its one run. A run that finished on the killed machine between writing its mark
    // and recording its success left a mark for a job that ended interrupted; any other mark is a success's.
    const statusOf = (tag: string) => end.find((r) => r.id === jobOfTag.get(tag))?.status;
    const succeeded = end.filter((r) => r.status === "succeeded").map((r) => r.id);
    expect(succeeded.every((id) => tags.some((tag) => jobOfTag.get(tag) === id))).toBe(true);
    expect(tags.every((tag) => tag === "long" || ["succeeded", "interrupted"].includes(statusOf(tag) ?? ""))).toBe(true);
    expect(tags.filter((tag) => statusOf(tag) === "interrupted").length).toBeLessThanOrEqual(2); // what the killed worker ran
    for (const anima of ["alice", "bob"]) expect(mostAtOnce(marks(anima))).toBeLessThanOrEqual(2); // --per-anima 2, across workers
    // Turns: Bob's first job started (on either machine; the store records each start) before the last
    // of Alice's backlog did.
    const starts = (anima: string) => end.filter((r) => r.anima === anima && r.started_at !== null).map((r) => Number(r.started_at));
    expect(Math.min(...starts("bob"))).toBeLessThan(Math.max(...starts("alice")));
    expect(second.exitCode).toBeNull();
    second.kill("SIGTERM");
    await waitFor("the survivor to stop", () => second.exitCode !== null, 15_000);
  }, 180_000);
});
