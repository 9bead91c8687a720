import { existsSync, readFileSync, readdirSync } from "node:fs";
import { processTreeCpu } from "../../src/isolation/os/process-cpu.js";
import { LOW_PRIORITY_NICE } from "../../src/isolation/os/low-priority.js";
import { THRESHOLDS } from "../../src/isolation/scheduling/judge.js";
import { waitFor } from "../helpers/data-dir.js";

/**
 * What the noisy-neighbour tests (noisy-neighbour.test.ts) read of sandbox processes to see the host's
 * demotions: their scheduling (nice value and policy, per process or per thread), their CPU time as the
 * host reads it, and the bounded wait for the host to act on a busy process.
 */

/** How long an attack may run, and any wait for the host, ms: a bound to catch a hang, never a measure. */
export const HANG_MS = 15_000;
/** Tests that wait for the host to act: several such waits in a row on a loaded machine. */
export const HOST_ACTS_TEST_MS = 60_000;

/**
 * Nice value and scheduling policy of every process in a sandbox process's tree (bwrap's children
 * included), or with `threads` of every thread of each (a process demoted in place is lowered thread by thread).
 */
export function schedulingOf(pid: number, threads = false): Array<{ nice: number; policy: number }> {
  const found: Array<{ nice: number; policy: number }> = [];
  const visit = (p: number) => {
    for (const task of threads ? readdirSync(`/proc/${p}/task`) : [String(p)]) {
      const stat = readFileSync(`/proc/${p}/task/${task}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      found.push({ nice: Number(fields[16]), policy: Number(fields[38]) });
    }
    for (const child of readFileSync(`/proc/${p}/task/${p}/children`, "utf8").split(" ").filter(Boolean)) visit(Number(child));
  };
  visit(pid);
  return found;
}

/**
 * Waits until `acted()` (the host demoted what the test expects) while an attack keeps process `pid` busy.
 * Where other programs keep the cores, that process may never get the CPU the host judges busy, and then
 * nobody is demoted (docs/scheduling.md): if the wait runs out and the test's own readings (as the host's,
 * with a margin) never found it busy three times in a row, the test is skipped; if they did, it fails.
 */
export async function untilHostActs(acted: () => boolean, pid: number, skip: (note: string) => never): Promise<void> {
  let [last, lastAt, busyReadings, wasBusy] = [processTreeCpu(pid), performance.now(), 0, false];
  const reader = setInterval(() => {
    const cpu = processTreeCpu(pid);
    const cores = (ms: number) => ms / (performance.now() - lastAt);
    const busy =
      cpu &&
      last &&
      (cores(cpu.offMainMs - last.offMainMs) >= 1.2 * THRESHOLDS.busyOffMainCores || cores(cpu.totalMs - last.totalMs) >= 1.2 * THRESHOLDS.busyTreeCores);
    busyReadings = busy ? busyReadings + 1 : 0;
    wasBusy ||= busyReadings >= 3; // 750 ms: a whole reading of the host's after the call turned long
    [last, lastAt] = [cpu, performance.now()];
  }, THRESHOLDS.readEveryMs);
  try {
    await waitFor(acted, HANG_MS);
  } catch (error) {
    if (!wasBusy) skip(`process ${pid} never got the CPU the host judges busy on this machine: nothing to demote`);
    throw error;
  } finally {
    clearInterval(reader);
  }
}
export const [SCHED_OTHER, SCHED_IDLE] = [0, 5];
/** Lowered as the host lowers: SCHED_IDLE where chrt exists (set before the process runs), else nice 19 (set by the process itself). */
export const lowered = (p: { nice: number; policy: number }) => (existsSync("/usr/bin/chrt") ? p.policy === SCHED_IDLE : p.nice === LOW_PRIORITY_NICE);
