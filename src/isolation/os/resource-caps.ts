import { existsSync, readFileSync, readdirSync } from "node:fs";
import {
  DEFAULT_PROCESS_MEMORY_MB,
  DEFAULT_PROCESS_OPEN_FILES,
  DEFAULT_PROCESS_TASKS,
  WATCHDOG_PERIOD_MS,
  type WatchdogStatus,
  watchdogStatus,
} from "./resource-watchdog.js";

/**
 * Kernel resource limits a sandbox process starts under, set by the host before the process runs
 * (util-linux `prlimit … -- command`, which sets them on itself and execs the command: bwrap, chrt and
 * Node inherit them, and an unprivileged process cannot raise a hard limit again). They bound what code
 * that escaped an isolate can take outside it, beside the watchdog (resource-watchdog.ts), which
 * kills a process over its memory, task or open-file limits:
 *
 *  - RLIMIT_NOFILE `DEFAULT_RLIMIT_NOFILE`: a sandbox process holds ≈ 21 fds (see
 *    DEFAULT_PROCESS_OPEN_FILES), and Node raises its soft limit to the hard one, so both are set.
 *  - RLIMIT_NPROC `DEFAULT_RLIMIT_NPROC`: a backstop against a thread or fork bomb exhausting the
 *    machine's pids. The kernel counts every task of the host's *user* against it, not the process's
 *    own: measured (uid 12345, 30 other threads running, limit 40): 8 more threads, alone or inside
 *    bwrap's user namespace (whose count is bounded by the outer one). So it is set well above what the
 *    host's user runs and cannot be a per-process cap (the watchdog's task limit is). It is not enforced
 *    at all for root, and a root host maps its sandbox uid to root outside: on such a host only the
 *    seccomp filter (no new processes) and the watchdog hold.
 *  - RLIMIT_CORE 0: a crashing process leaves no core file with its memory in it.
 * Not RLIMIT_AS: V8 and WebAssembly reserve huge virtual ranges that never become memory.
 * Each value is lowered to the host's own soft limit where that is lower (prlimit cannot raise a hard
 * limit unprivileged, and the sandbox process should never get more than the host has).
 *
 * Not cgroups: on the machines this runs on they are v1 and belong to the machine's supervision (its
 * `pids`, `memory` and `cpu` hierarchies); a host creating or moving processes between cgroups would
 * interfere with it. Where prlimit is missing, the process starts without the prefix and `audit` says so.
 */

/** RLIMIT_NOFILE (soft and hard) of a sandbox process: ≈ 12 × what it uses. */
export const DEFAULT_RLIMIT_NOFILE = DEFAULT_PROCESS_OPEN_FILES;
/** RLIMIT_NPROC (soft and hard): tasks of the host's whole user, not of one process (see above). */
export const DEFAULT_RLIMIT_NPROC = 16_384;
/** RLIMIT_CORE, bytes. */
export const RLIMIT_CORE_BYTES = 0;

export type RlimitName = "nofile" | "nproc" | "core";

export interface ResourceCapsStatus {
  /** Path of prlimit, or undefined when it is not installed (then no rlimit is set). */
  prlimit: string | undefined;
  /** The limits set (soft = hard), empty without prlimit. */
  rlimits: Array<{ resource: RlimitName; value: number }>;
  /** Why a wanted limit is not set, by resource. */
  notSet: Partial<Record<RlimitName, string>>;
  /** Whether the kernel enforces RLIMIT_NPROC on the sandbox processes (not for a root host). */
  nprocEnforced: boolean;
  watchdog: WatchdogStatus;
  /** Why cgroups are not used. */
  cgroups: string;
}

let computed: { prefix: string[]; status: Omit<ResourceCapsStatus, "watchdog" | "cgroups" | "nprocEnforced"> } | undefined;

/** The command words to put before a sandbox process's command (empty without prlimit). */
export function resourceCapsPrefix(): string[] {
  return compute().prefix;
}

function compute(): NonNullable<typeof computed> {
  if (computed) return computed;
  const prlimit = [`/usr/bin/prlimit`, `/bin/prlimit`].find((path) => existsSync(path));
  const own = hostSoftLimits();
  const wanted: Array<[RlimitName, number, string]> = [
    ["nofile", DEFAULT_RLIMIT_NOFILE, "Max open files"],
    ["nproc", DEFAULT_RLIMIT_NPROC, "Max processes"],
    ["core", RLIMIT_CORE_BYTES, "Max core file size"],
  ];
  const rlimits: ResourceCapsStatus["rlimits"] = [];
  const notSet: ResourceCapsStatus["notSet"] = {};
  for (const [resource, value, label] of wanted) {
    if (!prlimit) notSet[resource] = "prlimit (util-linux) is not installed";
    else if (own === undefined) notSet[resource] = "/proc/self/limits cannot be read (the host's own limit is unknown)";
    else if (!own.has(label)) notSet[resource] = `/proc/self/limits has no "${label}" line`;
    else rlimits.push({ resource, value: Math.min(value, own.get(label) as number) });
  }
  const prefix = prlimit && rlimits.length > 0 ? [prlimit, ...rlimits.map(({ resource, value }) => `--${resource}=${value}:${value}`), "--"] : [];
  computed = { prefix, status: { prlimit, rlimits, notSet } };
  return computed;
}

/** The host's soft limits by /proc/self/limits label ("Max open files" → 20000; unlimited → Infinity). */
function hostSoftLimits(): Map<string, number> | undefined {
  let text: string;
  try {
    text = readFileSync("/proc/self/limits", "utf8");
  } catch {
    return undefined;
  }
  const limits = new Map<string, number>();
  for (const line of text.split("\n")) {
    const match = /^(Max [a-z ]+?)\s{2,}(unlimited|\d+)\s/.exec(line);
    if (match) limits.set(match[1] as string, match[2] === "unlimited" ? Number.POSITIVE_INFINITY : Number(match[2]));
  }
  return limits;
}

/** What holds on this machine: rlimits, whether RLIMIT_NPROC is enforced, the watchdog, cgroups. */
export function resourceCapsStatus(): ResourceCapsStatus {
  const { status } = compute();
  const cgroupV2 = existsSync("/sys/fs/cgroup/cgroup.controllers");
  return {
    ...status,
    nprocEnforced: status.rlimits.some((limit) => limit.resource === "nproc") && process.getuid?.() !== 0,
    watchdog: watchdogStatus(),
    cgroups: cgroupV2
      ? "not used: cgroup v2 here, but creating cgroups needs a delegated subtree this host is not given; the watchdog stands in"
      : "not used: cgroup v1 here, whose hierarchies belong to the machine's supervision; the host creates and moves nothing there, the watchdog stands in",
  };
}

/** Lines for `audit`: what bounds a sandbox process's resources outside its isolates on this machine. */
export function describeResourceCaps(): string[] {
  const caps = resourceCapsStatus();
  const lines: string[] = [];
  if (caps.rlimits.length === 0) {
    lines.push(`rlimits: none (${Object.values(caps.notSet)[0] ?? "unknown"}): sandbox processes start with the host's limits`);
  } else {
    const words = caps.rlimits.map(({ resource, value }) => {
      if (resource === "nofile") return `RLIMIT_NOFILE ${value}`;
      if (resource === "core") return `RLIMIT_CORE ${value}`;
      const scope = "counts every task of the host's user, not per process";
      return caps.nprocEnforced
        ? `RLIMIT_NPROC ${value.toLocaleString("en-US")} (${scope}; ${tasksOfUser() ?? "?"} now)`
        : `RLIMIT_NPROC ${value.toLocaleString("en-US")} (not enforced: the host runs as root, and so do its sandbox processes outside their user namespace)`;
    });
    for (const [resource, why] of Object.entries(caps.notSet)) words.push(`no ${resource} (${why})`);
    lines.push(`rlimits (${caps.prlimit}): ${words.join(", ")}`);
  }
  lines.push(
    caps.watchdog.holds
      ? `watchdog: every ${WATCHDOG_PERIOD_MS} ms from /proc, a sandbox process over ${DEFAULT_PROCESS_MEMORY_MB.toLocaleString("en-US")} MB beyond its warm pool (resident, and files in its in-memory /, /tmp, /dev), ${DEFAULT_PROCESS_TASKS} tasks or ${DEFAULT_PROCESS_OPEN_FILES} open files is killed`
      : `watchdog: does not hold (${caps.watchdog.reason})`,
  );
  lines.push(`cgroups: ${caps.cgroups}`);
  return lines;
}

/** Tasks of this host's real uid now (for the report), or undefined where /proc cannot be read. */
function tasksOfUser(): number | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  let tasks = 0;
  try {
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const status = readFileSync(`/proc/${entry}/status`, "utf8");
        if (Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) === uid) tasks += Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? 1);
      } catch {
        // ended meanwhile
      }
    }
  } catch {
    return undefined;
  }
  return tasks;
}
