import { type ChildProcess, type StdioOptions, fork, spawn } from "node:child_process";
import type { Writable } from "node:stream";
import { join } from "node:path";
import { PROJECT_ROOT } from "../../config.js";
import { runtimeNodePath } from "../../node-runtime.js";
import { type OsSandboxStatus, bwrapCommand } from "../os/os-sandbox.js";
import { lowPriorityPrefix } from "../os/low-priority.js";
import { SANDBOX_NODE_FLAGS } from "../isolate/v8-flags.js";

/**
 * How a sandbox process is started (child-handle.ts supervises it): inside bubblewrap where the OS
 * sandbox is on, under the low-priority prefix (chrt, taskset) for the low-priority process, and always
 * on the pinned Node (node-runtime.ts) with an empty environment, the IPC channel on fd 3 and the bulk
 * pipe on fd 5 (bulk-channel.ts).
 */

const CHILD_ENTRY = join(PROJECT_ROOT, "dist", "src", "isolation", "child", "main.js");
/** The child's fd on which bwrap reads the seccomp program (0–2 stdio, 3 the IPC channel). */
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
}

export function spawnSandboxChild(spec: SandboxChildSpec): ChildProcess {
  // child/main.ts's arguments: warm pool bytes, idle isolates at most, nice value, snapshot (1 or 0).
  const childArgs = [String(spec.warmPoolBytes), String(spec.maxIdleIsolates), String(spec.nice), spec.isolateSnapshot ? "1" : "0"];
  const idle = spec.nice > 0 ? lowPriorityPrefix() : [];
  if (spec.osSandbox.enabled) return spawnInBwrap(idle, childArgs);
  const options = { env: {}, stdio: ["ignore", "ignore", "pipe", "ipc", "ignore", "pipe"] as StdioOptions, serialization: "json" as const };
  return idle.length > 0
    ? spawn(idle[0] as string, [...idle.slice(1), runtimeNodePath(), ...SANDBOX_NODE_FLAGS, CHILD_ENTRY, ...childArgs], options)
    : fork(CHILD_ENTRY, childArgs, { ...options, execPath: runtimeNodePath(), execArgv: [...SANDBOX_NODE_FLAGS] });
}

/** The child inside bubblewrap (os-sandbox.ts); the seccomp program goes to bwrap on `SECCOMP_FD`. */
function spawnInBwrap(prefix: string[], childArgs: string[]): ChildProcess {
  const bwrap = bwrapCommand([...SANDBOX_NODE_FLAGS, CHILD_ENTRY, ...childArgs], SECCOMP_FD);
  const { seccomp } = bwrap;
  const [command, ...args] = [...prefix, bwrap.command, ...bwrap.args] as [string, ...string[]];
  const child = spawn(command, args, {
    env: {},
    stdio: ["ignore", "ignore", "pipe", "ipc", seccomp ? "pipe" : "ignore", "pipe"],
    serialization: "json",
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
