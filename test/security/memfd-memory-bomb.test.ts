import { readdirSync, readlinkSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { CallOutcome, CallRequest } from "../../src/isolation/wire/messages.js";
import { processTree } from "../../src/isolation/os/process-cpu.js";
import { REFUSED_SYSCALLS_X86_64 } from "../../src/isolation/os/seccomp-filter.js";
import { SandboxPool } from "../../src/isolation/pool/sandbox-pool.js";
import { PROJECT_ROOT } from "./harness.js";

/**
 * Memory the host cannot see: a compromised sandbox process (test/fixtures/compromised/memfd-memory-bomb.mjs,
 * under the host's real launch) tries to hold memory in memfd files, System V shared memory, message
 * queues and semaphores, a POSIX message queue and POSIX shared memory (/dev/shm), none of which shows
 * in a resident set while unmapped (os/resource-watchdog.ts). The seccomp filter refuses each call with
 * EPERM, as it refuses everything else, and /dev/shm is read-only: nothing is held, and the process,
 * which harmed no one, keeps serving, as does everyone else's. The filter is built for x86_64 only;
 * without bwrap these tests are skipped (CI has it).
 */
const BOMB = join(PROJECT_ROOT, "test", "fixtures", "compromised", "memfd-memory-bomb.mjs");
const bwrapWorks = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "true"]).status === 0;
if (!bwrapWorks && process.env["CI"] === "true") throw new Error("bubblewrap is required on CI (.ci/run installs it) but does not work here");
const sandboxed = bwrapWorks && process.arch === "x64";
if (!sandboxed) console.warn(`memfd-memory-bomb skipped: ${bwrapWorks ? "the seccomp filter is built for x86_64 only" : "bubblewrap is not installed"}`);
const EPERM = 1;

const BUNDLE = {
  hash: "memfd-memory-bomb-waiting",
  displayName: "personal/waiting.js",
  code: `__awRegister({ dispatch: (name) => name === "waiting_quick" ? "done" : new Promise(() => {}) });`,
};

function request(anima: string, schemaName: string, args: Record<string, unknown> = {}): CallRequest {
  return {
    op: "call",
    bundle: BUNDLE,
    context: { anima, animaDir: `/nonexistent/animas/${anima}`, tool: "waiting" },
    entry: "call",
    schemaName,
    payloadJson: JSON.stringify(args),
    timeoutMs: 20_000,
    memoryLimitMb: 32,
    maxResultBytes: 10_000,
    maxLogLines: 10,
    maxLogLineChars: 100,
  };
}

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

  it("is refused (EPERM; /dev/shm read-only), nothing is held, and the host keeps serving", async () => {
    const violations: string[] = [];
    pool = new SandboxPool({ osSandbox: "required", entryScript: BOMB, onStderr: () => {}, onViolation: (message) => violations.push(message) });
    expect(await pool.call(request("alice", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    const alicePid = pool.pidFor("alice") as number;

    const outcome: CallOutcome = await pool.call(request("eve", "waiting_forever", { attack: "memfd_memory_bomb" }));
    expect(outcome).toMatchObject({ ok: true, value: { kind: "text" } });
    const report = JSON.parse(outcome.ok && "value" in outcome && outcome.value.kind === "text" ? outcome.value.text : "{}") as Record<string, unknown>;
    expect(report["ffi"], "the fixture makes its system calls through node:ffi").toBe("ok");
    for (const call of ["memfd_create", "memfd_secret", "shmget", "msgget", "semget", "mq_open"]) expect(report[call], call).toEqual([-1, EPERM]);
    expect(report["shm_open"]).toBe("EROFS");
    // Nothing held: no memfd, no System V object in its IPC namespace, nothing in /dev/shm.
    expect(report["held"]).toEqual({});
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
    expect(await pool.call(request("eve", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(pool.pidFor("eve")).toBe(evePid);
    expect(await pool.call(request("alice", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(pool.pidFor("alice")).toBe(alicePid);
    expect(violations).toEqual([]);
  }, 30_000);
});

describe("the seccomp filter's refusals of memory outside every resident set", () => {
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
