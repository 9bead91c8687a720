import { monotonicMs } from "../../clock.js";
import type { EntryTracker } from "./call-guard.js";
import type { PooledIsolate } from "./pooled-isolate.js";
import type { IsolatePool } from "./warm-pool.js";

/** How long an isolate is idle in the warm pool before it is compacted, ms (`IsolateRunnerOptions.compactIdleAfterMs`). */
export const COMPACT_IDLE_AFTER_MS = 30_000;

/**
 * A compaction's isolated-vm timeout, ms. No tool code runs in it (the collector is the prelude's, its
 * options its own, and no call is open); a collection itself is not interruptible, and its time is
 * bounded by the isolate's heap, which its memory limit bounds.
 */
const COMPACT_TIMEOUT_MS = 2_000;

/**
 * The share of a core a pass may keep busy (0–1): after each compaction the pass waits so that the
 * compactions take at most this share of its time. The CPU judge counts a process whose isolate threads
 * use half a core as busy (scheduling/judge.ts `busyOffMainCores`), and a long call on a busy process
 * makes its Anima over its share: a pass over a thousand idle isolates (≈ 2 ms each) must not make a
 * quiet Anima's call that waits on the network look like the one keeping the process busy.
 */
const PASS_CPU_SHARE = 0.2;

/**
 * Compacts isolates that have been idle in the warm pool for a while: a full collection in the isolate
 * that also gives back the pages V8 no longer needs (`GuestEntry.compact`).
 *
 * Why the host asks: V8 shrinks a heap by itself (its memory reducer) only from tasks it runs while the
 * isolate is entered, and an idle isolate never is, so it kept all the pages its last calls committed
 * (a tool that parses 230 KB of JSON: 5 MB of heap, where 1.4 MB is live; benchmarks/idle-compaction.mjs).
 * Compacted, it holds what is live, and the warm pool's budget, measured again afterwards, keeps more
 * isolates warm.
 *
 * Invariants:
 *  - One compaction at a time per runner, on the isolate's own thread (isolated-vm), never on this one's
 *    event loop, paced to a fifth of a core (`PASS_CPU_SHARE`); the oldest idle isolates first. A pass
 *    runs only when one is due: nothing wakes an idle process whose isolates are all compacted or busy.
 *  - An isolate is compacted at most once per idle period: a call that takes it resets that
 *    (pooled-isolate.ts `release`). A call arriving during its compaction waits for it (isolated-vm runs
 *    an isolate's tasks one after another): a few milliseconds, once per idle period.
 *  - A hot isolate is never touched; the first call after a compaction pays for the pages its work
 *    touches again (+0.03 ms for a tool that adds one; +3 ms for one that parses 230 KB of JSON, whose
 *    isolate compaction takes from 5.3 to 2.1 MB resident): hence 30 s by default, longer than a model's
 *    usual turn between an Anima's calls, so that a working Anima's calls do not pay it each time.
 */
export class IdleCompaction {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private closed = false;
  /** Isolates compacted since the runner started (its warm pool's statistics). */
  compactions = 0;

  constructor(
    private readonly pool: () => IsolatePool,
    /** Idle time before a compaction, ms; 0 turns compaction off. */
    private readonly afterMs: number,
    /** The runner's entries into isolates: its close waits for a compaction in flight as for a call. */
    private readonly entries: EntryTracker,
  ) {}

  /** An isolate went idle: a pass is scheduled unless one is already. Cheap: it runs on every call's release. */
  noteIdle(): void {
    if (this.timer === undefined && !this.running && !this.closed && this.afterMs > 0) this.schedule(this.afterMs);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** False when it could not: no collector in this process, a Python context, or disposed meanwhile. */
  private async compact(pooled: PooledIsolate): Promise<boolean> {
    try {
      return (await this.entries.track(pooled.entry!.compact.apply(undefined, [], { timeout: COMPACT_TIMEOUT_MS }))) === true;
    } catch {
      return false;
    }
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.pass();
    }, delayMs);
    // A process whose only work left is compaction may end.
    this.timer.unref();
  }

  private async pass(): Promise<void> {
    this.running = true;
    try {
      const pool = this.pool();
      for (const pooled of pool.compactionDue(monotonicMs() - this.afterMs, this.afterMs).due) {
        if (this.closed) return;
        // Taken by a call (and perhaps idle again, not long enough) since the pass began: not due now.
        if (pooled.compacted || !pool.isIdle(pooled) || pooled.idleSinceMs > monotonicMs() - this.afterMs) continue;
        pooled.compacted = true;
        const startedAt = monotonicMs();
        if (!(await this.compact(pooled))) continue;
        this.compactions++;
        pool.remeasureIdle(pooled);
        const tookMs = monotonicMs() - startedAt;
        await new Promise((resolve) => setTimeout(resolve, Math.max(1, (tookMs * (1 - PASS_CPU_SHARE)) / PASS_CPU_SHARE)).unref());
      }
    } finally {
      this.running = false;
    }
    if (this.closed || this.timer !== undefined) return;
    // Isolates that went idle during the pass were not scheduled by their release (`noteIdle` waits for
    // the pass to end): look again.
    const next = this.pool().compactionDue(monotonicMs() - this.afterMs, this.afterMs);
    if (next.due.length > 0) this.schedule(0);
    else if (next.nextAtMs !== undefined) this.schedule(Math.max(0, next.nextAtMs - monotonicMs()));
  }
}
