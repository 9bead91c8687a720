import { type Dir, closeSync, opendirSync, openSync, readFileSync, readSync, readdirSync } from "node:fs";

/**
 * The resource watchdog's readers of one process's /proc entries (resource-watchdog.ts): its status
 * (resident memory, threads, descriptor table slots, seccomp state), its children, its open descriptors;
 * and the host's own seccomp state, against which a sandbox process's extra filter is recognised.
 *
 * Invariants:
 *  - Each reading is bounded whatever the process did: status and children lists are read into one
 *    16 KiB buffer (no allocation per read), and descriptors are listed whole only for a table of at most
 *    `LIST_FDS_AT_ONCE` slots, else counted only up to the bound the caller gives.
 *  - A process that is gone is nothing to report: a descendant is skipped, and the watched process
 *    itself throws `GONE`. One that exists but cannot be read (EACCES, EPERM: it made itself
 *    non-dumpable) throws a `Verdict` that it is over: what cannot be measured is not trusted.
 */

/** A measurement that settles the outcome: over a limit (message), or the watched process is gone. */
export class Verdict extends Error {
  constructor(readonly over: string | undefined) {
    super(over ?? "the watched process is gone");
  }
}
const GONE = new Verdict(undefined);

/** Up to this many slots in a descriptor table, /proc/<pid>/fd is listed in one call (its entries are bounded by the slots). */
const LIST_FDS_AT_ONCE = 1_024;

export interface ProcessStatus {
  rssBytes: number;
  /**
   * Its page tables (VmPTE): kernel memory the process makes by touching address space, which no resident
   * set shows. Reading one byte in every 2 MiB of a huge untouched buffer maps only the shared zero page
   * (no RSS) but costs a 4 KiB table each time: measured, 3 GB of page tables at 56 MB resident.
   */
  pageTableBytes: number;
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
export function readStatus(pid: number, watchedRoot: boolean): ProcessStatus | undefined {
  let text: string;
  try {
    text = readSmall(`/proc/${pid}/status`);
  } catch (error) {
    return unreadable(error, pid, "status", watchedRoot);
  }
  return parseStatus(text);
}

const STATUS_FIELDS = ["VmRSS", "VmPTE", "Threads", "FDSize", "Seccomp", "Seccomp_filters"] as const;
const STATUS_PATTERNS = new Map(STATUS_FIELDS.map((name) => [name, new RegExp(`^${name}:\\s+(\\d+)`, "m")]));

function parseStatus(text: string): ProcessStatus {
  const field = (name: (typeof STATUS_FIELDS)[number]): number | undefined => {
    const match = (STATUS_PATTERNS.get(name) as RegExp).exec(text);
    return match ? Number(match[1]) : undefined;
  };
  return {
    // A zombie has no VmRSS: it holds no memory, only its task.
    rssBytes: (field("VmRSS") ?? 0) * 1024,
    pageTableBytes: (field("VmPTE") ?? 0) * 1024,
    threads: field("Threads") ?? 1,
    // Unknown: assume the worst, so that the descriptors are counted.
    fdSize: field("FDSize") ?? Number.POSITIVE_INFINITY,
    seccomp: { mode: field("Seccomp") ?? 0, filters: field("Seccomp_filters") },
  };
}

let host: ProcessStatus["seccomp"] | null | undefined;

/** The host's own seccomp state (inherited by a process it starts), or undefined where unknown. */
export function hostSeccomp(): ProcessStatus["seccomp"] | undefined {
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
export function runsUnderExtraFilter(own: ProcessStatus): boolean {
  const mine = hostSeccomp();
  if (!mine) return false;
  if (own.seccomp.filters !== undefined && mine.filters !== undefined) return own.seccomp.filters > mine.filters;
  return mine.mode === 0 && own.seccomp.mode === 2;
}

/** Entries of /proc/<pid>/fd, counted up to `atMost` at least (a table of few slots is listed whole). */
export function countFds(pid: number, fdSize: number, atMost: number, watchedRoot: boolean): number {
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
  throw new Verdict(
    `unmeasurable: /proc/${pid}/${file} cannot be read (${code ?? (error as Error).message}); a sandbox process the host cannot measure is treated as over its limits`,
  );
}

/** The children `pid` forked from its thread `tid` (each child is listed under its forking thread); none once the thread ended. */
export function childrenOf(pid: number, tid: number): number[] {
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
