import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { PROJECT_ROOT } from "../../project-root.js";
import { isolatedVmDir, pyodideDir, runtimeNodePath } from "../../node-runtime.js";
import { seccompProgram } from "./seccomp-filter.js";

/**
 * The second isolation layer: every sandbox process runs inside bubblewrap (`bwrap`), so that code that
 * escaped an isolate finds a process with no authority. Layers, and what each stops:
 *
 *  - user namespace, uid/gid 65534 inside, all capabilities dropped, `no_new_privs` (bwrap sets it):
 *    no privilege, even where the host runs as root;
 *  - network namespace with nothing but its own loopback: no connection to the host's loopback or to
 *    anywhere else (tools reach the network only through the host's fetch capability, which applies
 *    policy);
 *  - pid, ipc, uts (and cgroup) namespaces: no signal to, trace of or shared memory with the host;
 *  - a file system of read-only binds of the system folders Node needs, the pinned Node, the project's
 *    built code and isolated-vm's native module with its loader, a private `/proc`, `/dev` and an empty
 *    `/tmp` (read-only, as the root and `/dev`): nothing of the data dir, the home folder or the host's configuration exists in it;
 *  - an empty environment, a new session (no terminal to inject into), death with the host;
 *  - a seccomp filter (seccomp-filter.ts).
 *
 * Modes: `auto` uses bwrap when it is installed and works, else runs without it and says so; `required`
 * refuses to start without it; `off` never uses it.
 */
export type OsSandboxMode = "auto" | "required" | "off";

export interface OsSandboxStatus {
  /** True when sandbox processes start inside bwrap. */
  enabled: boolean;
  mode: OsSandboxMode;
  /** Why it is off, when it is. */
  reason?: string;
  namespaces: string[];
  uid?: number;
  seccomp: boolean;
}

/** The uid and gid sandbox processes run as inside their user namespace ("nobody"). */
export const SANDBOX_UID = 65534;
const NAMESPACES = ["user", "pid", "net", "ipc", "uts", "cgroup"];
const BWRAP = "bwrap";

export class OsSandboxUnavailableError extends Error {
  constructor(reason: string) {
    super(
      `the OS sandbox is required (osSandbox: "required") but bubblewrap cannot be used: ${reason}. ` +
        `Install it (Debian/Ubuntu: apt-get install bubblewrap) or set osSandbox to "auto" or "off".`,
    );
    this.name = "OsSandboxUnavailableError";
  }
}

let probed: { ok: true } | { ok: false; reason: string } | undefined;

/** Whether bwrap is installed and can create the namespaces (checked once per process, ≈ 5 ms). */
function probe(): { ok: true } | { ok: false; reason: string } {
  if (probed) return probed;
  const result = spawnSync(BWRAP, [...baseArgs([]), "--", runtimeNodePath(), "-e", ""], { env: {}, stdio: "pipe", timeout: 10_000 });
  if (result.error) probed = { ok: false, reason: (result.error as NodeJS.ErrnoException).code === "ENOENT" ? "bwrap is not installed" : result.error.message };
  else if (result.status !== 0) probed = { ok: false, reason: `bwrap failed: ${String(result.stderr).trim().slice(0, 300) || `exit status ${result.status}`}` };
  else probed = { ok: true };
  return probed;
}

/** What this host's sandbox processes get in `mode` (throws OsSandboxUnavailableError for `required`). */
export function osSandboxStatus(mode: OsSandboxMode): OsSandboxStatus {
  const off = (reason: string): OsSandboxStatus => ({ enabled: false, mode, reason, namespaces: [], seccomp: false });
  if (mode === "off") return off('disabled by configuration (osSandbox: "off")');
  if (process.platform !== "linux") {
    if (mode === "required") throw new OsSandboxUnavailableError("it runs on Linux only");
    return off("bubblewrap runs on Linux only");
  }
  const found = probe();
  if (!found.ok) {
    if (mode === "required") throw new OsSandboxUnavailableError(found.reason);
    return off(found.reason);
  }
  return { enabled: true, mode, namespaces: NAMESPACES, uid: SANDBOX_UID, seccomp: seccompProgram() !== undefined };
}

/** One line for logs and reports. */
export function describeOsSandbox(status: OsSandboxStatus): string {
  if (!status.enabled) return `OS sandbox: OFF (${status.reason}); sandbox processes run with the host's user, file system and network`;
  return `OS sandbox: bubblewrap (namespaces ${status.namespaces.join(", ")}; uid ${status.uid}; no capabilities; no_new_privs; seccomp ${status.seccomp ? "on" : "off"})`;
}

/** Size of the sandbox process's /tmp, bytes (nothing of the host writes there; a tool has no file system). */
const TMP_BYTES = 8 * 1024 * 1024;

let readOnly: string[] | undefined;

/** Read-only binds: what Node and the sandbox code need, nothing else (found once per process). */
function readOnlyPaths(): string[] {
  if (readOnly) return readOnly;
  const paths = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", dirname(runtimeNodePath())];
  // The project's built code, its package.json (module type) and the one native module it loads; the
  // Python runtime (Pyodide's files and the runtime's own Python modules), which Python tools boot.
  paths.push(join(PROJECT_ROOT, "package.json"), join(PROJECT_ROOT, "dist"), ...nativeModulePaths());
  paths.push(pyodideDir(), join(PROJECT_ROOT, "sandbox", "python"));
  readOnly = [...new Set(paths)].filter((path) => existsSync(path));
  return readOnly;
}

/**
 * isolated-vm's folder and the loader it picks its prebuilt binary with (`node-gyp-build`, a package of
 * its own since isolated-vm 6), wherever npm placed it.
 */
function nativeModulePaths(): string[] {
  const paths = [isolatedVmDir()];
  try {
    paths.push(dirname(createRequire(join(isolatedVmDir(), "package.json")).resolve("node-gyp-build/package.json")));
  } catch {
    // an isolated-vm that loads its binary without it
  }
  return paths;
}

function baseArgs(extra: string[]): string[] {
  const args = [
    "--unshare-all",
    "--uid",
    String(SANDBOX_UID),
    "--gid",
    String(SANDBOX_UID),
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
  ];
  // bwrap mounts in argument order: the empty /tmp comes first, so that a project or a Node installed
  // under /tmp is bound on top of it rather than hidden by it. In-memory file systems are memory no
  // process's RSS shows: /tmp is capped at `TMP_BYTES`, and the root, /tmp and /dev are made read-only
  // once everything is mounted (no place to write a shared object to load or a program to run) (device nodes such as /dev/null stay usable on a read-only mount). /dev/shm,
  // where POSIX shared memory (`shm_open`) puts its files, is a directory of that read-only /dev, not a
  // mount of its own: it takes nothing (memfd and System V IPC are refused by seccomp-filter.ts).
  args.push("--size", String(TMP_BYTES), "--tmpfs", "/tmp");
  for (const path of readOnlyPaths()) args.push("--ro-bind", path, path);
  args.push("--proc", "/proc", "--dev", "/dev", ...extra, "--remount-ro", "/dev", "--remount-ro", "/tmp", "--remount-ro", "/", "--chdir", "/");
  return args;
}

/**
 * How to start one sandbox process inside bwrap: the command, its arguments, and the seccomp program
 * to write to the child's fd `seccompFd` (bwrap reads it before it runs Node). The framed channel is
 * fd 3, inherited; nothing in the environment. `extraReadOnly`: more paths bound read-only (a test's
 * stand-in for the process's entry).
 */
export function bwrapCommand(
  nodeArgs: string[],
  seccompFd: number,
  extraReadOnly: string[] = [],
): { command: string; args: string[]; seccomp: Buffer | undefined } {
  const seccomp = seccompProgram();
  const extra = extraReadOnly.flatMap((path) => ["--ro-bind", path, path]);
  if (seccomp) extra.push("--seccomp", String(seccompFd));
  return { command: BWRAP, args: [...baseArgs(extra), "--", runtimeNodePath(), ...nodeArgs], seccomp };
}
