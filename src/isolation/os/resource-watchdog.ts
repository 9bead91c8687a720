import { type Dir, closeSync, opendirSync, openSync, readFileSync, readSync, readdirSync, statSync, statfsSync } from "node:fs";
import { tasksOf } from "./process-cpu.js";

/**
 * What the host measures of each sandbox process from /proc, beside the isolates' own heap limits: code
 * that escaped an isolate runs in the process's main realm, where nothing else bounds its memory, its
 * threads or its open files. Every `WATCHDOG_PERIOD_MS` one timer sums, over the process tree below
 * each watched pid (bwrap → its init → node; or node alone without the OS sandbox):
 *
 *  - memory: the resident set of every process (VmRSS), plus what the tree wrote into the in-memory
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
 * Not counted: memory in memfd files or SysV shared memory that is not mapped, and the kernel's own
 * memory for the process (page tables, socket buffers). The tree is followed to `MAX_TREE_PROCESSES`
 * processes: a sandbox process has three (one without bwrap), and more is reported as over.
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

/** A measurement that settles the outcome: over a limit (message), or the watched process is gone. */
class Verdict {
  constructor(readonly over: string | undefined) {}
}
const GONE = new Verdict(undefined);

const MB = 2 ** 20;
const mb = (bytes: number) => `${Math.round(bytes / MB).toLocaleString("en-US")} MB`;
const TMPFS_MAGIC = 0x01021994;
/** Up to this many slots in a descriptor table, /proc/<pid>/fd is listed in one call (its entries are bounded by the slots). */
const LIST_FDS_AT_ONCE = 1_024;

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
    let rss = 0;
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
      rss += own.rssBytes;
      tasks += own.threads;
      fdSlots += own.fdSize;
      if (tasks > limits.tasks) return new Verdict(`tasks: ${tasks} threads and processes or more in sandbox process ${pid}'s tree, limit ${limits.tasks}`);
      if (rss > limits.memoryBytes) return new Verdict(`memory: ${mb(rss)} resident or more in sandbox process ${pid}'s tree, limit ${mb(limits.memoryBytes)}`);
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
        if (files > limits.openFiles) return new Verdict(`open files: more than ${limits.openFiles} in sandbox process ${pid}'s tree, limit ${limits.openFiles}`);
      }
    }
    const inner = tree.at(-1)?.pid ?? pid;
    if (entry.memoryFileSystems?.inner !== inner) entry.memoryFileSystems = { inner, paths: this.memoryFileSystemsOf(inner) };
    const written = usedBytes(entry.memoryFileSystems.paths);
    if (rss + written > limits.memoryBytes) {
      return new Verdict(`memory: ${mb(rss + written)} (${mb(rss)} resident, ${mb(written)} in files of its in-memory /, /tmp and /dev) in sandbox process ${pid}'s tree, limit ${mb(limits.memoryBytes)}`);
    }
    return undefined;
  }

  /**
   * The tmpfs mounts of the tree's own mount namespace (bwrap's `/`, `/tmp`, `/dev` with its `shm`),
   * seen through /proc/<inner>/root of its innermost process, one path per device; none where the tree
   * shares the host's. Only mount points: the sandbox can neither replace nor rename them (a directory
   * such as /dev/shm it could swap for a symlink, which the host would follow from its own root).
   */
  private memoryFileSystemsOf(inner: number): string[] {
    this.hostDevices ??= new Set(["/", "/tmp", "/dev", "/dev/shm"].flatMap((path) => deviceOf(path) ?? []));
    const paths: string[] = [];
    const seen = new Set(this.hostDevices);
    for (const path of ["", "/tmp", "/dev"]) {
      const full = `/proc/${inner}/root${path}`;
      const device = deviceOf(full);
      if (device === undefined || seen.has(device)) continue;
      seen.add(device);
      try {
        if (statfsSync(full).type === TMPFS_MAGIC) paths.push(full);
      } catch {
        // not readable: not counted
      }
    }
    return paths;
  }
}

const deviceOf = (path: string): number | undefined => {
  try {
    return statSync(path).dev;
  } catch {
    return undefined;
  }
};

function usedBytes(paths: string[]): number {
  let used = 0;
  for (const path of paths) {
    try {
      const fs = statfsSync(path);
      used += (fs.blocks - fs.bfree) * fs.bsize;
    } catch {
      // the process ended meanwhile
    }
  }
  return used;
}

interface ProcessStatus {
  rssBytes: number;
  threads: number;
  /** Slots of its descriptor table: an upper bound of its open descriptors. */
  fdSize: number;
  /** Seccomp mode (0 none, 2 filter) and number of filters (Linux 5.9+), as /proc shows them. */
  seccomp: { mode: number; filters: number | undefined };
}

/**
 * What `pid`'s status says, or undefined when a descendant is gone. The watched process itself gone:
 * GONE is thrown. Unreadable (EACCES, EPERM): it cannot be measured, so it is over.
 */
function readStatus(pid: number, watchedRoot: boolean): ProcessStatus | undefined {
  let text: string;
  try {
    text = readSmall(`/proc/${pid}/status`);
  } catch (error) {
    return unreadable(error, pid, "status", watchedRoot);
  }
  return parseStatus(text);
}

const STATUS_FIELDS = ["VmRSS", "Threads", "FDSize", "Seccomp", "Seccomp_filters"] as const;
const STATUS_PATTERNS = new Map(STATUS_FIELDS.map((name) => [name, new RegExp(`^${name}:\\s+(\\d+)`, "m")]));

function parseStatus(text: string): ProcessStatus {
  const field = (name: (typeof STATUS_FIELDS)[number]): number | undefined => {
    const match = (STATUS_PATTERNS.get(name) as RegExp).exec(text);
    return match ? Number(match[1]) : undefined;
  };
  return {
    // A zombie has no VmRSS: it holds no memory, only its task.
    rssBytes: (field("VmRSS") ?? 0) * 1024,
    threads: field("Threads") ?? 1,
    // Unknown: assume the worst, so that the descriptors are counted.
    fdSize: field("FDSize") ?? Number.POSITIVE_INFINITY,
    seccomp: { mode: field("Seccomp") ?? 0, filters: field("Seccomp_filters") },
  };
}

let host: ProcessStatus["seccomp"] | null | undefined;

/** The host's own seccomp state (inherited by a process it starts), or undefined where unknown. */
function hostSeccomp(): ProcessStatus["seccomp"] | undefined {
  if (host === undefined) {
    try {
      host = parseStatus(readFileSync("/proc/self/status", "latin1")).seccomp;
    } catch {
      host = null;
    }
  }
  return host ?? undefined;
}

/** Whether a process runs under a seccomp filter the host does not: in a bwrap launch, seccomp-filter.ts's. */
function runsUnderExtraFilter(own: ProcessStatus): boolean {
  const mine = hostSeccomp();
  if (!mine) return false;
  if (own.seccomp.filters !== undefined && mine.filters !== undefined) return own.seccomp.filters > mine.filters;
  return mine.mode === 0 && own.seccomp.mode === 2;
}

/** Entries of /proc/<pid>/fd, counted up to `atMost` at least (a table of few slots is listed whole). */
function countFds(pid: number, fdSize: number, atMost: number, watchedRoot: boolean): number {
  let dir: Dir | undefined;
  try {
    if (fdSize <= LIST_FDS_AT_ONCE) return readdirSync(`/proc/${pid}/fd`).length;
    dir = opendirSync(`/proc/${pid}/fd`, { bufferSize: 64 });
    let count = 0;
    while (count < atMost && dir.readSync() !== null) count++;
    return count;
  } catch (error) {
    return unreadable(error, pid, "fd", watchedRoot) ?? 0;
  } finally {
    dir?.closeSync();
  }
}

/** ENOENT/ESRCH: gone (GONE for the watched process itself, else nothing); anything else: over. */
function unreadable(error: unknown, pid: number, file: string, watchedRoot: boolean): undefined {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT" || code === "ESRCH") {
    if (watchedRoot) throw GONE;
    return undefined;
  }
  throw new Verdict(`unmeasurable: /proc/${pid}/${file} cannot be read (${code ?? (error as Error).message}); a sandbox process the host cannot measure is treated as over its limits`);
}

function childrenOf(pid: number, tid: number): number[] {
  let text: string;
  try {
    text = readSmall(`/proc/${pid}/task/${tid}/children`);
  } catch {
    return []; // the thread ended meanwhile
  }
  return text.split(" ").filter(Boolean).map(Number).filter(Number.isInteger);
}

const buffer = Buffer.alloc(16 * 1024);

/** A /proc file of at most 16 KiB read with one buffer (status is ≈ 1.5 KiB): no allocation per read. */
function readSmall(path: string): string {
  const fd = openSync(path, "r");
  try {
    let length = 0;
    for (let read = 1; read > 0 && length < buffer.length; length += read) read = readSync(fd, buffer, length, buffer.length - length, null);
    return buffer.toString("latin1", 0, length);
  } finally {
    closeSync(fd);
  }
}
