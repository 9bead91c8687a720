import { existsSync, readFileSync } from "node:fs";
import { setPriority } from "node:os";
import { SCHED_IDLE, processTree, taskScheduling, tasksOf } from "./process-cpu.js";
import { Rescheduler } from "./rescheduler.js";

/**
 * How the low-priority sandbox process is started (see SandboxPool): the host, not the process, sets
 * its scheduling, before the process starts, so that code which escaped an isolate there cannot undo it.
 *
 *  - SCHED_IDLE (`chrt --idle 0`): its threads get a core only when no normal thread wants it, and are
 *    preempted at once when one wakes. A nice value alone is not enough under the EEVDF scheduler
 *    (Linux 6.6+): a spinning thread at nice 19 still runs out its slice before a woken normal thread
 *    gets the core (measured: quiet Animas' p99 ×4–6). An unprivileged process cannot leave SCHED_IDLE.
 *  - The upper half of the CPUs this host may use (`taskset`), when it may use two or more: the other
 *    half never runs demoted work at all. Even at SCHED_IDLE, spinning threads on every core cost a
 *    woken thread its caches and the hardware's sharing (measured: p99 ×1.9–3.5 beside spinners on all
 *    cores, ×1.2 with them kept to half).
 *  - A nice value (`LOW_PRIORITY_NICE`), which the process also sets on itself (child/main.ts), for
 *    machines without chrt.
 * Where util-linux's tools are missing, the prefix is shorter; the process always starts.
 *
 * A process that is already running can be given the same scheduling (`lowerRunning`: a normal sandbox
 * process the host demotes in place, see SandboxPool). Every thread of its tree is changed from here;
 * threads it starts later inherit the scheduling of the thread that starts them, and `isLowered` tells
 * the host whether one slipped through (to lower the tree again). An unprivileged process cannot undo it.
 * chrt and taskset run in a long-lived shell for that (rescheduler.ts): spawning them from the host
 * held its event loop 75–128 ms for each process lowered.
 */

/** Nice value of the low-priority process. */
export const LOW_PRIORITY_NICE = 19;

let prefix: string[] | undefined;

/** The command words that start a process at low priority, to put before its own command. */
export function lowPriorityPrefix(): string[] {
  prefix ??= [...confineToUpperHalf(), ...findTool("chrt").flatMap((chrt) => [chrt, "--idle", "0"])];
  return prefix;
}

function confineToUpperHalf(): string[] {
  const upper = upperHalfOfCpus();
  return upper === undefined ? [] : findTool("taskset").flatMap((taskset) => [taskset, "--cpu-list", upper]);
}

/** The upper half of this host's allowed CPUs as a CPU list, or undefined with fewer than two. */
function upperHalfOfCpus(): string | undefined {
  const cpus = allowedCpus();
  return cpus.length < 2 ? undefined : cpus.slice(Math.floor(cpus.length / 2)).join(",");
}

/** The rescheduler `lowerRunning` uses: chrt and taskset where they exist (taskset only with two CPUs or more). */
export function createRescheduler(): Rescheduler {
  return new Rescheduler(findTool("chrt")[0], upperHalfOfCpus() === undefined ? undefined : findTool("taskset")[0]);
}

/**
 * Gives the running process `pid` and its descendants the low-priority process's scheduling, every
 * thread: the nice value at once, from here; SCHED_IDLE and the upper half of the CPUs through
 * `rescheduler` (chrt and taskset, `--all-tasks`), which runs them off the host's event loop. Resolves
 * once those have run; never rejects (a process that ended meanwhile is fine).
 */
export async function lowerRunning(pid: number, rescheduler: Rescheduler): Promise<void> {
  const tree = processTree(pid);
  for (const process of tree) {
    for (const tid of tasksOf(process)) {
      try {
        setPriority(tid, LOW_PRIORITY_NICE);
      } catch {
        // the thread ended meanwhile
      }
    }
  }
  const upper = upperHalfOfCpus();
  await Promise.all(tree.map((process) => rescheduler.lower(process, upper)));
}

/** True when every thread of `pid`'s tree runs as `lowerRunning` leaves it (SCHED_IDLE where chrt exists, else the nice value). */
export function isLowered(pid: number): boolean {
  const idle = findTool("chrt").length > 0;
  return processTree(pid).every((process) =>
    tasksOf(process).every((tid) => {
      const now = taskScheduling(process, tid);
      return now === undefined || (idle ? now.policy === SCHED_IDLE : now.nice >= LOW_PRIORITY_NICE);
    }),
  );
}

/** This process's allowed CPUs (`Cpus_allowed_list` of /proc/self/status), or [] where unknown. */
export function allowedCpus(): number[] {
  let status: string;
  try {
    status = readFileSync("/proc/self/status", "utf8");
  } catch {
    return [];
  }
  const list = /^Cpus_allowed_list:\s*(.+)$/m.exec(status)?.[1]?.trim();
  if (!list) return [];
  const cpus: number[] = [];
  for (const part of list.split(",")) {
    const match = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!match) return [];
    const first = Number(match[1]);
    const last = match[2] === undefined ? first : Number(match[2]);
    for (let cpu = first; cpu <= last && cpus.length < 4_096; cpu++) cpus.push(cpu);
  }
  return cpus;
}

function findTool(name: string): string[] {
  return [`/usr/bin/${name}`, `/bin/${name}`].filter((path) => existsSync(path)).slice(0, 1);
}

/** One line for the audit report: how the low-priority process runs on this machine. */
export function describeLowPriority(): string {
  const words = lowPriorityPrefix();
  const cpus = words.indexOf("--cpu-list");
  const parts = [
    "its calls run in a low-priority sandbox process",
    words.includes("--idle") ? "SCHED_IDLE" : `nice ${LOW_PRIORITY_NICE} (chrt not found: no SCHED_IDLE)`,
    cpus >= 0 ? `CPUs ${words[cpus + 1]} only` : "on every CPU (taskset not found, or one CPU)",
  ];
  return `${parts[0]} (${parts.slice(1).join(", ")}); a process its long calls keep busy is lowered the same way where it runs and replaced`;
}
