import { type ChildProcess, type StdioOptions, spawn } from "node:child_process";
import type { Writable } from "node:stream";
import { dirname, join } from "node:path";
import { PROJECT_ROOT } from "../../project-root.js";
import { runtimeNodePath, sandboxModulesOffFlags } from "../../node-runtime.js";
import { type OsSandboxStatus, bwrapCommand } from "../os/os-sandbox.js";
import { lowPriorityPrefix } from "../os/low-priority.js";
import { resourceCapsPrefix } from "../os/resource-caps.js";
import { SANDBOX_NODE_FLAGS } from "../isolate/v8-flags.js";
import type { PythonInterpreterSettings } from "../isolate/isolate-runner-options.js";

/**
 * How a sandbox process is started (child-handle.ts supervises it): inside bubblewrap where the OS
 * sandbox is on, under the low-priority prefix (chrt, taskset) for the low-priority process, and always
 * on the pinned Node (node-runtime.ts) with an empty environment, the framed channel on fd 3 (a Unix
 * stream socket; wire/frames.ts) and the bulk pipe on fd 5 (bulk-channel.ts). Not Node's IPC channel:
 * its reader is not fit for a hostile peer (frames.ts).
 */

const CHILD_ENTRY = join(PROJECT_ROOT, "dist", "src", "isolation", "child", "main.js");
/** The child's fd on which bwrap reads the seccomp program (0–2 stdio, 3 the channel). */
const SECCOMP_FD = 4;

export interface SandboxChildSpec {
  osSandbox: OsSandboxStatus;
  /** Nice value (0: a normal process; above 0: the low-priority one, started under `lowPriorityPrefix`). */
  nice: number;
  /** Warm pool budget of the process, bytes. */
  warmPoolBytes: number;
  maxIdleIsolates: number;
  /** Whether the process makes isolates from a startup snapshot. */
  isolateSnapshot: boolean;
  /** The Python interpreters it keeps between calls. */
  pythonInterpreters: PythonInterpreterSettings;
  /** Idle time before it compacts an isolate, ms; 0 never (isolate/idle-compaction.ts). */
  compactIdleAfterMs: number;
  /** Tools of one Anima whose contexts one warm isolate may hold (isolate/warm-pool.ts). */
  toolsPerIsolate: number;
  /**
   * Whether the process warms up before it says it is ready (child/main.ts): for spares, which have time
   * to; a process a call waits for starts at once.
   */
  warmUp?: boolean;
  /**
   * The script the process runs instead of child/main.js, under the very same launch (bubblewrap,
   * seccomp, environment, descriptors). For tests that play a compromised sandbox process; never set
   * from configuration.
   */
  entryScript?: string;
}

/**
 * Node's permission model in a sandbox process: no file written, no process started or replaced
 * (`child_process`, `process.execve`), no worker thread, no WASI, no inspector, no `process.binding`;
 * reads are left to the OS sandbox's binds (`*`), sockets to its network namespace and the seccomp filter
 * (the framed channel is one), and native addons allowed, for isolated-vm. Code that
 * escaped an isolate runs in the process's main realm: without these it could write a shared object to
 * /tmp and `process.dlopen` it, or `process.execve` an interpreter that makes raw system calls (perl's
 * `syscall`), leaving JavaScript without a memory-corruption exploit (the seccomp filter still bounds
 * which calls). Enforced by Node's C++ side, in every realm and thread of the process.
 */
export const SANDBOX_PERMISSION_FLAGS = [
  "--permission",
  "--allow-fs-read=*",
  "--allow-addons",
  "--allow-net",
  // Node warns of the two allowances on stderr at every start; the host reads that stream as the process's.
  "--disable-warning=SecurityWarning",
  "--disable-warning=ExperimentalWarning",
] as const;

/**
 * The Node flags of a sandbox process: isolated-vm's (v8-flags.ts), V8's flags frozen once it has
 * started (`--freeze-flags-after-init`: `v8.setFlagsFromString`, which the permission model does not
 * cover, then aborts the process; before, JavaScript alone turned off WebAssembly's bounds checks,
 * read and wrote the whole process and ran machine code it wrote), the permission model's, and
 * `node:ffi` and `node:sqlite` switched off where the runtime has them (node-runtime.ts
 * `SANDBOX_MODULES_OFF`: with the first, JavaScript alone could make any system call; the second
 * writes files and loads extensions past the permission model).
 */
export function sandboxNodeFlags(): string[] {
  return [...SANDBOX_NODE_FLAGS, "--freeze-flags-after-init", ...SANDBOX_PERMISSION_FLAGS, ...sandboxModulesOffFlags()];
}

export function spawnSandboxChild(spec: SandboxChildSpec): ChildProcess {
  // child/main.ts's arguments: warm pool bytes, idle isolates at most, nice value, snapshot (1 or 0), warm-up (1 or 0),
  // warm Python interpreters at most, a spare interpreter (1 or 0), idle ms before a compaction, tools per isolate.
  const flag = (on: boolean | undefined): string => (on ? "1" : "0");
  const python = spec.pythonInterpreters;
  const childArgs = [String(spec.warmPoolBytes), String(spec.maxIdleIsolates), String(spec.nice), flag(spec.isolateSnapshot), flag(spec.warmUp)];
  childArgs.push(String(python.warm), flag(python.spare), String(spec.compactIdleAfterMs), String(spec.toolsPerIsolate));
  const idle = spec.nice > 0 ? lowPriorityPrefix() : [];
  // The rlimits first (resource-caps.ts): prlimit sets them on itself and execs the rest, which inherits them.
  const prefix = [...resourceCapsPrefix(), ...idle];
  const entry = spec.entryScript ?? CHILD_ENTRY;
  if (spec.osSandbox.enabled) return spawnInBwrap(prefix, entry, childArgs);
  const command = [...prefix, runtimeNodePath(), ...sandboxNodeFlags(), entry, ...childArgs] as [string, ...string[]];
  return spawn(command[0], command.slice(1), { env: {}, stdio: ["ignore", "ignore", "pipe", "pipe", "ignore", "pipe"] as StdioOptions });
}

/** The child inside bubblewrap (os-sandbox.ts); the seccomp program goes to bwrap on `SECCOMP_FD`. */
function spawnInBwrap(prefix: string[], entry: string, childArgs: string[]): ChildProcess {
  const bwrap = bwrapCommand([...sandboxNodeFlags(), entry, ...childArgs], SECCOMP_FD, entry === CHILD_ENTRY ? [] : [dirname(entry)]);
  const { seccomp } = bwrap;
  const [command, ...args] = [...prefix, bwrap.command, ...bwrap.args] as [string, ...string[]];
  const child = spawn(command, args, {
    env: {},
    stdio: ["ignore", "ignore", "pipe", "pipe", seccomp ? "pipe" : "ignore", "pipe"],
  });
  const seccompPipe = child.stdio[SECCOMP_FD] as Writable | null | undefined;
  if (seccomp && seccompPipe) {
    seccompPipe.on("error", () => {
      // bwrap failed before reading it: its 'exit' reports the failure
    });
    seccompPipe.end(seccomp);
  }
  return child;
}
