import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { killProcessTree } from "../../../src/isolation/os/process-lifetime.js";
import { processTree } from "../../../src/isolation/os/process-cpu.js";
import { waitFor } from "../../helpers/data-dir.js";

/** Whether `pid` still runs (a zombie runs nothing). */
function alive(pid: number): boolean {
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

describe.runIf(process.platform === "linux")("killProcessTree", () => {
  it("kills a process and every descendant, grandchildren that ignore SIGTERM included", async () => {
    // A shell with two children, one of which has a child of its own; all ignore SIGTERM.
    const root = spawn("/bin/sh", ["-c", `trap '' TERM; sleep 600 & sh -c "trap '' TERM; sleep 600 & wait" & echo started; wait`], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    const exited = new Promise<string | null>((resolve) => root.once("exit", (_code, signal) => resolve(signal)));
    await new Promise((resolve) => root.stdout.once("data", resolve));
    let tree: number[] = [];
    await waitFor(() => (tree = processTree(root.pid as number)).length === 4, 10_000);

    const signalled = killProcessTree(root.pid as number);
    expect(signalled[0]).toBe(root.pid);
    expect([...signalled].sort()).toEqual([...tree].sort());
    expect(await exited).toBe("SIGKILL");
    // The descendants were orphaned by the kill: they are gone too, not reparented and left running.
    await waitFor(() => tree.every((pid) => !alive(pid)), 10_000);
  });

  it("signals nothing for a process that is gone", () => {
    expect(killProcessTree(2 ** 22 + 1)).toEqual([]); // above pid_max's ceiling: never a process
  });
});
