import { readdirSync, readFileSync } from "node:fs";

/**
 * CPU time of a process and its descendants, read by the host from /proc (Linux). A sandbox process
 * inside bubblewrap is bwrap's child, so the whole tree counts. What the host measured itself: nothing a
 * sandbox process says enters it. `undefined` where /proc cannot be read (other systems, a process gone).
 *
 * `offMainMs` leaves out each process's main thread: in a sandbox process that thread relays messages
 * (a tool that makes many capability calls keeps it busy while its isolate waits); tool code runs on
 * isolated-vm's threads, which is what `offMainMs` counts (with V8's helper threads).
 *
 * The same tree walk and stat parsing give each thread's scheduling (`taskScheduling`), which the host
 * checks after lowering a running process (low-priority.ts).
 */
export interface TreeCpu {
  totalMs: number;
  offMainMs: number;
}

/** Clock ticks per second of /proc's utime and stime (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;
/** Descendants followed at most: a sandbox process that forks without end cannot slow the host down. */
const MAX_PROCESSES = 16;

export function processTreeCpu(pid: number): TreeCpu | undefined {
  let ticks = 0;
  let mainTicks = 0;
  const tree = processTree(pid);
  for (const next of tree) {
    const own = ticksOf(`/proc/${next}/stat`);
    if (own === undefined) {
      if (next === pid) return undefined;
      continue;
    }
    ticks += own;
    mainTicks += Math.min(own, ticksOf(`/proc/${next}/task/${next}/stat`) ?? own);
  }
  return { totalMs: (ticks * 1000) / TICKS_PER_SECOND, offMainMs: ((ticks - mainTicks) * 1000) / TICKS_PER_SECOND };
}

/** `pid` and the descendants /proc shows it has now (at most `MAX_PROCESSES` in all). */
export function processTree(pid: number): number[] {
  const pending = [pid];
  const tree: number[] = [];
  while (pending.length > 0 && tree.length < MAX_PROCESSES) {
    const next = pending.pop() as number;
    tree.push(next);
    pending.push(...childrenOf(next));
  }
  return tree;
}

/**
 * Whether a sandbox process tree that does not answer is stopped (SIGSTOP, SIGTSTP: state `T`; a
 * tracer: `t`, as /proc says), and whether the host can tell the stop came from outside the sandbox:
 *  - "outside": a process of the launch that the sandbox's code cannot signal is stopped: bwrap, outside
 *    the sandbox's pid namespace, or bwrap's init, pid 1 of that namespace, which the kernel spares any
 *    SIGSTOP sent from inside it. (They are the tree's members with children; seccomp refuses the
 *    sandbox's Node new processes, so it has none.)
 *  - "itself": only the process that runs the sandbox's code (or a thread of it) is stopped. That code
 *    can stop itself (`process.kill(process.pid, "SIGSTOP")` inside its namespace), and a stop sent from
 *    outside to that process alone looks the same: the host cannot tell them apart, so it charges the
 *    tool. Without bubblewrap the tree is that one process, and every stop is this one.
 * `undefined` when nothing of the tree is stopped.
 */
export function stoppedHow(pid: number): "outside" | "itself" | undefined {
  const tree = processTree(pid);
  let itself = false;
  for (const member of tree) {
    const wrapper = childrenOf(member).length > 0;
    // The launch's wrappers are single-threaded; the sandbox's process may be stopped in any of its threads.
    const states = wrapper ? [stateOf(`/proc/${member}/stat`)] : tasksOf(member).map((tid) => stateOf(`/proc/${member}/task/${tid}/stat`));
    if (!states.some((state) => state === "T" || state === "t")) continue;
    if (wrapper) return "outside";
    itself = true;
  }
  return itself ? "itself" : undefined;
}

/** The state letter of a /proc stat file (`R`, `S`, `T`…), or undefined when it is gone. */
function stateOf(path: string): string | undefined {
  return statFields(path)?.[0];
}

/** Thread ids of process `pid` ([] when it is gone). */
export function tasksOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).map(Number).filter(Number.isInteger);
  } catch {
    return [];
  }
}

/** SCHED_IDLE, as /proc's `policy` field shows it. */
export const SCHED_IDLE = 5;

/** Nice value and scheduling policy of thread `tid` of process `pid`, or undefined when it is gone. */
export function taskScheduling(pid: number, tid: number): { nice: number; policy: number } | undefined {
  const fields = statFields(`/proc/${pid}/task/${tid}/stat`);
  if (!fields) return undefined;
  const nice = Number(fields[16]);
  const policy = Number(fields[38]);
  return Number.isInteger(nice) && Number.isInteger(policy) ? { nice, policy } : undefined;
}

/** The fields of a /proc stat file after the command name, from field 3 (state) on. */
function statFields(path: string): string[] | undefined {
  let stat: string;
  try {
    stat = readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses: fields are counted after its last ")".
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

function ticksOf(path: string): number | undefined {
  const fields = statFields(path);
  if (!fields) return undefined;
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return Number.isFinite(utime) && Number.isFinite(stime) ? utime + stime : undefined;
}

function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const task of tasksOf(pid)) {
    try {
      for (const child of readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").split(" ")) if (child) children.push(Number(child));
    } catch {
      // the thread ended meanwhile
    }
  }
  return children;
}
