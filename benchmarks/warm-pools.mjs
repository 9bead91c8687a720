// A host's warm pools, summed over its sandbox processes' reports, and a wait for their idle compaction
// (src/isolation/isolate/idle-compaction.ts) to settle. For the benchmarks only.
import { sandboxOf } from "../dist/src/host.js";

// A build without idle compaction (measured beside this one) waits as long and compacts nothing.
const { COMPACT_IDLE_AFTER_MS = 30_000 } = await import("../dist/src/isolation/isolate/idle-compaction.js").catch(() => ({}));

/** Idle isolates, their bytes and the compactions so far, summed over the host's sandbox processes. */
export async function warmPoolTotals(host) {
  const reports = await sandboxOf(host).warmPoolReport();
  const sum = (key) => reports.reduce((total, report) => total + (report[key] ?? 0), 0);
  return { compactions: sum("compactions"), idleIsolates: sum("idleIsolates"), idleBytes: sum("idleBytes") };
}

/**
 * Waits until the host's idle isolates are compacted: from `COMPACT_IDLE_AFTER_MS` on, until no process
 * has compacted another for a second (at most 120 s). Returns how long it waited and the compactions.
 */
export async function compactionsSettled(host) {
  const started = performance.now();
  let compactions = (await warmPoolTotals(host)).compactions;
  let stableSince = performance.now();
  while (performance.now() - started < COMPACT_IDLE_AFTER_MS || performance.now() - stableSince < 1_000) {
    if (performance.now() - started > 120_000) throw new Error("idle isolates still being compacted after 120 s");
    await new Promise((resolve) => setTimeout(resolve, 250));
    const now = (await warmPoolTotals(host)).compactions;
    if (now !== compactions) [compactions, stableSince] = [now, performance.now()];
  }
  return { waitedMs: Math.round(performance.now() - started), compactions };
}
