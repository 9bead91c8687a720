import { main } from "../../src/cli/main.js";
import { type SpawnSyncReturns, spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { daemonNotice } from "../../src/cli/daemon-notice.js";
import { endpointPaths, readBuildInfo } from "../../src/endpoint/paths.js";
import { Endpoint } from "../../src/endpoint/server.js";
import { createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";

// The daemon path end to end: real `animaworks-tool` processes started as a user's shell starts them
// (without --no-node-snapshot), with daemons allowed (vitest.config.ts turns them off for other tests).

const BIN = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");
const ECHO = `
import { logger } from "@animaworks/tool";
export function get_tool_schemas() {
  return [
    { name: "echo_say", description: "echo", input_schema: { type: "object", properties: { word: { type: "string" } }, required: ["word"] } },
    { name: "echo_spin", description: "never returns" },
  ];
}
export function dispatch(name, args) {
  if (name === "echo_spin") { for (;;) {} }
  logger.info("saying " + args.word);
  return { said: args.word };
}
`;
const ENV: NodeJS.ProcessEnv = { ...process.env, ANIMAWORKS_DAEMON_IDLE_SECONDS: "120" };
delete ENV["ANIMAWORKS_NO_DAEMON"];

const dataDirs: TempDataDir[] = [];
function dataDir(): TempDataDir {
  const data = makeDataDir({ "animas/alice/tools/echo.mjs": ECHO });
  dataDirs.push(data);
  return data;
}

function cli(data: TempDataDir, args: string[], env: NodeJS.ProcessEnv = ENV): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [BIN, "--data-dir", data.dir, ...args], { encoding: "utf8", env });
}

function cliAsync(data: TempDataDir, args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, "--data-dir", data.dir, ...args], { env: ENV });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

interface Status {
  running: boolean;
  host?: { pid: number; kind: string; calls: number; active: number };
}

function status(data: TempDataDir): Status {
  return JSON.parse(cli(data, ["daemon", "status", "--json"]).stdout) as Status;
}

/** Processes running `daemon run` for this data dir (from /proc). */
function daemonPids(data: TempDataDir): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let args: string[];
    try {
      args = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    const at = args.indexOf("run");
    if (at > 0 && args[at - 1] === "daemon" && args.includes(data.dir)) pids.push(Number(entry));
  }
  return pids;
}

afterAll(async () => {
  for (const data of dataDirs) {
    cli(data, ["daemon", "stop"]);
    for (const pid of daemonPids(data)) process.kill(pid, "SIGKILL");
    data.cleanup();
  }
}, 120_000); // each stop is a CLI process: seconds apiece on a loaded machine

describe("the self-starting daemon", () => {
  it("is started by a first call, which runs in-process; later calls are served by it, with the same output", async () => {
    const data = dataDir();
    const first = cli(data, ["--anima", "alice", "echo", "say", "one", "-j"]);
    expect(first.status).toBe(0);
    await waitFor(() => status(data).running, 20_000, 50);
    const second = cli(data, ["--anima", "alice", "echo", "say", "one", "-j"]);
    // The same output but for the call's own id in the audit trail, and the first call's one notice that
    // it left a daemon running (on stderr: -j output stays one JSON document).
    const withoutCallId = (stdout: string) => stdout.replace(/,"call_id":"[^"]+"/, "");
    const notice = daemonNotice(status(data).host?.pid, data.dir, 120);
    expect({ status: second.status, stdout: withoutCallId(second.stdout), stderr: notice + second.stderr }).toEqual({
      status: first.status,
      stdout: withoutCallId(first.stdout),
      stderr: first.stderr,
    });
    expect(JSON.parse(second.stdout)).toEqual({ status: "ok", output: { said: "one" }, call_id: expect.any(String) });
    expect(JSON.parse(second.stdout).call_id).not.toBe(JSON.parse(first.stdout).call_id);
    expect(second.stderr).toBe("[info] animaworks.tools (alice/echo): saying one\n");
    const after = status(data);
    expect(after.host).toMatchObject({ kind: "daemon", calls: 1, active: 0 });
    // Errors and their exit codes come back the same way.
    const unknown = cli(data, ["--anima", "alice", "echo", "shout"]);
    expect(unknown.status).toBe(5);
    expect(unknown.stderr).toBe('Error (ToolNotFound): tool "echo" has no action "shout" — actions: say, spin\n');
    expect(status(data).host?.calls).toBe(2);
  });

  it("serves a call from the thin client alone: Node's start-up snapshot, no isolated-vm, esbuild, ajv or host code", async () => {
    const data = dataDir();
    expect(cli(data, ["daemon", "start"]).stdout).toMatch(/^started: daemon pid \d+/);
    const report = join(data.dir, "loaded.json");
    const preload = join(data.dir, "report.cjs");
    writeFileSync(
      preload,
      `process.on("exit", () => require("node:fs").writeFileSync(${JSON.stringify(report)}, JSON.stringify({ execArgv: process.execArgv, files: Object.keys(require.cache), builtins: process.moduleLoadList })));\n`,
    );
    const run = spawnSync(process.execPath, ["--require", preload, BIN, "--data-dir", data.dir, "--anima", "alice", "echo", "say", "thin"], {
      encoding: "utf8",
      env: ENV,
    });
    expect(run.stdout).toBe('{\n  "said": "thin"\n}\n');
    expect(run.status).toBe(0);
    expect(status(data).host?.calls).toBe(1);
    const loaded = JSON.parse(readFileSync(report, "utf8")) as { execArgv: string[]; files: string[]; builtins: string[] };
    expect(loaded.execArgv).not.toContain("--no-node-snapshot");
    // The launcher and the client bundle; nothing of the host (dist/cli/main.cjs or dist/src) or node_modules.
    expect(loaded.files.filter((file) => file !== preload)).toEqual([BIN, join(PROJECT_ROOT, "dist", "cli", "client.cjs")]);
    // (The ES module loader's modules are in Node 26's start-up snapshot, free to have.)
    for (const unwanted of ["NativeModule child_process", "NativeModule worker_threads", "NativeModule v8", "NativeModule vm"])
      expect(loaded.builtins).not.toContain(unwanted);
  });

  it("is started once by concurrent first calls", async () => {
    const data = dataDir();
    const runs = await Promise.all([1, 2, 3, 4].map((n) => cliAsync(data, ["--anima", "alice", "echo", "say", `n${n}`])));
    runs.forEach((run, i) => {
      expect(run.status).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({ said: `n${i + 1}` });
    });
    await waitFor(() => status(data).running, 20_000, 50);
    expect(daemonPids(data)).toHaveLength(1);
    // The one that started it says so; the others do not.
    expect(runs.filter((run) => run.stderr.includes("Note: animaworks-tool started a daemon"))).toHaveLength(1);
    const log = readFileSync(endpointPaths(data.dir, hostname()).log, "utf8");
    expect(log.match(/serves CLI calls/g)).toHaveLength(1);
    expect(log).not.toContain("another host");
  });

  it("tells its caller once per data dir that a call left it running, and how to stop it", async () => {
    const data = dataDir();
    const first = cli(data, ["--anima", "alice", "echo", "say", "x", "-j"]);
    expect(first.status).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ status: "ok", output: { said: "x" } });
    await waitFor(() => status(data).running, 20_000, 50);
    const pid = status(data).host?.pid;
    expect(first.stderr).toBe(`${daemonNotice(pid, data.dir, 120)}[info] animaworks.tools (alice/echo): saying x\n`);
    expect(first.stderr).toContain(`Stop it now: animaworks-tool --data-dir ${data.dir} daemon stop`);
    expect(first.stderr).toMatch(/until 2 minutes pass without a call/);
    // Not when it serves the next calls, nor when a later call starts the next daemon (after this one
    // stopped, as it does when idle): the notice is the data dir's, not the daemon's.
    expect(cli(data, ["--anima", "alice", "echo", "say", "y"]).stderr).toBe("[info] animaworks.tools (alice/echo): saying y\n");
    expect(cli(data, ["daemon", "stop"]).stdout).toBe("daemon stopped\n");
    const restarted = cli(data, ["--anima", "alice", "echo", "say", "z"]);
    expect(restarted.stderr).toBe("[info] animaworks.tools (alice/echo): saying z\n");
    await waitFor(() => status(data).running, 20_000, 50);
    expect(status(data).host?.pid).not.toBe(pid);
  });

  it("started with daemon start is not announced later: whoever started it knows", async () => {
    const data = dataDir();
    expect(cli(data, ["daemon", "start"]).stdout).toMatch(/^started: daemon pid \d+/);
    expect(cli(data, ["daemon", "stop"]).stdout).toBe("daemon stopped\n");
    const run = cli(data, ["--anima", "alice", "echo", "say", "x"]);
    expect(run.stderr).toBe("[info] animaworks.tools (alice/echo): saying x\n");
    await waitFor(() => status(data).running, 20_000, 50);
  });

  it("dies mid-call: that call gets a clear error, and the next call works", async () => {
    const data = dataDir();
    cli(data, ["daemon", "start"]);
    const pid = status(data).host?.pid as number;
    const spinning = cliAsync(data, ["--anima", "alice", "echo", "spin"]);
    await waitFor(() => status(data).host?.active === 1, 10_000, 50);
    process.kill(pid, "SIGKILL");
    const failed = await spinning;
    expect(failed.status).toBe(1);
    expect(failed.stderr).toBe(
      "Error (SandboxCrashed): the running animaworks-tool host ended before the call finished (it may have run in part) — run the command again (the next call starts a new host, or runs in-process)\n",
    );
    const next = cli(data, ["--anima", "alice", "echo", "say", "again"]);
    expect(next.status).toBe(0);
    expect(JSON.parse(next.stdout)).toEqual({ said: "again" });
  });

  it("gone-reader: a caller whose stdout reader went away (`… | true`) gets the call's own exit status, as --no-daemon, and no stack trace", async () => {
    const data = dataDir();
    cli(data, ["daemon", "start"]);
    const run = (args: string[]) =>
      new Promise<{ status: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [BIN, "--data-dir", data.dir, ...args], { env: ENV, stdio: ["ignore", "pipe", "pipe"] });
        // The reader goes away before the call writes anything: every write meets EPIPE.
        child.stdout.destroy();
        let stderr = "";
        child.stderr.on("data", (chunk) => (stderr += chunk));
        child.on("close", (status) => resolve({ status, stderr }));
      });
    const served = await run(["--anima", "alice", "describe", "echo"]);
    expect(status(data).host?.calls).toBe(1);
    const inProcess = await run(["--no-daemon", "--anima", "alice", "describe", "echo"]);
    expect(served).toEqual({ status: 0, stderr: "" });
    expect(inProcess).toEqual(served);
  });

  it("is managed with daemon start|status|stop, and exits by itself when idle", async () => {
    const data = dataDir();
    expect(cli(data, ["daemon", "status"]).stdout).toMatch(/^no host serves CLI calls for /);
    expect(cli(data, ["daemon", "start", "--idle-timeout", "600"]).stdout).toMatch(
      /^started: daemon pid \d+ serves CLI calls for .* exits after 600 s without a call\n$/,
    );
    expect(cli(data, ["daemon", "start"]).stdout).toMatch(/^already running: daemon pid/);
    expect(cli(data, ["daemon", "stop"]).stdout).toBe("daemon stopped\n");
    expect(status(data).running).toBe(false);
    expect(cli(data, ["daemon", "stop"]).stdout).toMatch(/^no daemon runs for /);
    const bad = cli(data, ["daemon", "start", "--idle-timeout", "soon"]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/^Error \(InvalidArguments\): --idle-timeout must be a number of seconds/);
    // "start" returns once the daemon answers (its reply is the proof it ran): a status check after it
    // would race the 3 s idle timeout on a loaded machine.
    expect(cli(data, ["daemon", "start", "--idle-timeout", "3"]).stdout).toMatch(/^started: daemon pid \d+ .* exits after 3 s without a call\n$/);
    await waitFor(() => !status(data).running && daemonPids(data).length === 0, 20_000, 100);
  });

  it("daemon_env_from_caller: does not inherit the caller's Node switches (NODE_OPTIONS, NODE_TLS_REJECT_UNAUTHORIZED), which would change it for every Anima", async () => {
    const data = dataDir();
    const env = { ...ENV, NODE_OPTIONS: "--title=awt-caller-options", NODE_TLS_REJECT_UNAUTHORIZED: "0", AWT_CALLER_MARKER: "kept" };
    expect(cli(data, ["daemon", "start"], env).stdout).toMatch(/^started: daemon pid \d+/);
    const [pid] = daemonPids(data);
    expect(pid).toBeDefined();
    const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    expect(environ).toContain("AWT_CALLER_MARKER=kept"); // the rest of the caller's environment, as before
    expect(environ.filter((entry) => /^NODE_(OPTIONS|TLS_REJECT_UNAUTHORIZED)=/.test(entry))).toEqual([]);
    expect(readFileSync(`/proc/${pid}/cmdline`, "utf8")).not.toContain("awt-caller-options");
    cli(data, ["daemon", "stop"]);
  });

  it("is neither used nor started with --no-daemon or ANIMAWORKS_NO_DAEMON=1", () => {
    const data = dataDir();
    const endpointDir = endpointPaths(data.dir, hostname()).dir;
    expect(cli(data, ["--no-daemon", "--anima", "alice", "echo", "say", "x"]).status).toBe(0);
    expect(existsSync(endpointDir)).toBe(false);
    expect(cli(data, ["--anima", "alice", "echo", "say", "x"], { ...ENV, ANIMAWORKS_NO_DAEMON: "1" }).status).toBe(0);
    expect(existsSync(endpointDir)).toBe(false);
  });

  it('is not started when the operator configuration says "daemon": false', () => {
    const data = dataDir();
    data.write("config.json", JSON.stringify({ animaworks_tool: { daemon: false } }));
    const run = cli(data, ["--anima", "alice", "echo", "say", "x"]);
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ said: "x" });
    expect(existsSync(endpointPaths(data.dir, hostname()).dir)).toBe(false);
    expect(daemonPids(data)).toEqual([]);
  });

  it("of another build is not used: the call runs in-process, and an outdated daemon of this install is told to stop", async () => {
    const data = dataDir();
    const host = createHost({ dataDir: data.dir, isolation: "process", onLog: () => {} });
    const reasons: string[] = [];
    const old = await Endpoint.open({
      host,
      kind: "daemon",
      runInvocation: main,
      build: { build: "an-older-build", install: readBuildInfo(PROJECT_ROOT).install },
      onStopRequest: (reason) => void reasons.push(reason),
    });
    try {
      // Not spawnSync: the old endpoint is served by this very process.
      const run = await cliAsync(data, ["--anima", "alice", "echo", "say", "fresh"]);
      expect(run.status).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({ said: "fresh" });
      expect(reasons).toEqual(["outdated"]);
    } finally {
      await old?.close();
      await host.close();
    }
  });
});
