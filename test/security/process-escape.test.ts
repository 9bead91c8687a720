import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { DEFAULT_PYTHON_INTERPRETERS } from "../../src/isolation/isolate/isolate-runner-options.js";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { bwrapCommand, osSandboxStatus } from "../../src/isolation/os/os-sandbox.js";
import { runtimeNodePath } from "../../src/node-runtime.js";
import { spawnSandboxChild } from "../../src/isolation/pool/child-spawn.js";

/**
 * Code that escaped an isolate runs in the sandbox process's main realm; these attacks try to leave
 * the process's confinement by making new processes and namespaces, from inside the real launch
 * (bubblewrap with the seccomp program, as os-sandbox.ts builds it). Before the filter checked `clone`,
 * `clone(CLONE_NEWUSER|…)` gave the attacker a child with every capability in fresh namespaces.
 * The filter is built for x86_64 only; without bwrap the OS sandbox tests are skipped (CI has it).
 */
const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "outside-isolate");
const bwrapWorks = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "true"]).status === 0;
if (!bwrapWorks && process.env["CI"] === "true") throw new Error("bubblewrap is required on CI (.ci/run installs it) but does not work here");
const sandboxed = bwrapWorks && process.arch === "x64";
if (!sandboxed)
  console.warn(
    `process-escape tests skipped: ${bwrapWorks ? "the seccomp filter is built for x86_64 only" : "bubblewrap is not installed or cannot create namespaces"}`,
  );
const suite = sandboxed ? describe : describe.skip;

/** A python3 the launch can see (its read-only binds hold /usr and /bin, not a home folder's). */
const PYTHON = ["/usr/bin/python3", "/bin/python3"].find((path) => existsSync(path));
if (sandboxed && !PYTHON) console.warn("process_escape.py skipped: no python3 in /usr/bin or /bin to make raw system calls (process_escape.mjs still runs)");
const EPERM = 1;
const ENOSYS = 38;

/** Everything a child wrote on `stream` until it exited (bounded: the probes print one line). */
function outputOf(child: ChildProcess, stream: "stdout" | "stderr"): Promise<{ text: string; code: number | null }> {
  let text = "";
  child[stream]?.on("data", (chunk: Buffer) => {
    if (text.length < 100_000) text += chunk.toString();
  });
  return new Promise((resolve) => child.once("exit", (code) => resolve({ text, code })));
}

/** `fixture` of test/fixtures/outside-isolate run under the real launch in place of the entry: its stderr and how it ended. */
async function underTheLaunch(fixture: string): Promise<{ text: string; code: number | null; signal: NodeJS.Signals | null }> {
  const child = spawnSandboxChild({
    osSandbox: osSandboxStatus("required"),
    nice: 0,
    warmPoolBytes: 0,
    maxIdleIsolates: 0,
    isolateSnapshot: false,
    pythonInterpreters: DEFAULT_PYTHON_INTERPRETERS,
    compactIdleAfterMs: 0,
    toolsPerIsolate: 1,
    entryScript: join(FIXTURES, fixture),
  });
  const [{ text }, signal] = await Promise.all([
    outputOf(child, "stderr"),
    new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_code, sig) => resolve(sig))),
  ]);
  return { text, code: child.exitCode, signal };
}

suite("new processes and namespaces from a sandbox process's main realm (seccomp)", () => {
  it.runIf(PYTHON !== undefined)(
    "process_escape.py: clone with namespace flags, fork and widening the CPU set or policy are refused (EPERM), clone3 is ENOSYS, threads run",
    async () => {
      // The launch of os-sandbox.ts, running python3 (native system calls through ctypes) instead of Node.
      const { command, args, seccomp } = bwrapCommand([], 4, [FIXTURES]);
      const node = args.lastIndexOf(runtimeNodePath());
      expect(args[node - 1]).toBe("--");
      const child = spawn(command, [...args.slice(0, node), PYTHON as string, join(FIXTURES, "process_escape.py")], {
        env: {},
        stdio: ["ignore", "pipe", "pipe", "ignore", "pipe"],
      });
      (child.stdio[4] as Writable).end(seccomp);
      const [{ text, code }, errors] = await Promise.all([outputOf(child, "stdout"), outputOf(child, "stderr")]);
      expect(code, errors.text).toBe(0);
      const out = JSON.parse(text) as Record<string, unknown>;
      for (const ns of ["newuser", "newns", "newnet", "newpid", "newipc", "newuts", "newcgroup"]) expect(out[`clone_${ns}`], ns).toEqual([-1, EPERM]);
      expect(out["clone_thread_newuser"]).toEqual([-1, EPERM]); // the namespace is refused even on a thread
      expect(out["clone3_newuser"]).toEqual([-1, ENOSYS]);
      expect(out["fork"]).toEqual([-1, EPERM]);
      expect(out["sched_setaffinity"]).toEqual([-1, EPERM]); // taskset_undone: a demoted process keeps its CPUs
      expect(out["sched_setscheduler"]).toEqual([-1, EPERM]);
      expect(out["clone_fork"]).toEqual([-1, EPERM]);
      expect(out["os_fork"]).toBe(EPERM); // glibc's fork (clone without CLONE_THREAD)
      expect(out["thread"]).toBe(true); // pthread_create: clone3 → ENOSYS → clone with CLONE_THREAD
    },
  );

  it("process_escape.mjs: under the real launch (spawnSandboxChild), no process, execve, written file or worker thread", async () => {
    const { text, code } = await underTheLaunch("process_escape.mjs");
    expect(code, text).toBe(0);
    const out = JSON.parse(text.trim().split("\n").at(-1) as string) as Record<string, unknown>;
    // Node's permission model refuses each before a system call is made (seccomp refuses a fork beneath
    // it: process_escape.py above), so JavaScript alone has no way out of JavaScript.
    expect(out).toEqual({
      spawn: "ERR_ACCESS_DENIED",
      execve: "ERR_ACCESS_DENIED",
      writeTmp: "ERR_ACCESS_DENIED",
      sqlite: "ERR_UNKNOWN_BUILTIN_MODULE",
      worker: "ERR_ACCESS_DENIED",
    });
  });

  it("v8_flags_at_run_time: V8's flags are frozen: an attempt to turn WebAssembly's bounds checks off ends the process", async () => {
    const { text, code, signal } = await underTheLaunch("v8_flags_at_run_time.mjs");
    expect(text).toContain("trying");
    expect(text).not.toContain("changed");
    expect(code === 0 && signal === null).toBe(false);
  });

  it("inotify_watch: no inotify watch (kernel memory and the host user's quota): refused by seccomp", async () => {
    const { text } = await underTheLaunch("inotify_watch.mjs");
    expect(text.trim()).toBe("stopped EPERM");
  });
});
