import { waitingRequest } from "../helpers/waiting-requests.js";
import { existsSync, readdirSync, readlinkSync } from "node:fs";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import type { Writable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import type { CallOutcome } from "../../src/isolation/wire/messages.js";
import { processTree } from "../../src/isolation/os/process-cpu.js";
import { REFUSED_SYSCALLS_X86_64 } from "../../src/isolation/os/seccomp-filter.js";
import { SandboxPool } from "../../src/isolation/pool/sandbox-pool.js";
import { bwrapCommand } from "../../src/isolation/os/os-sandbox.js";
import { runtimeNodePath, sandboxRuntimeHasFfi } from "../../src/node-runtime.js";
import { PROJECT_ROOT } from "./harness.js";

/**
 * Memory the host cannot see: code that escaped an isolate tries to hold memory in memfd files, System V
 * shared memory, message queues and semaphores, a POSIX message queue and POSIX shared memory
 * (/dev/shm), none of which shows in a resident set while unmapped (os/resource-watchdog.ts). Under the
 * host's real launch: the seccomp filter refuses each call with EPERM, as it refuses everything else
 * (test/fixtures/outside-isolate/memfd_bomb.py makes them natively, through ctypes); JavaScript in the
 * process's main realm cannot make them at all, `node:ffi` being switched off
 * (test/fixtures/compromised/memfd-memory-bomb.mjs, in place of the process's entry); /dev/shm is
 * read-only. Nothing is held, and the process, which harmed no one, keeps serving, as does everyone
 * else's. The filter is built for x86_64 only; without bwrap these tests are skipped (CI has it).
 */
const BOMB = join(PROJECT_ROOT, "test", "fixtures", "compromised", "memfd-memory-bomb.mjs");
const NATIVE_BOMB = join(PROJECT_ROOT, "test", "fixtures", "outside-isolate", "memfd_bomb.py");
/** A python3 the launch can see (its read-only binds hold /usr and /bin). */
const PYTHON = ["/usr/bin/python3", "/bin/python3"].find((path) => existsSync(path));
const bwrapWorks = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "true"]).status === 0;
if (!bwrapWorks && process.env["CI"] === "true") throw new Error("bubblewrap is required on CI (.ci/run installs it) but does not work here");
const sandboxed = bwrapWorks && process.arch === "x64";
if (!sandboxed) console.warn(`memfd-memory-bomb skipped: ${bwrapWorks ? "the seccomp filter is built for x86_64 only" : "bubblewrap is not installed"}`);
const EPERM = 1;

/** Descriptors of `pid` that are memfd files, as the host reads them. */
function memfdsOf(pid: number): string[] {
  return readdirSync(`/proc/${pid}/fd`).filter((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("/memfd:");
    } catch {
      return false;
    }
  });
}

describe.runIf(sandboxed)("memfd_memory_bomb: memory outside every resident set, from a sandbox process's main realm", () => {
  let pool: SandboxPool | undefined;
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
  });

  it.runIf(PYTHON !== undefined)("memfd_bomb.py: each call is refused (EPERM) natively, and nothing is held", async () => {
    // The launch of os-sandbox.ts, running python3 (native system calls through ctypes) instead of Node.
    const { command, args, seccomp } = bwrapCommand([], 4, [join(NATIVE_BOMB, "..")]);
    const node = args.lastIndexOf(runtimeNodePath());
    expect(args[node - 1]).toBe("--");
    const child = spawn(command, [...args.slice(0, node), PYTHON as string, NATIVE_BOMB], { env: {}, stdio: ["ignore", "pipe", "pipe", "ignore", "pipe"] });
    (child.stdio[4] as Writable).end(seccomp);
    const [{ text, code }, errors] = await Promise.all([outputOf(child, "stdout"), outputOf(child, "stderr")]);
    expect(code, errors.text).toBe(0);
    const report = JSON.parse(text) as Record<string, unknown>;
    for (const call of ["memfd_create", "memfd_secret", "shmget", "msgget", "semget", "mq_open"]) expect(report[call], call).toEqual([-1, EPERM]);
    expect(report["held"]).toEqual({});
    expect(report["memfds"]).toEqual([]);
    expect(report["sysvipc"]).toEqual({ shm: 0, msg: 0, sem: 0 });
  });

  it("from JavaScript: node:ffi is off, no file written, nothing is held, and the host keeps serving", async () => {
    const violations: string[] = [];
    pool = new SandboxPool({ osSandbox: "required", entryScript: BOMB, onStderr: () => {}, onViolation: (message) => violations.push(message) });
    expect(await pool.call(waitingRequest("alice", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    const alicePid = pool.pidFor("alice") as number;

    const outcome: CallOutcome = await pool.call(waitingRequest("eve", "waiting_forever", { attack: "memfd_memory_bomb" }));
    expect(outcome).toMatchObject({ ok: true, value: { kind: "text" } });
    const report = JSON.parse(outcome.ok && "value" in outcome && outcome.value.kind === "text" ? outcome.value.text : "{}") as Record<string, unknown>;
    // Where the runtime has node:ffi (Node 26), the launch switches it off; older lines have none.
    expect(report["ffi"]).toBe("ERR_UNKNOWN_BUILTIN_MODULE");
    expect(report["shm_open"]).toBe("ERR_ACCESS_DENIED"); // the permission model; /dev is read-only beneath it
    // Nothing held: no memfd, no System V object in its IPC namespace, nothing in /dev/shm.
    expect(report["memfds"]).toEqual([]);
    expect(report["sysvipc"]).toEqual({ shm: 0, msg: 0, sem: 0 });
    expect(report["devShm"]).toEqual([]);

    // Seen from the host: eve's process (bwrap, its init, node) holds no memfd and its /dev/shm is empty.
    const evePid = pool.pidFor("eve") as number;
    const tree = processTree(evePid);
    expect(tree.length).toBe(3);
    for (const pid of tree) expect(memfdsOf(pid), `process ${pid}`).toEqual([]);
    expect(readdirSync(`/proc/${tree.at(-1)}/root/dev/shm`)).toEqual([]);

    // A refused call is no violation: the process harmed no one but itself, and serves on, as does alice's.
    expect(await pool.call(waitingRequest("eve", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(pool.pidFor("eve")).toBe(evePid);
    expect(await pool.call(waitingRequest("alice", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(pool.pidFor("alice")).toBe(alicePid);
    expect(violations).toEqual([]);
  }, 30_000);
});

/** Everything a child wrote on `stream` until it exited (bounded: the probe prints one line). */
function outputOf(child: ChildProcess, stream: "stdout" | "stderr"): Promise<{ text: string; code: number | null }> {
  let text = "";
  child[stream]?.on("data", (chunk: Buffer) => {
    if (text.length < 100_000) text += chunk.toString();
  });
  return new Promise((resolve) => child.once("exit", (code) => resolve({ text, code })));
}

describe("the seccomp filter's refusals of memory outside every resident set", () => {
  it("the pinned runtime has node:ffi, which the sandbox launch switches off", () => {
    // If a runtime update drops the flag, this says so (and the launch then simply omits it).
    expect(sandboxRuntimeHasFfi()).toBe(true);
  });

  it("names each call by its x86_64 number", () => {
    expect(REFUSED_SYSCALLS_X86_64).toMatchObject({
      memfd_create: 319,
      memfd_secret: 447,
      shmget: 29,
      shmat: 30,
      shmctl: 31,
      shmdt: 67,
      semget: 64,
      semop: 65,
      semctl: 66,
      semtimedop: 220,
      msgget: 68,
      msgsnd: 69,
      msgrcv: 70,
      msgctl: 71,
      mq_open: 240,
    });
  });
});
