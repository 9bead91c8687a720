import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { noticePath } from "../../src/jobs/notices.js";
import { jobPaths } from "../../src/jobs/service.js";
import { isProcessAlive, liveWorkers } from "../../src/jobs/workers.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { type TestDatabase, createTestDatabase } from "../helpers/postgres.js";
import { cli, jobsTool, waitFor } from "./helpers.js";

/**
 * Background jobs through the CLI with `--jobs-url` (PostgreSQL): submit starts a worker that finds the
 * same store, the data dir gets no SQLite file, a cancel reaches a running job in another process at once
 * (LISTEN/NOTIFY, not the next heartbeat), and bad URLs are clear errors that never repeat a password.
 */
const BIN = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");

let data: TempDataDir;
let database: TestDatabase;
const started: ChildProcess[] = [];

/** A job that ends as soon as it sees its cancel: what it saw, and when, is the cancel's latency. */
const WATCHER = `
import { isCancelled, progress, sleep } from "@animaworks/tool";
export const EXECUTION_PROFILE = { run: { background_eligible: true, timeout_seconds: 120 } };
export function get_tool_schemas() {
  return [{ name: "watcher_run", description: "Runs until cancelled.", input_schema: { type: "object", properties: {} } }];
}
export async function dispatch() {
  await progress(0.01, "watching");
  while (!(await isCancelled())) await sleep(20);
  return "saw the cancel";
}
`;

beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/bg.ts": jobsTool(), "animas/alice/tools/watcher.ts": WATCHER });
  database = await createTestDatabase();
});
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
  for (const worker of liveWorkers(jobPaths(data.dir).workersDir)) if (isProcessAlive(worker.pid)) process.kill(worker.pid, "SIGKILL");
});
afterAll(async () => {
  await database?.drop();
  data?.cleanup();
});

const withUrl = (argv: string[]) => ["--jobs-url", database.url, "--anima", "alice", ...argv];

async function progressOf(id: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    return (
      (await client.query<{ progress_message: string | null }>("SELECT progress_message FROM animaworks_tool.jobs WHERE id = $1", [id])).rows[0]
        ?.progress_message ?? undefined
    );
  } finally {
    await client.end();
  }
}

async function statusOf(id: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    return (await client.query<{ status: string }>("SELECT status FROM animaworks_tool.jobs WHERE id = $1", [id])).rows[0]?.status;
  } finally {
    await client.end();
  }
}

describe("background jobs in PostgreSQL through the CLI", () => {
  it("submit starts a worker on the same store; the job succeeds, its notice is written, and no SQLite file appears", async () => {
    const submitted = await cli(data.dir, withUrl(["submit", "bg", "echo", "from-pg"]));
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = submitted.stdout;
    await waitFor("the job to succeed", async () => (await statusOf(id)) === "succeeded", 30_000);
    expect((await cli(data.dir, withUrl(["jobs", "result", id]))).stdout).toBe("from-pg");
    await waitFor("its notice", () => existsSync(noticePath(join(data.dir, "animas", "alice"), id)), 10_000);
    expect(existsSync(jobPaths(data.dir).store)).toBe(false);
    // Without the URL the CLI looks in the embedded store, where this job is not.
    expect((await cli(data.dir, ["--anima", "alice", "jobs", "show", id])).code).toBe(2);
  }, 45_000);

  it("a cancel from another process stops a job running under serve by notification, before a lease renewal would", async () => {
    const serve = spawn(process.execPath, ["--no-node-snapshot", BIN, "--data-dir", data.dir, "serve"], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ANIMAWORKS_JOBS_URL: database.url },
    });
    started.push(serve);
    await waitFor("serve to register", () => liveWorkers(jobPaths(data.dir).workersDir).some((w) => w.pid === serve.pid), 15_000);
    const id = (await cli(data.dir, withUrl(["submit", "watcher", "run"]))).stdout;
    // Running in its sandbox process (which a fresh host may still be starting when the job is claimed).
    await waitFor("the job to run", async () => (await progressOf(id)) === "watching", 15_000);
    expect((await cli(data.dir, withUrl(["jobs", "cancel", id]))).code).toBe(0);
    // Timed from the cancel's commit (the CLI has ended), not from the CLI's start, whose Node start a busy
    // machine stretches: the worker renews its leases (and so would see the cancel) every 2 s; the
    // notification reaches it at once, and the tool ends within 20 ms of seeing it (≈ 45 ms here). Under
    // 1 s leaves a busy machine room and holds without the notification in half the runs at most (a
    // renewal comes 1 s later on average).
    const cancelledAt = Date.now();
    await waitFor("the job to end as cancelled", async () => (await statusOf(id)) === "cancelled", 10_000, 10);
    expect(Date.now() - cancelledAt).toBeLessThan(1_000);
    serve.kill("SIGTERM");
    await waitFor("serve to exit", () => serve.exitCode !== null, 15_000);
  }, 45_000);

  it("refuses a URL that is not postgres:// (exit 2), and names an unreachable server without its password", async () => {
    const wrong = await cli(data.dir, ["--jobs-url", "mysql://root:pw@127.0.0.1/x", "--anima", "alice", "jobs", "list"]);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(/must be a postgres:\/\/ URL/);
    expect(wrong.stderr).not.toContain("pw@");
    const down = await cli(data.dir, ["--jobs-url", "postgres://eve:hunter2@127.0.0.1:1/jobs", "--anima", "alice", "jobs", "list"]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/cannot reach the job database postgres:\/\/eve@127\.0\.0\.1:1\/jobs/);
    expect(down.stderr).not.toContain("hunter2");
  }, 20_000);
});
