import { childrenOf } from "./proc-readers.js";
import { tasksOf } from "./process-cpu.js";

/**
 * How every process of a sandbox process's tree is made to end when the host ends it.
 *
 * A sandbox process in bubblewrap is three processes: bwrap, which the host started; bwrap's clone,
 * pid 1 of the new pid namespace ("its init"); and Node, the init's child. Killing the first is not
 * enough. bwrap's `--die-with-parent` sets the init's parent-death signal only once its setup is done,
 * and before that the init waits on an eventfd that the first bwrap writes after the clone: a first
 * bwrap killed in between leaves the init blocked for good, childless, reparented to the machine's
 * init, and deaf to SIGTERM (a pid namespace's init takes from outside only SIGKILL and SIGSTOP).
 * That is bubblewrap issue #633; a host stopping while a process was starting left such an init an
 * hour after its daemon, and test/isolation/pool/pool-close.test.ts makes it happen.
 *
 * So `killProcessTree` stops the tree from the top down (a stopped process forks no more: a clone
 * racing the stop is restarted by the kernel, so the children lists read after it are complete), then
 * kills it from the bottom up, init included; SIGKILL to a pid namespace's init ends everything in the
 * namespace. A stopped parent reaps nothing, so no pid of the tree can be reused before its kill. The
 * caller passes only a pid it has not reaped (its child has not reported its exit).
 *
 * A host that dies without ending its processes (a crash, SIGKILL): `--die-with-parent` also gives the
 * first bwrap a parent-death signal (set right after its clone), so it dies with the host, its init
 * with it, and Node with the namespace. Not `setpriv --pdeathsig` in front of bwrap: it would kill a
 * bwrap still starting when the host dies, between its clone and its eventfd write, which is #633
 * again; a bwrap left to finish starting instead ends with its Node, which reads the host's end of the
 * channel closed (and has run no tool yet). What stays: a host dying inside bwrap's own window (from
 * its parent-death signal to its eventfd write, a few system calls) leaves one blocked init, which
 * nothing but the host could have killed.
 */

/** Processes of one tree stopped and killed at most (a sandbox process has three; without bwrap, one). */
export const MAX_KILLED_PROCESSES = 64;

/**
 * Stops and then kills `root` and every descendant (up to `MAX_KILLED_PROCESSES`). Returns the pids
 * signalled, root first. `root` must be a child the host has not reaped yet.
 */
export function killProcessTree(root: number): number[] {
  const stopped: number[] = [];
  const pending = [root];
  while (pending.length > 0 && stopped.length < MAX_KILLED_PROCESSES) {
    const pid = pending.shift() as number;
    try {
      process.kill(pid, "SIGSTOP");
    } catch {
      continue; // gone (or not the host's to signal): nothing to stop or kill
    }
    stopped.push(pid);
    // Read after the stop: whatever it forked before is listed, and it forks nothing after.
    for (const tid of tasksOf(pid)) pending.push(...childrenOf(pid, tid));
  }
  // Children first: their parents, stopped, cannot reap them meanwhile, so each pid is still theirs.
  for (const pid of [...stopped].reverse()) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // ended meanwhile
    }
  }
  return stopped;
}
