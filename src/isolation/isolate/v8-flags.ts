import { COLLECT_GARBAGE_GLOBAL } from "../../contract/tool-globals.js";

/**
 * V8 flags every process that runs isolates needs before its first isolate. Sandbox processes
 * (child-spawn.ts) and the launcher's in-process calls get them on their command line; any other
 * process (a library host, the daemon, a job worker) gets them from isolate-runner.ts as it loads
 * (node:v8 costs ≈ 10 ms to load, which a one-shot call is spared).
 *  - `--no-concurrent-osr`: on V8 13/14 a loop that allocates (`for (;;) h.push(new Array(100))`) and is
 *    optimised on a background thread while it runs (on-stack replacement) ignores isolated-vm's memory
 *    limit: its heap grew past 1 GB under a 32 MB limit, and the isolate then failed to terminate (its
 *    thread lost). Optimised on the isolate's own thread, it stops at the limit. Hostile fixture
 *    heap_bomb (`heap_bomb_osr_arrays`) in test/security/memory.test.ts.
 */
export const ISOLATE_V8_FLAGS = ["--no-concurrent-osr"] as const;

/**
 * The Node flags of a sandbox process: isolated-vm needs Node without its start-up snapshot; and V8's
 * garbage collection function under a name of its own, which the prelude takes at bind to compact idle
 * isolates (`COLLECT_GARBAGE_GLOBAL`). V8 reads that flag once, as it starts: set later it installs
 * nothing, so a process that was not started with it (a library host running isolates in-process, a
 * one-shot CLI call) leaves its idle isolates as they are.
 */
export const SANDBOX_NODE_FLAGS = ["--no-node-snapshot", ...ISOLATE_V8_FLAGS, `--expose-gc-as=${COLLECT_GARBAGE_GLOBAL}`] as const;

/** Sets the isolate flags this process's command line lacks (before its first isolate is made). */
export function setMissingIsolateFlags(): void {
  const flagsMissing = ISOLATE_V8_FLAGS.filter((flag) => !process.execArgv.includes(flag));
  if (flagsMissing.length === 0) return;
  const v8 = process.getBuiltinModule("node:v8");
  for (const flag of flagsMissing) v8.setFlagsFromString(flag);
}
