import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { noticePath } from "../../src/jobs/notices.js";
import { jobPaths } from "../../src/jobs/service.js";
import { isProcessAlive } from "../../src/jobs/workers.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { cli, jobRows, jobsTool, waitFor } from "./helpers.js";

// Real worker processes, started from bin/ (so from dist/: run `npm run build` first, as `npm test` does).
const BIN = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");

let data: TempDataDir;
const started: ChildProcess[] = [];
const spawnedPids: number[] = [];

function workerPids(): number[] {
  const dir = jobPaths(data.dir).workersDir;
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => name.endsWith(".json") && !name.startsWith("."))
    .map((name) => (JSON.parse(readFileSync(join(dir, name), "utf8")) as { pid: number }).pid);
}

beforeAll(() => {
  data = makeDataDir({ "animas/alice/tools/bg.ts": jobsTool() });
});
afterEach(() => {
  // A test that failed half-way must not leave a worker behind (only the processes this file started).
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
  for (const pid of spawnedPids.splice(0)) if (isProcessAlive(pid)) process.kill(pid, "SIGKILL");
});
afterAll(() => data.cleanup());

describe("background worker processes", () => {
  it("submit starts one detached worker when none runs; it drains the queue, writes the notices and exits", async () => {
    const first = await cli(data.dir, ["--anima", "alice", "submit", "bg", "echo", "auto"]);
    expect(first.code, first.stderr).toBe(0);
    const pids = workerPids();
    expect(pids).toHaveLength(1);
    const pid = pids[0] as number;
    spawnedPids.push(pid);
    // A second submit while that worker lives (booting or running) does not start another.
    const second = await cli(data.dir, ["--anima", "alice", "submit", "bg", "echo", "again"]);
    expect(second.code, second.stderr).toBe(0);
    expect(workerPids()).toEqual([pid]);

    await waitFor("both jobs to succeed", () => jobRows(data.dir).filter((row) => row.status === "succeeded").length === 2, 30_000);
    await waitFor("the worker to exit", () => !isProcessAlive(pid), 15_000);
    expect(workerPids()).toEqual([]);
    for (const run of [first, second]) expect(existsSync(noticePath(join(data.dir, "animas", "alice"), run.stdout))).toBe(true);
    expect((await cli(data.dir, ["--anima", "alice", "jobs", "result", second.stdout])).stdout).toBe("again");
  }, 45_000);

  it("serve runs submitted jobs and stops gracefully on SIGTERM, leaving no worker record", async () => {
    const child = spawn(process.execPath, ["--no-node-snapshot", BIN, "--data-dir", data.dir, "serve"], { stdio: ["ignore", "pipe", "pipe"] });
    started.push(child);
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    await waitFor("serve to register", () => workerPids().includes(child.pid!), 15_000);

    const id = (await cli(data.dir, ["--anima", "alice", "submit", "bg", "echo", "served"])).stdout;
    // serve was registered, so submit started no other worker.
    expect(workerPids()).toEqual([child.pid]);
    await waitFor("the job to succeed", () => jobRows(data.dir).some((row) => row.id === id && row.status === "succeeded"), 20_000);

    child.kill("SIGTERM");
    await waitFor("serve to exit", () => child.exitCode !== null, 15_000);
    expect(await exited, stderr).toBe(0);
    expect(stderr).toContain("stopped; ran 1 job(s): 1 succeeded");
    expect(workerPids()).toEqual([]);
  }, 45_000);
});
