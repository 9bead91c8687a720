import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync, readdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { CallRequest } from "../../../src/isolation/wire/messages.js";
import { SandboxPool } from "../../../src/isolation/pool/sandbox-pool.js";
import { PROJECT_ROOT } from "../../../src/project-root.js";
import { waitFor } from "../../helpers/data-dir.js";

/**
 * A sandbox process ends with its pool and with its host, whatever state it is in. In bubblewrap a
 * sandbox process is three processes (bwrap, bwrap's init as pid 1 of its pid namespace, node); once,
 * after a daemon stopped, its init stayed for an hour: childless, reparented to the machine's init,
 * deaf to SIGTERM. bwrap's `--die-with-parent` reaches the init only after its setup, and before that
 * the init waits on an eventfd the first bwrap writes after the clone (bubblewrap#633): a bwrap killed
 * in between leaves it blocked for good. These tests make the races happen: closing a pool while a
 * process is still starting (stopped right after its clone, as a loaded machine might leave it) and
 * while one is being retired (and its replacement starting); and they kill a host that never closes
 * its pool (there `--die-with-parent`, which bwrap also applies to itself, is what ends its processes).
 * Each then finds every process of the launch by walking /proc for the fixture's path in its command
 * line (bwrap's arguments name it, and bwrap's init is a clone of bwrap), orphans included.
 */
const FIXTURES = join(PROJECT_ROOT, "test", "fixtures", "shutdown-race");
const LINGERING = join(PROJECT_ROOT, "test", "fixtures", "compromised", "lingering-process.mjs");
const bwrapWorks = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "true"]).status === 0;
if (!bwrapWorks && process.env["CI"] === "true") throw new Error("bubblewrap is required on CI (.ci/run installs it) but does not work here");
if (!bwrapWorks) console.warn("pool-close tests skipped: bubblewrap is not installed or cannot create namespaces");

/** Processes (not zombies) whose command line names `marker`: every process of a launch of that fixture. */
function running(marker: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").includes(marker)) continue;
      if (!/\) Z /.test(readFileSync(`/proc/${entry}/stat`, "utf8"))) found.push(Number(entry));
    } catch {
      // ended meanwhile
    }
  }
  return found;
}

function alive(pid: number): boolean {
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** The first child of `pid` once it has one, read as fast as /proc allows (bwrap's clone is over in microseconds). */
function firstChildOf(pid: number): number {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    let children = "";
    try {
      children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8");
    } catch {
      // not yet, or gone (then the deadline fails the test)
    }
    const first = Number(children.split(" ")[0]);
    if (first > 0) return first;
  }
  throw new Error(`process ${pid} made no child`);
}

/**
 * Whether bwrap's init `pid` is still in bubblewrap#633's window: it holds two eventfds and neither was
 * written (the one its parent writes after the clone, the one it reports its child's exit on).
 */
function waitingForItsParent(pid: number): boolean {
  let unwritten = 0;
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false; // past its setup and ended already
  }
  for (const fd of fds) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).includes("eventfd") && /^eventfd-count:\s*0$/m.test(readFileSync(`/proc/${pid}/fdinfo/${fd}`, "utf8")))
        unwritten++;
    } catch {
      // closed meanwhile
    }
  }
  return unwritten === 2;
}

const request = (anima: string, schemaName: string, args: Record<string, unknown> = {}): CallRequest => ({
  op: "call",
  bundle: {
    hash: "pool-close",
    displayName: "personal/waiting.js",
    code: `__awRegister({ dispatch: (name) => name === "waiting_quick" ? "done" : new Promise(() => {}) });`,
  },
  context: { anima, animaDir: `/nonexistent/animas/${anima}`, tool: "waiting" },
  entry: "call",
  schemaName,
  payloadJson: JSON.stringify(args),
  timeoutMs: 60_000,
  memoryLimitMb: 32,
  maxResultBytes: 10_000,
  maxLogLines: 10,
  maxLogLineChars: 100,
});

describe.runIf(bwrapWorks)("a sandbox process ends with its pool and its host, bwrap and all", () => {
  let pool: SandboxPool | undefined;
  let host: ChildProcess | undefined;
  afterEach(async () => {
    host?.kill("SIGKILL");
    await pool?.close();
    pool = undefined;
    // Whatever a failed test left: every process of these launches was started by this file.
    for (const pid of running(LINGERING)) process.kill(pid, "SIGKILL");
  });

  it("closing the pool while a process is still starting ends it, bwrap's init included", async () => {
    // Rounds until one caught bwrap between its clone and its eventfd write (most do); each must end all.
    let caught = 0;
    for (let round = 0; round < 10 && caught === 0; round++) {
      pool = new SandboxPool({ osSandbox: "required", entryScript: LINGERING, onStderr: () => {} });
      const [outer] = pool.sparePids(); // the spare starts with the pool
      const init = firstChildOf(outer as number);
      // As a loaded machine might leave it: bwrap descheduled right after its clone.
      process.kill(outer as number, "SIGSTOP");
      if (waitingForItsParent(init)) caught++;
      await pool.close();
      pool = undefined;
      await waitFor(() => !alive(init), 10_000).catch(() => {
        throw new Error(`bwrap's init ${init} outlived its pool's close (round ${round}, caught in the window: ${caught > 0})`);
      });
      expect(alive(outer as number)).toBe(false); // reaped before close() resolved
      expect(running(LINGERING)).toEqual([]);
    }
    expect(caught, "no round stopped bwrap between its clone and its eventfd write").toBeGreaterThan(0);
  }, 60_000);

  it("closing the pool while a process is being retired ends it, and its replacement", async () => {
    const lines: string[] = [];
    pool = new SandboxPool({ osSandbox: "required", entryScript: LINGERING, onStderr: (line) => lines.push(line) });
    const call = pool.call(request("eve", "waiting_forever", { attack: "linger" }));
    const roguePid = pool.pidFor("eve") as number;
    expect(roguePid).toBeGreaterThan(0);
    // Retired once the host read its "retiring": eve's slot holds its replacement, starting now.
    await waitFor(() => lines.some((line) => line.includes("lingering-process: rogue")) && pool?.pidFor("eve") !== roguePid, 20_000);
    const replacement = pool.pidFor("eve");
    await pool.close();
    pool = undefined;
    // The retired process would never end by itself: close() ended it, and resolved only after.
    expect(alive(roguePid)).toBe(false);
    if (replacement !== undefined) expect(alive(replacement)).toBe(false);
    expect(await call).toMatchObject({ ok: false, error: { type: "SandboxCrashed" } });
    await waitFor(() => running(LINGERING).length === 0, 10_000).catch(() => {
      throw new Error(`processes of the closed pool still run: ${running(LINGERING).join(", ")}`);
    });
  }, 60_000);

  it("a host killed without closing its pool takes its sandbox processes along, a rogue one included", async () => {
    host = spawn(process.execPath, ["--no-node-snapshot", join(FIXTURES, "dying-host.mjs")], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    host.stdout?.on("data", (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise((resolve) => host?.once("exit", resolve));
    await waitFor(() => out.includes("\n") || host?.exitCode !== null, 40_000);
    const roguePid = Number(/^ready (\d+)$/m.exec(out)?.[1]);
    expect(roguePid, `the stand-in host said: ${out}`).toBeGreaterThan(0);
    const launched = running(LINGERING);
    expect(launched).toContain(roguePid);
    expect(launched.length).toBeGreaterThanOrEqual(6); // the rogue, eve's replacement and a spare: three processes each
    host.kill("SIGKILL");
    await exited;
    await waitFor(() => launched.every((pid) => !alive(pid)), 10_000).catch(() => {
      throw new Error(`sandbox processes outlived their host: ${launched.filter(alive).join(", ")}`);
    });
  }, 60_000);
});
