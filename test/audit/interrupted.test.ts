import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { AuditEvent, AuditRecord } from "../../src/audit/audit-log.js";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { unfinishedCalls } from "../../src/audit/interrupted.js";
import { main } from "../../src/cli/main.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";

const start = (callId: string, pid: number, ts = "2026-01-01T00:00:00.000Z"): AuditRecord => ({
  kind: "call_start",
  callId,
  anima: "alice",
  tool: "slow",
  schema: "slow_run",
  version: `v-${callId}`,
  pid,
  ts,
});
const end = (callId: string): AuditRecord => ({
  kind: "call",
  callId,
  anima: "alice",
  tool: "slow",
  schema: "slow_run",
  durationMs: 1,
  outcome: "ok",
  ts: "2026-01-01T00:00:01.000Z",
});

/** A pid that belonged to a process which has ended. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
  return Number(child.stdout);
}

describe("interrupted calls", () => {
  it("a start without an end is interrupted when its host is gone, in flight while it lives; ended calls are neither", () => {
    const gone = deadPid();
    const asked: number[] = [];
    const calls = unfinishedCalls(
      [start("a", gone), start("b", process.pid), start("c", gone), end("c"), end("unknown"), start("d", gone, "2026-01-01T00:00:02.000Z")],
      (pid) => {
        asked.push(pid);
        return pid === process.pid;
      },
    );
    expect(calls.interrupted).toEqual([
      { callId: "a", tool: "slow", schema: "slow_run", version: "v-a", startedAt: "2026-01-01T00:00:00.000Z", pid: gone },
      { callId: "d", tool: "slow", schema: "slow_run", version: "v-d", startedAt: "2026-01-01T00:00:02.000Z", pid: gone },
    ]);
    expect(calls.inFlight.map((c) => c.callId)).toEqual(["b"]);
    // Each pid is asked once.
    expect(asked.sort()).toEqual([gone, process.pid].sort());
    // With the real check: this process lives, the ended child does not.
    expect(unfinishedCalls([start("x", gone), start("y", process.pid)]).interrupted.map((c) => c.callId)).toEqual(["x"]);
  });

  describe("a CLI process killed during a call (kill -9)", () => {
    let data: TempDataDir;
    afterEach(() => data.cleanup());

    it("shows in `audit` as an interrupted call with its tool, schema, version and start; a running one as in flight", async () => {
      data = makeDataDir({
        "animas/alice/tools/slow.mjs": `export function get_tool_schemas() { return [{ name: "slow_run", description: "never answers" }]; }
export function dispatch() { return new Promise(() => {}); }
`,
      });
      const child = spawn(
        process.execPath,
        ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", data.dir, "--anima", "alice", "slow", "run"],
        {
          stdio: "ignore",
          env: { ...process.env, ANIMAWORKS_NO_DAEMON: "1" },
        },
      );
      const exited = new Promise((resolve) => child.once("exit", resolve));
      const trail = join(data.dir, "logs", "animaworks-tool", "audit", "animas", "alice.jsonl");
      await waitFor(() => {
        try {
          return readFileSync(trail, "utf8").includes('"call_start"');
        } catch {
          return false;
        }
      }, 20_000);
      child.kill("SIGKILL");
      await exited;
      // A call still running in a live host (this test's process) is in flight, not interrupted.
      const log = new JsonlAuditLog(join(data.dir, "logs", "animaworks-tool", "audit"));
      const running: AuditEvent = { kind: "call_start", callId: "live-1", anima: "alice", tool: "slow", schema: "slow_run", version: "abc", pid: process.pid };
      log.append(running);
      await log.close();

      const out: string[] = [];
      expect(await main(["--data-dir", data.dir, "audit", "--json"], { stdout: (t) => out.push(t), stderr: () => {} })).toBe(0);
      const [report] = JSON.parse(out.join("")).reports;
      expect(report.interrupted).toEqual([
        {
          callId: expect.any(String),
          tool: "slow",
          schema: "slow_run",
          version: expect.stringMatching(/^[0-9a-f]{16,}$/),
          startedAt: expect.any(String),
          pid: child.pid,
        },
      ]);
      expect(report.inFlight.map((c: { callId: string }) => c.callId)).toEqual(["live-1"]);

      const text: string[] = [];
      await main(["--data-dir", data.dir, "audit"], { stdout: (t) => text.push(t), stderr: () => {} });
      const stdout = text.join("\n");
      expect(stdout).toMatch(/\n {2}alice +\d+ +0 +0 +1 +0 +0 {2}1 in flight\n/);
      expect(stdout).toContain("  interrupted calls: 1 (started, never ended; the host process that ran them is gone)");
      expect(stdout).toMatch(new RegExp(`\\n {4}slow_run \\(tool slow, version [0-9a-f]{12}\\) started \\S+, pid ${child.pid}\\n`));
      expect(stdout).toContain("  in flight: 1 (started in a host process that is still running)");
    });
  });
});
