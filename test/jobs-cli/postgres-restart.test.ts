import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { type PrivatePostgres, privatePostgresAvailable, startPrivatePostgres } from "../helpers/private-postgres.js";
import { cli, markTool, waitFor } from "./helpers.js";

/**
 * A PostgreSQL restart while a `serve` worker runs jobs (on a server of this test's own): the worker
 * reconnects, every job succeeds, none runs to completion twice, and submits work again after the restart.
 */
const BIN = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");
const available = privatePostgresAvailable();
// Skipped only off CI; on CI (root, PostgreSQL's binaries installed) a missing one fails.
if (!available && process.env["CI"] === "true")
  throw new Error("a private PostgreSQL server (root, initdb, pg_ctl, the postgres user) is required on CI but cannot be started here");
let data: TempDataDir;
let server: PrivatePostgres | undefined;
let workerProcess: ChildProcess | undefined;

beforeAll(async () => {
  if (!available) return;
  data = makeDataDir({ "animas/alice/tools/mark.ts": markTool() });
  server = await startPrivatePostgres();
});
afterAll(() => {
  if (workerProcess?.exitCode === null) workerProcess.kill("SIGKILL");
  server?.stop();
  data?.cleanup();
});

async function statuses(): Promise<string[]> {
  const client = new pg.Client({ connectionString: server?.url });
  await client.connect();
  try {
    return (await client.query("SELECT status FROM animaworks_tool.jobs ORDER BY seq")).rows.map((row: { status: string }) => row.status);
  } finally {
    await client.end();
  }
}

describe.runIf(available)("a PostgreSQL restart while a worker runs", () => {
  it("costs no job: the worker reconnects, nothing completes twice, and submits work again", async () => {
    const url = server?.url as string;
    const submit = async (tag: string) => {
      const run = await cli(data.dir, ["--jobs-url", url, "--anima", "alice", "submit", "--no-worker", "mark", "run", tag, "--ms", "300"]);
      expect(run.code, run.stderr).toBe(0);
    };
    for (let i = 0; i < 10; i++) await submit(`before${i}`);
    workerProcess = spawn(process.execPath, ["--no-node-snapshot", BIN, "--data-dir", data.dir, "serve", "--concurrency", "2", "--per-anima", "2"], {
      stdio: ["ignore", "ignore", "ignore"],
      env: { ...process.env, ANIMAWORKS_JOBS_URL: url },
    });
    await waitFor("some jobs to succeed", async () => (await statuses()).filter((s) => s === "succeeded").length >= 2, 30_000, 50);
    server?.restart(); // fast shutdown: every connection is cut, jobs are running
    for (let i = 0; i < 4; i++) await submit(`after${i}`);
    let last: string[] = [];
    await waitFor("every job to succeed", async () => (last = await statuses()).every((s) => s === "succeeded"), 120_000, 100).catch((error: Error) => {
      throw new Error(`${error.message}; statuses: ${last.join(", ")}`);
    });
    expect(await statuses()).toHaveLength(14);
    const marksDir = join(data.dir, "animas", "alice", "marks");
    const tags = existsSync(marksDir) ? readdirSync(marksDir).map((file) => file.split(".")[0]) : [];
    expect(tags).toHaveLength(14);
    expect(new Set(tags).size).toBe(14);
    expect(workerProcess.exitCode).toBeNull();
  }, 240_000);
});
