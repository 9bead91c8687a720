import { opendirSync, readFileSync } from "node:fs";
import { hostMemoryDevices, memoryFileSystemsOf, usedBytes } from "./memory-file-systems.js";
import { Verdict, childrenOf, countFds, hostSeccomp, readStatus, runsUnderExtraFilter } from "./proc-readers.js";
import { tasksOf } from "./process-cpu.js";

/**
 * What the host measures of each sandbox process from /proc, beside the isolates' own heap limits: code
 * that escaped an isolate runs in the process's main realm, where nothing else bounds its memory, its
 * threads or its open files. Every `WATCHDOG_PERIOD_MS` one timer sums, over the process tree below
 * each watched pid (bwrap → its init → node; or node alone without the OS sandbox):
 *
 *  - memory: the resident set and the page tables of every process (VmRSS + VmPTE: touching address
 *    space without filling it makes page tables and no resident set), plus what the tree wrote into the in-memory
 *    file systems of its own mount namespace (bubblewrap's tmpfs `/`, `/tmp` and `/dev`: files there are
 *    RAM that no process's RSS shows; measured: 50 MB written to each while RSS stayed put);
 *  - tasks: threads and processes (`Threads:` of each process's status);
 *  - open files: entries of /proc/<pid>/fd, listed only where the descriptor tables (`FDSize:`) could
 *    hold more than the limit.
 * The first quantity over its limit is reported once (`onOver`), with its value and its limit, and the
 * pid is no longer watched; the caller kills the process. A tick reads a few small files per process
 * and stops as soon as a limit is crossed, so its work is bounded by the limits, not by what an
 * attacker made: a thread bomb is reported from one status line, before its threads are walked.
 * Measured: ≈ 0.2 ms a tick per sandbox process in bwrap (see WatchOptions), ≈ 10 ms for fifty.
 *
 * A process the host cannot read (EACCES: it made itself non-dumpable, which hides /proc/<pid>/fd from
 * an unprivileged host) is reported as over: it cannot be measured. A process that is gone (ENOENT) is
 * dropped silently; the pool sees its exit. Where /proc itself cannot be read, `watchdogStatus` says the
 * watchdog does not hold, and `watch` does nothing.
 *
 * Not counted: memory in memfd files or System V IPC (shared memory not mapped, message queues,
 * semaphores): under the OS sandbox the seccomp filter refuses all of these (seccomp-filter.ts), and
 * POSIX shared memory has nowhere to go (/dev/shm is read-only there; a file in /tmp is counted above
 * and /tmp holds 8 MiB); without the OS sandbox nothing refuses them. Nor the kernel's own memory for
 * the process's sockets and pipes (bounded by its 256 descriptors). The tree is followed to `MAX_TREE_PROCESSES`
 * processes: a sandbox process has three (one without bwrap), and more is reported as over.
 *
 * This module holds the limits, the timer and the tree walk; the readings are proc-readers.ts's (one
 * process's status, children and descriptors) and memory-file-systems.ts's (the tree's tmpfs mounts).
 */

/**
 * Memory a sandbox process may hold beyond its warm pool budget, MB (see `processMemoryLimitBytes`).
 * Measured with the pinned Node (bwrap, default 128 MB isolate heap limit): ≈ 62 MB after its first call;
 * ≈ 135 MB with 40 calls waiting in their isolates and ≈ 275 MB with 120; a call filling its isolate's
 * heap adds up to about that heap limit (40 such calls at once: 4.3 GB). 1,024 MB holds the base, the
 * waiting calls and about six calls at the default heap limit running at once; a process beyond it is
 * killed and replaced (its calls in flight fail), which bounds what one escaped process can take.
 */
export const DEFAULT_PROCESS_MEMORY_MB = 1_024;
/**
 * Memory a sandbox process that runs Python tools may hold beyond `DEFAULT_PROCESS_MEMORY_MB` for each
 * interpreter it keeps between calls (WebAssembly memory and code, which no isolate's limit counts), MB:
 * each is ≈ 130 MB resident and retired once it grew 32 MB past its boot. Measured without the room: a
 * process running the hostile Python tools (a memory bomb at the tool's limit among them) peaked at 892 MB
 * before spares and 1,051 MB with them, against 1,087 MB, and was killed under load.
 */
export const PYTHON_INTERPRETER_MB = 160;

/**
 * The room `PYTHON_INTERPRETER_MB` for every interpreter a process may keep between calls: the idle ones
 * of its warm pool, its spare, and a described tool's (python-spares.ts), MB. Defaults: (2 + 1 + 1) × 160.
 */
export function pythonInterpretersMb(settings: { warm: number; spare: boolean }): number {
  return (settings.warm + (settings.spare ? 1 : 0) + 1) * PYTHON_INTERPRETER_MB;
}
/**
 * Tasks (threads + processes) of one sandbox process's tree. Measured: 12 idle; isolated-vm runs each
 * isolate that is executing on a thread of its own (its pool grows past the core count instead of
 * queueing), so 40 calls spinning at once made 50 tasks and 120 made 130; calls waiting on the host hold
 * none (120 waiting: 24). 512 leaves room for ≈ 500 calls computing at once in one process and keeps a
 * thread bomb far below the machine's pid space (kernel.pid_max, 32,768 on many machines).
 */
export const DEFAULT_PROCESS_TASKS = 512;
/**
 * Open files of one sandbox process's tree. Measured: 30 in all (bwrap 5, its init 4, node 21: stdio,
 * the channel socket and bulk pipe, libuv's and V8's epoll, eventfd and wake-up pipes), the same under load
 * (tools open no file: the host does it for them). 256 is also the RLIMIT_NOFILE of resource-caps.ts.
 */
export const DEFAULT_PROCESS_OPEN_FILES = 256;
/** How often the tree of every watched process is read, ms: a crossing is reported within this plus a tick's work. */
export const WATCHDOG_PERIOD_MS = 200;
/** Processes of one tree followed at most; a tree with more is reported as over. */
export const MAX_TREE_PROCESSES = 8;

export interface ResourceLimits {
  memoryBytes: number;
  tasks: number;
  openFiles: number;
}

/** The memory limit of a process holding a warm pool of `warmPoolBytes`: the pool plus `DEFAULT_PROCESS_MEMORY_MB`. */
export const processMemoryLimitBytes = (warmPoolBytes: number): number => Math.max(0, warmPoolBytes) + DEFAULT_PROCESS_MEMORY_MB * 2 ** 20;

/** The default limits of a sandbox process whose warm pool budget is `warmPoolBytes`. */
export function defaultResourceLimits(warmPoolBytes: number): ResourceLimits {
  return { memoryBytes: processMemoryLimitBytes(warmPoolBytes), tasks: DEFAULT_PROCESS_TASKS, openFiles: DEFAULT_PROCESS_OPEN_FILES };
}

export type WatchdogStatus = { holds: true } | { holds: false; reason: string };

let status: WatchdogStatus | undefined;

/** Whether this host can read what the watchdog needs from /proc (checked on itself, once). */
export function watchdogStatus(): WatchdogStatus {
  if (status) return status;
  try {
    const own = readFileSync("/proc/self/status", "utf8");
    if (!/^VmRSS:/m.test(own) || !/^Threads:/m.test(own)) throw new Error("/proc/self/status has no VmRSS or Threads line");
    opendirSync("/proc/self/fd").closeSync();
    readFileSync(`/proc/self/task/${process.pid}/children`, "utf8");
    status = { holds: true };
  } catch (error) {
    status = { holds: false, reason: `/proc cannot be read (${(error as Error).message}): memory, tasks and open files of sandbox processes are not watched` };
  }
  return status;
}

/** Options of one watched process. */
export interface WatchOptions {
  /**
   * True only for a process launched in bubblewrap with seccomp-filter.ts's program (the pool knows:
   * OS sandbox on, seccomp on). That program refuses every new process, so a process of the tree that
   * runs under more seccomp filters than the host has every child it will ever have: its children are
   * read once, not on every tick (otherwise one read per thread, most of a tick's work: measured 54 ms a
   * tick for 50 processes, ≈ 1 ms a process). Never for a process launched otherwise: code there could
   * install a permissive filter of its own and then fork unseen.
   */
  childrenFixedUnderSeccomp?: boolean;
}

interface Watched {
  pid: number;
  limits: ResourceLimits;
  onOver: (what: string) => void;
  /** Children lists that cannot change any more (see WatchOptions), by process; undefined: none are fixed. */
  fixedChildren: Map<number, number[]> | undefined;
  /**
   * The in-memory file systems to count, found once per innermost process of the tree (bwrap's mounts
   * do not change once Node runs: mount is refused), and again while bwrap is still setting up.
   */
  memoryFileSystems?: { inner: number; paths: string[] };
}

const MB = 2 ** 20;
const mb = (bytes: number) => `${Math.round(bytes / MB).toLocaleString("en-US")} MB`;
/** Resident memory with the page tables counted in it, and how much of it they are. */
const heldText = (held: number, pageTables: number) => `${mb(held)} resident (${mb(pageTables)} of it page tables)`;

export class ResourceWatchdog {
  private readonly watched = new Set<Watched>();
  private tickCount = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly periodMs: number;
  /** Devices of the host's own `/`, `/tmp`, `/dev` and `/dev/shm`: a tree sharing them (no bwrap) writes there as the host. */
  private hostDevices: Set<number> | undefined;

  constructor(options: { periodMs?: number } = {}) {
    this.periodMs = Math.min(WATCHDOG_PERIOD_MS, Math.max(10, options.periodMs ?? WATCHDOG_PERIOD_MS));
  }

  /**
   * Watches the tree below `pid` until the returned function is called, the process is gone, or one of
   * `limits` is crossed: then `onOver` is called once with what, how much and the limit. The caller
   * unwatches when the process exits (its pid may be reused).
   */
  watch(pid: number, limits: ResourceLimits, onOver: (what: string) => void, options: WatchOptions = {}): () => void {
    if (!watchdogStatus().holds || !Number.isInteger(pid) || pid <= 0) return () => {};
    const fixedChildren = options.childrenFixedUnderSeccomp && hostSeccomp() !== undefined ? new Map<number, number[]>() : undefined;
    const entry: Watched = { pid, limits, onOver, fixedChildren };
    this.watched.add(entry);
    this.timer ??= setInterval(() => this.tick(), this.periodMs).unref();
    return () => this.forget(entry);
  }

  /**
   * Raises the memory limit of the watched process `pid` to `memoryBytes` (never lowers it): the host
   * decided it, on what it sent the process (Python tools: `pythonInterpretersMb`).
   */
  raiseMemory(pid: number, memoryBytes: number): void {
    for (const entry of this.watched) if (entry.pid === pid && entry.limits.memoryBytes < memoryBytes) entry.limits = { ...entry.limits, memoryBytes };
  }

  /** The limits `pid` is watched with now, if it is. */
  limitsOf(pid: number): ResourceLimits | undefined {
    for (const entry of this.watched) if (entry.pid === pid) return entry.limits;
    return undefined;
  }

  /** Processes watched now. */
  get size(): number {
    return this.watched.size;
  }

  /** Ticks done so far (for tests that wait for the watchdog to have looked). */
  get ticks(): number {
    return this.tickCount;
  }

  close(): void {
    this.watched.clear();
    this.forget(undefined);
  }

  /** Stops watching `entry`; the timer stops with the last one. */
  private forget(entry: Watched | undefined): void {
    if (entry) this.watched.delete(entry);
    if (this.watched.size > 0) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    this.tickCount++;
    for (const entry of [...this.watched]) {
      let verdict: Verdict | undefined;
      try {
        verdict = this.measure(entry);
      } catch (error) {
        verdict = error instanceof Verdict ? error : new Verdict(`the watchdog could not measure process ${entry.pid}: ${(error as Error).message}`);
      }
      if (!verdict) continue;
      this.forget(entry);
      if (verdict.over === undefined) continue;
      try {
        entry.onOver(verdict.over);
      } catch {
        // the caller's handler failing must not stop the other processes being watched
      }
    }
  }

  /** Undefined while the tree is within its limits, else a Verdict (returned, or thrown from a reader below). */
  private measure(entry: Watched): Verdict | undefined {
    const { pid, limits } = entry;
    // Resident memory and page tables, bytes: what the tree holds in RAM.
    let held = 0;
    let pageTables = 0;
    let tasks = 0;
    let fdSlots = 0;
    const tree: Array<{ pid: number; fdSize: number }> = [];
    const pending = [pid];
    while (pending.length > 0) {
      const next = pending.pop() as number;
      if (tree.length === MAX_TREE_PROCESSES) {
        return new Verdict(`processes: more than ${MAX_TREE_PROCESSES} in the tree of sandbox process ${pid} (a sandbox process has at most 3)`);
      }
      const own = readStatus(next, next === pid);
      if (!own) continue; // a descendant that ended meanwhile
      tree.push({ pid: next, fdSize: own.fdSize });
      held += own.rssBytes + own.pageTableBytes;
      pageTables += own.pageTableBytes;
      tasks += own.threads;
      fdSlots += own.fdSize;
      if (tasks > limits.tasks) return new Verdict(`tasks: ${tasks} threads and processes or more in sandbox process ${pid}'s tree, limit ${limits.tasks}`);
      if (held > limits.memoryBytes)
        return new Verdict(`memory: ${heldText(held, pageTables)} or more in sandbox process ${pid}'s tree, limit ${mb(limits.memoryBytes)}`);
      let children = entry.fixedChildren?.get(next);
      if (!children) {
        // Listed per thread (a child forked by a worker thread is in that thread's list); the thread
        // count was checked above, so this reads at most `limits.tasks` small files. Read after the
        // status: a filter seen there was in place before this list, so nothing can join it later.
        children = [];
        for (const tid of tasksOf(next)) children.push(...childrenOf(next, tid));
        if (entry.fixedChildren && runsUnderExtraFilter(own)) entry.fixedChildren.set(next, children);
      }
      pending.push(...children);
    }
    // Open descriptors: a process has at most as many as its table has slots (FDSize, 64 for a sandbox
    // process), so /proc/<pid>/fd is read only when the slots could hold more than the limit.
    if (fdSlots > limits.openFiles) {
      let files = 0;
      for (const process of tree) {
        files += countFds(process.pid, process.fdSize, limits.openFiles - files + 1, process.pid === pid);
        if (files > limits.openFiles)
          return new Verdict(`open files: more than ${limits.openFiles} in sandbox process ${pid}'s tree, limit ${limits.openFiles}`);
      }
    }
    const inner = tree.at(-1)?.pid ?? pid;
    if (entry.memoryFileSystems?.inner !== inner) {
      this.hostDevices ??= hostMemoryDevices();
      entry.memoryFileSystems = { inner, paths: memoryFileSystemsOf(inner, this.hostDevices) };
    }
    const written = usedBytes(entry.memoryFileSystems.paths);
    if (held + written > limits.memoryBytes) {
      return new Verdict(
        `memory: ${mb(held + written)} (${heldText(held, pageTables)}, ${mb(written)} in files of its in-memory /, /tmp and /dev) in sandbox process ${pid}'s tree, limit ${mb(limits.memoryBytes)}`,
      );
    }
    return undefined;
  }
}
