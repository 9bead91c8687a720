import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { jobPaths } from "../../src/jobs/service.js";
import { liveWorkers } from "../../src/jobs/workers.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { type TestDatabase, createTestDatabase } from "../helpers/postgres.js";
import { cli, jobsTool, waitFor } from "./helpers.js";

/**
 * Two `serve` workers, separate processes sharing one PostgreSQL database and one data dir: one is killed
 * with SIGKILL mid-run; every job still reaches an end (the killed worker's running jobs are recovered
 * after its 30 s lease, as `interrupted` under the default retry policy), none runs past its attempts, and a
 * cancel from a third process stops a job running on the surviving worker. (Every job is alice's: the
 * per-Anima limit, counted across workers, is 4 so that the jobs the dead worker held until its lease runs
 * out leave the survivor room; with the default 2 they would rightly hold alice's turn for 30 s.)
 */
const BIN = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");
let data: TempDataDir;
let database: TestDatabase;
const started: ChildProcess[] = [];

beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/bg.ts": jobsTool() });
  database = await createTestDatabase();
});
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
});
afterAll(async () => {
  await database?.drop();
  data?.cleanup();
});

async function rows(): Promise<Array<{ id: string; status: string; attempts: number; max_attempts: number }>> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    return (await client.query("SELECT id, status, attempts, max_attempts FROM animaworks_tool.jobs ORDER BY seq")).rows;
  } finally {
    await client.end();
  }
}

function serve(): ChildProcess {
  const child = spawn(process.execPath, ["--no-node-snapshot", BIN, "--data-dir", data.dir, "serve", "--concurrency", "2", "--per-anima", "4"], {
    stdio: ["ignore", "ignore", "ignore"],
    env: { ...process.env, ANIMAWORKS_JOBS_URL: database.url },
  });
  started.push(child);
  return child;
}

describe("two serve workers on one PostgreSQL database", () => {
  it("a worker killed mid-run costs only its running jobs' attempts; a cancel from another process reaches the other worker", async () => {
    const [first, second] = [serve(), serve()];
    await waitFor("both workers to register", () => liveWorkers(jobPaths(data.dir).workersDir).length === 2, 20_000);
    const submit = async (argv: string[]) => (await cli(data.dir, ["--jobs-url", database.url, "--anima", "alice", "submit", "bg", ...argv])).stdout;
    for (let i = 0; i < 12; i++) await submit(["sleep", "--ms", "400"]);
    await waitFor("some jobs to succeed", async () => (await rows()).filter((r) => r.status === "succeeded").length >= 3, 20_000, 50);
    first.kill("SIGKILL");

    const long = await submit(["sleep", "--ms", "60000"]);
    await waitFor("the long job to run on the survivor", async () => (await rows()).find((r) => r.id === long)?.status === "running", 20_000, 50);
    expect((await cli(data.dir, ["--jobs-url", database.url, "--anima", "alice", "jobs", "cancel", long])).code).toBe(0);
    // Cancelled by the surviving worker (through the store's notification or its next heartbeat, then the
    // tool's 2 s grace), long before the job's own 60 s end: a bound for a lost cancel, not a speed figure.
    await waitFor("the long job to be cancelled", async () => (await rows()).find((r) => r.id === long)?.status === "cancelled", 30_000, 20);

    // The killed worker's jobs come back after its 30 s lease (recovered by the survivor's maintenance).
    await waitFor(
      "every job to reach an end",
      async () => (await rows()).every((r) => ["succeeded", "interrupted", "cancelled"].includes(r.status)),
      60_000,
      200,
    );
    const end = await rows();
    expect(end.every((r) => r.attempts <= r.max_attempts)).toBe(true);
    expect(end.filter((r) => r.status === "succeeded").length).toBeGreaterThanOrEqual(3);
    expect(second.exitCode).toBeNull();
    second.kill("SIGTERM");
    await waitFor("the survivor to stop", () => second.exitCode !== null, 15_000);
  }, 100_000);
});
