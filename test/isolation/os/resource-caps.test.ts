import { type ChildProcess, spawnSync } from "node:child_process";
import { DEFAULT_PYTHON_INTERPRETERS } from "../../../src/isolation/isolate/isolate-runner-options.js";
import { existsSync, readFileSync, readlinkSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { type OsSandboxStatus, osSandboxStatus } from "../../../src/isolation/os/os-sandbox.js";
import { LOW_PRIORITY_NICE } from "../../../src/isolation/os/low-priority.js";
import { processTree } from "../../../src/isolation/os/process-cpu.js";
import {
  DEFAULT_RLIMIT_NOFILE,
  DEFAULT_RLIMIT_NPROC,
  describeResourceCaps,
  resourceCapsPrefix,
  resourceCapsStatus,
} from "../../../src/isolation/os/resource-caps.js";
import { spawnSandboxChild } from "../../../src/isolation/pool/child-spawn.js";
import { runtimeNodePath } from "../../../src/node-runtime.js";
import { waitFor } from "../../helpers/data-dir.js";

/**
 * The rlimits a sandbox process starts under (prlimit before bwrap or Node), read back from the
 * process's /proc/<pid>/limits as the kernel applies them, and what `audit` is told about them.
 */
const PRLIMIT = ["/usr/bin/prlimit", "/bin/prlimit"].find((path) => existsSync(path));
const bwrapWorks = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "true"]).status === 0;

/** Soft and hard value of one line of a /proc/<pid>/limits file ("Max open files" → [256, 256]). */
function limitOf(pid: number, label: string): [string, string] {
  const line = readFileSync(`/proc/${pid}/limits`, "utf8")
    .split("\n")
    .find((l) => l.startsWith(label));
  if (!line) throw new Error(`no "${label}" in /proc/${pid}/limits`);
  const [soft, hard] = line.slice(label.length).trim().split(/\s+/);
  return [soft as string, hard as string];
}

/** The sandbox process's Node (below bwrap and its init, or the process itself), once it runs Node. */
async function nodeOf(child: ChildProcess): Promise<number> {
  let found: number | undefined;
  await waitFor(() => {
    found = processTree(child.pid as number).find((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/exe`) === runtimeNodePath();
      } catch {
        return false;
      }
    });
    return found !== undefined;
  }, 10_000);
  return found as number;
}

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) child.kill("SIGKILL");
});

describe("resource caps of a sandbox process", () => {
  it("prlimit, where installed, sets NOFILE, NPROC (soft = hard) and CORE 0, never above the host's own limits", () => {
    const prefix = resourceCapsPrefix();
    if (!PRLIMIT) {
      expect(prefix).toEqual([]);
      expect(resourceCapsStatus().notSet["nofile"]).toMatch(/prlimit .*not installed/);
      return;
    }
    expect(prefix[0]).toBe(PRLIMIT);
    expect(prefix.at(-1)).toBe("--");
    const own = (label: string) => {
      const [soft] = limitOf(process.pid, label);
      return soft === "unlimited" ? Number.POSITIVE_INFINITY : Number(soft);
    };
    const nofile = Math.min(DEFAULT_RLIMIT_NOFILE, own("Max open files"));
    const nproc = Math.min(DEFAULT_RLIMIT_NPROC, own("Max processes"));
    expect(prefix).toEqual([PRLIMIT, `--nofile=${nofile}:${nofile}`, `--nproc=${nproc}:${nproc}`, "--core=0:0", "--"]);
    expect(prefix.join(" ")).not.toMatch(/--as\b/); // V8 reserves huge virtual ranges
  });

  const modes: Array<[string, OsSandboxStatus | undefined, number]> = [
    ["inside bubblewrap", bwrapWorks ? osSandboxStatus("required") : undefined, 0],
    ["inside bubblewrap at low priority (after chrt and taskset)", bwrapWorks ? osSandboxStatus("required") : undefined, LOW_PRIORITY_NICE],
    ["without the OS sandbox", osSandboxStatus("off"), 0],
  ];
  for (const [mode, osSandbox, nice] of modes) {
    it.skipIf(!PRLIMIT || !osSandbox)(`a process started by spawnSandboxChild ${mode} runs its Node under them`, async () => {
      const child = spawnSandboxChild({
        osSandbox: osSandbox as OsSandboxStatus,
        nice,
        warmPoolBytes: 64 * 2 ** 20,
        maxIdleIsolates: 4,
        isolateSnapshot: false,
        pythonInterpreters: DEFAULT_PYTHON_INTERPRETERS,
        compactIdleAfterMs: 0,
        toolsPerIsolate: 1,
      });
      started.push(child);
      const node = await nodeOf(child);
      const nofile = String(Math.min(DEFAULT_RLIMIT_NOFILE, Number(limitOf(process.pid, "Max open files")[0])));
      expect(limitOf(node, "Max open files")).toEqual([nofile, nofile]);
      expect(limitOf(node, "Max core file size")).toEqual(["0", "0"]);
      const [soft, hard] = limitOf(node, "Max processes");
      expect(soft).toBe(hard);
      expect(Number(soft)).toBeLessThanOrEqual(DEFAULT_RLIMIT_NPROC);
      // Every process of the tree has them (bwrap and its init too): prlimit ran first.
      for (const pid of processTree(child.pid as number)) expect(limitOf(pid, "Max open files")[1]).toBe(nofile);
    });
  }
  if (!PRLIMIT) console.warn("rlimit launch tests skipped: util-linux prlimit is not installed");
  if (!bwrapWorks) console.warn("rlimits inside bubblewrap skipped: bubblewrap is not installed or cannot create namespaces");

  it("describeResourceCaps says what holds here: rlimits, whether NPROC is enforced for this uid, the watchdog, no cgroups", () => {
    const lines = describeResourceCaps();
    const text = lines.join("\n");
    const status = resourceCapsStatus();
    if (PRLIMIT) {
      expect(text).toContain(`rlimits (${PRLIMIT}): RLIMIT_NOFILE`);
      expect(text).toContain("RLIMIT_CORE 0");
      expect(status.nprocEnforced).toBe(process.getuid?.() !== 0);
      expect(text).toMatch(
        process.getuid?.() === 0 ? /RLIMIT_NPROC [\d,]+ \(not enforced: the host runs as root/ : /RLIMIT_NPROC [\d,]+ \(counts every task of the host's user/,
      );
    } else {
      expect(text).toMatch(/^rlimits: none \(prlimit/m);
    }
    expect(status.watchdog.holds).toBe(existsSync("/proc/self/status"));
    expect(text).toMatch(status.watchdog.holds ? /^watchdog: every \d+ ms/m : /^watchdog: does not hold/m);
    const v2 = existsSync("/sys/fs/cgroup/cgroup.controllers");
    expect(lines.at(-1)).toMatch(v2 ? /^cgroups: not used: cgroup v2/ : /^cgroups: not used: cgroup v1 .*machine's supervision/);
  });
});
