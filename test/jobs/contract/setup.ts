import { afterEach } from "vitest";
import type { UnfinishedJobLimits } from "../../../src/jobs/limits.js";
import type { JobStore } from "../../../src/jobs/store.js";
import { fakeClock, tempDir, withBundle } from "../helpers.js";

/**
 * Opens a store at `location` (a fresh empty directory the suite owns), with the per-Anima bounds given (or
 * the defaults). Two stores opened on the same location must share their jobs, as two processes on one
 * database file do.
 */
export type MakeStore = (location: string, options: { now: () => number } & UnfinishedJobLimits) => Promise<JobStore>;

/**
 * A test's store (holding the bundle `jobInput` names), its fake clock, and `open` for another instance
 * on the same location; `limits` for small per-Anima bounds.
 */
export type ContractSetup = (limits?: UnfinishedJobLimits) => Promise<{ store: JobStore; clock: ReturnType<typeof fakeClock>; open: () => Promise<JobStore> }>;

/** The set-up of each contract test; what it opens is closed and removed after each test. Call inside the describe. */
export function contractSetup(makeStore: MakeStore): ContractSetup {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  return async function setup(limits = {}) {
    const dir = tempDir();
    const clock = fakeClock();
    const opened: JobStore[] = [];
    const open = async () => {
      const store = await makeStore(dir.dir, { now: clock.now, ...limits });
      opened.push(store);
      return store;
    };
    cleanups.push(dir.cleanup, async () => {
      for (const store of opened) await store.close();
    });
    const store = await withBundle(await open());
    return { store, clock, open };
  };
}
