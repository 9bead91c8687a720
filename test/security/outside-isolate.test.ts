import type { ChildProcess } from "node:child_process";
import { DEFAULT_PYTHON_INTERPRETERS } from "../../src/isolation/isolate/isolate-runner-options.js";
import { existsSync, readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { osSandboxStatus } from "../../src/isolation/os/os-sandbox.js";
import { processTree } from "../../src/isolation/os/process-cpu.js";
import { DEFAULT_RLIMIT_NOFILE } from "../../src/isolation/os/resource-caps.js";
import { type ResourceLimits, ResourceWatchdog, watchdogStatus } from "../../src/isolation/os/resource-watchdog.js";
import { spawnSandboxChild } from "../../src/isolation/pool/child-spawn.js";
import { waitFor } from "../helpers/data-dir.js";

/**
 * Resources outside the isolate: code that escaped an isolate, in the sandbox process's main realm,
 * takes memory, threads, descriptors and in-memory files, which no isolate limit bounds. Each attack
 * (test/fixtures/outside-isolate/<attack>.mjs) runs under the real launch (spawnSandboxChild: prlimit,
 * bubblewrap, seccomp, empty environment) in place of the sandbox process's entry; the rlimits stop it
 * at once, or the watchdog reports it, as the pool watches its processes, and the process is killed.
 */
const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "outside-isolate");
const MB = 2 ** 20;
const bwrapWorks = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "true"]).status === 0;
if (!bwrapWorks && process.env["CI"] === "true") throw new Error("bubblewrap is required on CI (.ci/run installs it) but does not work here");
const PRLIMIT = ["/usr/bin/prlimit", "/bin/prlimit"].find((path) => existsSync(path));
if (!bwrapWorks) console.warn("outside-isolate attacks skipped: bubblewrap is not installed or cannot create namespaces");
const ROOMY: ResourceLimits = { memoryBytes: 4_096 * MB, tasks: 10_000, openFiles: 10_000 };

const started: ChildProcess[] = [];
let watchdog: ResourceWatchdog | undefined;
afterEach(() => {
  watchdog?.close();
  for (const child of started.splice(0)) child.kill("SIGKILL");
});

/** The attack under the real launch; `lines` collects what it prints on stderr. */
function launch(attack: string) {
  const osSandbox = osSandboxStatus("required");
  const child = spawnSandboxChild({
    osSandbox,
    nice: 0,
    warmPoolBytes: 0,
    maxIdleIsolates: 0,
    isolateSnapshot: false,
    pythonInterpreters: DEFAULT_PYTHON_INTERPRETERS,
    compactIdleAfterMs: 0,
    toolsPerIsolate: 1,
    entryScript: join(FIXTURES, `${attack}.mjs`),
  });
  started.push(child);
  const lines: string[] = [];
  let pending = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    pending += chunk.toString();
    const complete = pending.split("\n");
    pending = complete.pop() as string;
    if (lines.length < 10_000) lines.push(...complete);
  });
  const exited = new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", () => resolve())));
  return { child, lines, exited, childrenFixed: osSandbox.enabled && osSandbox.seccomp };
}

/** Watches the attack like the pool does, kills it on the report, and resolves with the report once every process of its tree is gone. */
async function watchAndKill(attack: ReturnType<typeof launch>, limits: ResourceLimits): Promise<string> {
  watchdog = new ResourceWatchdog();
  const what = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the watchdog reported nothing in 20 s; the attack printed: ${attack.lines.slice(-3).join(" | ")}`)),
      20_000,
    );
    (watchdog as ResourceWatchdog).watch(
      attack.child.pid as number,
      limits,
      (over) => {
        clearTimeout(timer);
        resolve(over);
      },
      { childrenFixedUnderSeccomp: attack.childrenFixed },
    );
  });
  const tree = processTree(attack.child.pid as number);
  expect(tree.length).toBe(3); // bwrap, its init, node
  attack.child.kill("SIGKILL");
  await attack.exited;
  // bwrap's init dies with it (--die-with-parent), and with it everything in the pid namespace.
  await waitFor(() => tree.every(gone), 5_000);
  return what;
}

/** Whether process `pid` is gone (or a zombie: nothing of it runs any more). */
function gone(pid: number): boolean {
  try {
    return /\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return true;
  }
}

describe.runIf(bwrapWorks)("resources outside the isolate, from a sandbox process's main realm", () => {
  it.runIf(PRLIMIT !== undefined)("fd_flood: stops at RLIMIT_NOFILE (EMFILE), not at the host's limit", async () => {
    const attack = launch("fd_flood");
    await waitFor(() => attack.lines.some((line) => line.startsWith("stopped ")), 20_000);
    const [, open, code] = (attack.lines.find((line) => line.startsWith("stopped ")) as string).split(" ");
    expect(code).toBe("EMFILE");
    expect(Number(open)).toBeLessThanOrEqual(DEFAULT_RLIMIT_NOFILE);
    expect(Number(open)).toBeGreaterThan(DEFAULT_RLIMIT_NOFILE - 16);
  });

  describe.runIf(watchdogStatus().holds)("the watchdog", () => {
    it("memory_hoard: memory the main realm allocates and touches is reported, and the process is killed", async () => {
      const what = await watchAndKill(launch("memory_hoard"), { ...ROOMY, memoryBytes: 250 * MB });
      expect(what).toMatch(/^memory: [\d,]+ MB resident \([\d,]+ MB of it page tables\) or more in sandbox process \d+'s tree, limit 250 MB$/);
    });

    it("page_table_bomb: page tables the main realm makes by touching address space it never fills are memory: reported, killed", async () => {
      const attack = launch("page_table_bomb");
      const what = await watchAndKill(attack, { ...ROOMY, memoryBytes: 250 * MB });
      // Killed for resident memory and page tables together, where the resident set alone was under the
      // limit: the page tables made the kill. (How much of it they were depends on how far the process's
      // own heap had grown by then: on a loaded machine 102 MB of 250 was seen.)
      const [, heldMb, pageTablesMb] = /([\d,.]+) MB resident \(([\d,.]+) MB of it page tables\)/.exec(what) ?? [];
      const number = (text: string | undefined) => Number(text?.replace(/,/g, ""));
      expect(number(heldMb)).toBeGreaterThanOrEqual(250);
      expect(number(pageTablesMb)).toBeGreaterThan(0);
      expect(number(heldMb) - number(pageTablesMb)).toBeLessThan(250);
      const rss = attack.lines.filter((line) => line.startsWith("rss ")).map((line) => Number(line.slice(4)));
      expect(rss.length).toBeGreaterThan(0);
      expect(Math.max(...rss)).toBeLessThan(250 * MB);
    });

    it("thread_bomb: the main realm starts no worker thread (the permission model); the watchdog has nothing to report", async () => {
      // Threads beyond Node's own need native code, which JavaScript there cannot load (process-escape.test.ts);
      // the watchdog's count of threads is tested on a process without the launch (resource-watchdog.test.ts).
      const attack = launch("thread_bomb");
      await waitFor(() => attack.lines.some((line) => line.startsWith("stopped ")), 15_000);
      const [, code, threads] = /^stopped (\S+) (\d+)$/.exec(attack.lines.find((line) => line.startsWith("stopped ")) ?? "") ?? [];
      expect(code).toBe("ERR_ACCESS_DENIED");
      expect(Number(threads)).toBeLessThan(40);
    });

    it("tmpfs_fill: the launch's in-memory file systems take nothing: no write allowed, /, /dev and /tmp read-only", async () => {
      const attack = launch("tmpfs_fill");
      await waitFor(() => attack.lines.some((line) => line.startsWith("stopped ")), 15_000);
      const [, written, code] = /^stopped (\d+) (\w+)$/.exec(attack.lines.find((line) => line.startsWith("stopped ")) ?? "") ?? [];
      // Node's permission model refuses every write (child-spawn.ts); beneath it the root, /dev and /tmp are read-only (os-sandbox.ts).
      expect(Number(written)).toBe(0);
      expect(code).toBe("ERR_ACCESS_DENIED");
      // What the watchdog still counts in files, should a write get through, is covered by the unit tests.
      watchdog = new ResourceWatchdog();
      let over: string | undefined;
      watchdog.watch(attack.child.pid as number, { ...ROOMY, memoryBytes: 250 * MB }, (what) => (over = what));
      const ticks = watchdog.ticks;
      await waitFor(() => (watchdog as ResourceWatchdog).ticks >= ticks + 3, 5_000);
      expect(over).toBeUndefined();
    });
  });
});
