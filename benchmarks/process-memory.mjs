// Resident memory of processes, read from /proc: a process, a process with its descendants (a sandbox
// process inside bubblewrap is bwrap's child), and a host's sandbox processes. For the benchmarks only.
import { readFileSync, readdirSync } from "node:fs";
import { sandboxOf } from "../dist/src/host.js";

export function rssKb(pid) {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("VmRSS:"));
    return Number(line.split(/\s+/)[1]);
  } catch {
    return 0;
  }
}
/** A process and its descendants (a sandbox process inside bubblewrap is bwrap's child). */
export function treeRssKb(pid) {
  let total = rssKb(pid);
  let tasks;
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return total;
  }
  for (const task of tasks) {
    let children;
    try {
      children = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8");
    } catch {
      continue;
    }
    for (const child of children.split(" ").filter(Boolean)) total += treeRssKb(Number(child));
  }
  return total;
}
export const sandboxRssMb = (host) =>
  sandboxOf(host)
    .pids()
    .reduce((sum, pid) => sum + treeRssKb(pid), 0) / 1024;
