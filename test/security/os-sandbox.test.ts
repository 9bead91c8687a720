import { existsSync, readFileSync, readdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";
import type { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost, sandboxOf } from "../../src/host.js";
import { OsSandboxUnavailableError, bwrapCommand, osSandboxStatus } from "../../src/isolation/os/os-sandbox.js";
import { REFUSED_SYSCALLS_X86_64, seccompProgram } from "../../src/isolation/os/seccomp-filter.js";
import { SandboxPool } from "../../src/isolation/pool/sandbox-pool.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";
import { COUNTER_TOOL } from "./harness.js";

/**
 * The second isolation layer: each sandbox process runs in bubblewrap. These tests read each sandbox
 * process's state from /proc, as an operator would, and check what code that escaped an isolate would
 * find: its own user, network, pid and mount namespaces, no capabilities, no_new_privs, the seccomp
 * filter, and no data dir. CI installs bubblewrap (.ci/run), so there a missing bwrap fails the suite;
 * elsewhere these tests are skipped, visibly.
 */
const bwrapWorks = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "true"]).status === 0;
if (!bwrapWorks && process.env["CI"] === "true") throw new Error("bubblewrap is required on CI (.ci/run installs it) but does not work here");
const suite = bwrapWorks ? describe : describe.skip;
if (!bwrapWorks) console.warn("os-sandbox tests skipped: bubblewrap is not installed or cannot create namespaces");

/** The processes named node below `pid` (not `pid` itself), nearest first. */
function nodeDescendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // the process ended
    }
  }
  const queue = [...(children.get(pid) ?? [])];
  const found: number[] = [];
  while (queue.length > 0) {
    const next = queue.shift() as number;
    try {
      // By the program it runs (argv[0]): Node 26 names its main thread "node-MainThread", so `comm` no longer
      // says "node"; and by the sandbox process's entry, so that a host's fork caught before it execs
      // (prlimit, bwrap: still the host's image, in the host's namespaces) is not taken for one.
      const argv = readFileSync(`/proc/${next}/cmdline`, "utf8").split("\0");
      if (/(^|\/)node$/.test(argv[0] ?? "") && argv.some((arg) => arg.endsWith("/child/main.js"))) found.push(next);
    } catch {
      // ended
    }
    queue.push(...(children.get(next) ?? []));
  }
  return found;
}

/** The Node process inside a sandbox process's bwrap. */
function nodeInside(bwrapPid: number): number {
  const found = nodeDescendants(bwrapPid).at(-1);
  if (found === undefined) throw new Error(`no node process under ${bwrapPid}`);
  return found;
}

/** What an escaped attacker in sandbox process `pid` would find, as an operator reads it from /proc. */
function expectConfined(pid: number, dataDir: string): void {
  for (const ns of ["user", "net", "pid", "mnt", "ipc", "uts"]) {
    expect(readlinkSync(`/proc/${pid}/ns/${ns}`), `${ns} namespace`).not.toBe(readlinkSync(`/proc/self/ns/${ns}`));
  }
  expect(readFileSync(`/proc/${pid}/uid_map`, "utf8").trim().split(/\s+/)[0]).toBe("65534");
  expect(statusField(pid, "CapEff")).toBe("0000000000000000");
  expect(statusField(pid, "CapPrm")).toBe("0000000000000000");
  expect(statusField(pid, "NoNewPrivs")).toBe("1");
  if (process.arch === "x64") expect(statusField(pid, "Seccomp")).toBe("2");
  // Its file system: no data dir, no secret, no home, no host configuration.
  const root = `/proc/${pid}/root`;
  expect(existsSync(join(root, dataDir))).toBe(false);
  expect(existsSync(join(root, dataDir, "animas", "alice", "secret.txt"))).toBe(false);
  expect(existsSync(join(root, "root"))).toBe(false);
  expect(existsSync(join(root, "etc", "passwd"))).toBe(false);
  expect(existsSync(join(root, "usr", "bin"))).toBe(true); // the read-only system folders are there
  // An empty environment.
  expect(readFileSync(`/proc/${pid}/environ`, "utf8")).not.toMatch(/HOME=|PATH=|ANIMAWORKS/);
}

/**
 * `expectConfined`, or false when the process ended while it was looked at: its /proc entry gone, its
 * root released, or a zombie (a process that only described a shared tool ends; on a loaded machine it
 * was caught between the two).
 */
function confinedIfAlive(pid: number, dataDir: string): boolean {
  try {
    expectConfined(pid, dataDir);
    return true;
  } catch (error) {
    if (!existsSync(`/proc/${pid}`) || ended(pid)) return false;
    throw error;
  }
}

/** Whether `pid` is ending (its root already released: the kernel drops it before the zombie state), ended but not reaped (Z, X), or gone. */
function ended(pid: number): boolean {
  try {
    readlinkSync(`/proc/${pid}/root`);
    return /\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return true;
  }
}

function statusField(pid: number, name: string): string {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${name}:`));
  return (line ?? "").slice(name.length + 1).trim();
}

suite("OS sandbox (bubblewrap)", () => {
  let data: TempDataDir;
  let host: ToolHost;
  beforeAll(() => {
    data = makeDataDir({ "animas/alice/tools/counter.ts": COUNTER_TOOL, "animas/alice/secret.txt": "alice-secret", "config.json": "{}" });
    host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "none"), osSandbox: "required", sandboxProcesses: 2, onLog: () => {} });
  });
  afterAll(async () => {
    await host.close();
    data.cleanup();
  });

  it("is reported as on, with its layers", () => {
    expect(sandboxOf(host)!.osSandbox).toMatchObject({
      enabled: true,
      namespaces: expect.arrayContaining(["user", "pid", "net", "ipc", "uts"]),
      uid: 65534,
      seccomp: process.arch === "x64",
    });
  });

  it("every sandbox process has its own namespaces, no capabilities, no_new_privs, seccomp and no view of the data dir", async () => {
    expect(await host.call("alice", "counter_count", {})).toMatchObject({ status: "ok" });
    const pids = sandboxOf(host)!.pids();
    expect(pids.length).toBe(2);
    for (const bwrapPid of pids) expectConfined(nodeInside(bwrapPid), data.dir);
  });

  it.each([["serve"], ["mcp", "--anima", "alice"]])(
    "every sandbox process of `animaworks-tool %s` is confined the same way",
    async (...command) => {
      const cli = spawn(
        process.execPath,
        ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", data.dir, "--os-sandbox", "required", ...command],
        {
          stdio: ["pipe", "ignore", "ignore"],
        },
      );
      try {
        // Its sandbox processes start with it: each an outer bwrap, bwrap as pid 1 inside, and node. One
        // may end while it is looked at (a process that only described a shared tool): checked are two
        // that were alive throughout.
        const confined = new Set<number>();
        await waitFor(() => {
          for (const pid of nodeDescendants(cli.pid as number)) if (!confined.has(pid) && confinedIfAlive(pid, data.dir)) confined.add(pid);
          return confined.size >= 2;
        }, 15_000);
      } finally {
        cli.kill("SIGKILL");
      }
    },
    30_000,
  );

  it("code running in a sandbox process's own Node realm reaches no file, port, process or socket of the host", async () => {
    // The same launch as a sandbox process (bwrapCommand), running an escaped attacker's code instead.
    const server = createServer((socket) => socket.end("host-loopback-secret"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    const attack = `
      const fs = require("fs"), net = require("net"), out = {};
      const tryIt = (name, fn) => { try { out[name] = fn(); } catch (e) { out[name] = e.code || String(e); } };
      tryIt("secret", () => fs.readFileSync(${JSON.stringify(join(data.dir, "animas", "alice", "secret.txt"))}, "utf8"));
      tryIt("config", () => fs.readFileSync(${JSON.stringify(join(data.dir, "config.json"))}, "utf8"));
      tryIt("kill", () => process.kill(${process.pid}, 0));
      tryIt("write", () => fs.writeFileSync("/usr/owned", "x"));
      const c = net.connect(${port}, "127.0.0.1");
      c.on("data", (d) => { out.connect = String(d); finish(); });
      c.on("error", (e) => { out.connect = e.code; finish(); });
      function finish() { fs.writeSync(3, JSON.stringify(out)); process.exit(0); }`;
    const { command, args, seccomp } = bwrapCommand(["-e", attack], 4);
    // Its report comes back on fd 3, where a sandbox process's channel is.
    const child = spawn(command, args, { env: {}, stdio: ["ignore", "ignore", "inherit", "pipe", "pipe"] });
    (child.stdio[4] as Writable).end(seccomp);
    let written = "";
    (child.stdio[3] as NodeJS.ReadableStream).on("data", (chunk: Buffer) => (written += chunk.toString()));
    const report = await new Promise<Record<string, string>>((resolve, reject) => {
      child.once("close", (code) =>
        written ? resolve(JSON.parse(written) as Record<string, string>) : reject(new Error(`the attack process ended (${code}) without a report`)),
      );
    });
    server.close();
    expect(report["secret"]).toBe("ENOENT");
    expect(report["config"]).toBe("ENOENT");
    expect(report["kill"]).toBe("ESRCH");
    expect(["EROFS", "EACCES", "EPERM"]).toContain(report["write"]);
    // No connection to the host's loopback: refused by seccomp (no IP sockets) or by the empty netns.
    expect(["EPERM", "ECONNREFUSED", "ENETUNREACH", "EACCES"]).toContain(report["connect"]);
  });

  it('"required" refuses to start without bwrap and names the package; "off" runs without it', () => {
    expect(osSandboxStatus("off")).toMatchObject({ enabled: false, reason: expect.stringMatching(/disabled/) });
    const pool = new SandboxPool({ processes: 1, osSandbox: "off" });
    expect(pool.osSandbox.enabled).toBe(false);
    void pool.close();
    expect(String(new OsSandboxUnavailableError("bwrap is not installed").message)).toMatch(/apt-get install bubblewrap/);
  });
});

describe("seccomp program", () => {
  it("is a well-formed filter that checks the architecture first and ends in ALLOW and EPERM", () => {
    const program = seccompProgram("x64") as Buffer;
    const count = program.length / 8;
    expect(count).toBe(Object.keys(REFUSED_SYSCALLS_X86_64).length + 16); // + the clone, clone3 and socket tests and the ENOSYS return
    expect(program.readUInt32LE(4)).toBe(4); // load arch
    expect(program.readUInt32LE(12)).toBe(0xc000003e); // x86_64
    expect(program.readUInt32LE((count - 2) * 8 + 4)).toBe(0x7fff0000);
    expect(program.readUInt32LE((count - 1) * 8 + 4)).toBe(0x00050001);
    expect(seccompProgram("riscv64")).toBeUndefined(); // what each program does: test/isolation/os/seccomp-filter.test.ts
  });
});

describe("bwrap launch", () => {
  it("mounts the empty /tmp before the read-only binds, so a project under /tmp stays visible", () => {
    const { args } = bwrapCommand(["-e", ""], 4);
    const tmpfs = args.indexOf("--tmpfs");
    expect(args[tmpfs + 1]).toBe("/tmp");
    expect(tmpfs).toBeLessThan(args.indexOf("--ro-bind"));
    expect(args.slice(args.indexOf("--ro-bind"))).not.toContain("--tmpfs");
  });
});
