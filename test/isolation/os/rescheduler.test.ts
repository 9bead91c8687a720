import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { allowedCpus, createRescheduler, isLowered, lowerRunning } from "../../../src/isolation/os/low-priority.js";
import { SCHED_IDLE, processTree, taskScheduling, tasksOf } from "../../../src/isolation/os/process-cpu.js";
import { Rescheduler } from "../../../src/isolation/os/rescheduler.js";

const CHRT = ["/usr/bin/chrt", "/bin/chrt"].find((path) => existsSync(path));
const TASKSET = ["/usr/bin/taskset", "/bin/taskset"].find((path) => existsSync(path));

const started: ChildProcess[] = [];
const reschedulers: Rescheduler[] = [];

/** A node process with a worker thread (two threads at least to lower), resolved once both run. */
async function startTarget(): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      "-e",
      `const { Worker } = require("node:worker_threads"); new Worker("setInterval(() => {}, 1000); require('node:worker_threads').parentPort.postMessage(1)", { eval: true }).on("message", () => console.log("ready")); setInterval(() => {}, 1000);`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  started.push(child);
  await new Promise<void>((resolve) => child.stdout?.on("data", (chunk: Buffer) => chunk.toString().includes("ready") && resolve()));
  return child;
}

function cpusAllowed(pid: number, tid: number): string | undefined {
  return /^Cpus_allowed_list:\s*(.+)$/m.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8"))?.[1]?.trim();
}

/** The shells `rescheduler` started (children of this process running /bin/sh). */
function shellsOfThisProcess(): number[] {
  return processTree(process.pid).filter((pid) => {
    try {
      return pid !== process.pid && readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("/bin/sh\0-c\0chrt=");
    } catch {
      return false; // it ended meanwhile
    }
  });
}

function track(rescheduler: Rescheduler): Rescheduler {
  reschedulers.push(rescheduler);
  return rescheduler;
}

afterEach(async () => {
  for (const rescheduler of reschedulers.splice(0)) rescheduler.stop();
  for (const child of started.splice(0)) child.kill("SIGKILL");
  // A stopped shell ends on its own once it reads the end of its input.
  await expect.poll(() => shellsOfThisProcess().length, { timeout: 5_000 }).toBe(0);
});

describe.skipIf(!CHRT)("Rescheduler", () => {
  it("puts every thread of a running process under SCHED_IDLE, and on the CPUs it is given", async () => {
    const target = await startTarget();
    const pid = target.pid as number;
    const cpu = String(allowedCpus().at(-1) ?? 0);
    await track(new Rescheduler(CHRT, TASKSET)).lower(pid, TASKSET ? cpu : undefined);
    const threads = tasksOf(pid);
    expect(threads.length).toBeGreaterThan(1);
    for (const tid of threads) {
      expect(taskScheduling(pid, tid)?.policy).toBe(SCHED_IDLE);
      if (TASKSET) expect(cpusAllowed(pid, tid)).toBe(cpu);
    }
  });

  it("lowerRunning leaves the whole process at low priority, as isLowered checks", async () => {
    const target = await startTarget();
    const pid = target.pid as number;
    expect(isLowered(pid)).toBe(false);
    await lowerRunning(pid, track(createRescheduler()));
    expect(isLowered(pid)).toBe(true);
  });

  it("runs chrt and taskset in its one shell, not as children of the host", async () => {
    const rescheduler = track(new Rescheduler(CHRT, TASKSET));
    rescheduler.prepare();
    const shells = shellsOfThisProcess();
    expect(shells).toHaveLength(1);
    const targets = await Promise.all([startTarget(), startTarget()]);
    await Promise.all(targets.map((target) => rescheduler.lower(target.pid as number, undefined)));
    // Still the same shell, and the only one.
    expect(shellsOfThisProcess()).toEqual(shells);
  });

  it("refuses a process id or CPU list that is not one, before anything reaches the shell", () => {
    const rescheduler = track(new Rescheduler(CHRT, TASKSET));
    for (const pid of [0, -1, 1.5, Number.NaN]) expect(() => rescheduler.lower(pid, undefined)).toThrow(RangeError);
    for (const cpus of ["", "1;reboot", "1 2", "0-3", "1,"]) expect(() => rescheduler.lower(process.pid, cpus)).toThrow(RangeError);
  });

  it("starts its shell again when it died, and after stop resolves at once with no shell", async () => {
    const rescheduler = track(new Rescheduler(CHRT, TASKSET));
    rescheduler.prepare();
    const [first] = shellsOfThisProcess();
    expect(first).toBeDefined();
    process.kill(first as number, "SIGKILL");
    const target = await startTarget();
    await expect.poll(() => shellsOfThisProcess().length === 0, { timeout: 5_000 }).toBe(true);
    await rescheduler.lower(target.pid as number, undefined);
    expect(taskScheduling(target.pid as number, target.pid as number)?.policy).toBe(SCHED_IDLE);
    expect(shellsOfThisProcess()).toHaveLength(1);

    rescheduler.stop();
    await expect.poll(() => shellsOfThisProcess().length, { timeout: 5_000 }).toBe(0);
    await rescheduler.lower(target.pid as number, undefined);
    expect(shellsOfThisProcess()).toHaveLength(0);
  });

  it("does not keep the host's process alive", () => {
    // The timer keeps it alive until the lowering is done; after that only the shell is left, which must not hold it.
    const script = `const keep = setTimeout(() => {}, 60_000);
      import(${JSON.stringify(new URL("../../../dist/src/isolation/os/rescheduler.js", import.meta.url).href)})
        .then(({ Rescheduler }) => { const r = new Rescheduler(${JSON.stringify(CHRT)}, undefined); r.prepare(); return r.lower(process.pid, undefined); })
        .then(() => { clearTimeout(keep); console.log("lowered"); });`;
    // The bound is only "it ended by itself": on a busy machine (npm run test:busy) the start of Node and
    // of chrt took 13 s once.
    const run = spawnSync(process.execPath, ["-e", script], { encoding: "utf8", timeout: 60_000 });
    expect(run.error).toBeUndefined();
    expect(run.stdout.trim()).toBe("lowered");
    expect(run.status).toBe(0);
  }, 90_000);
});
