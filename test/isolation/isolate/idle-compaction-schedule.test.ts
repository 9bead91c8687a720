import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { EntryTracker } from "../../../src/isolation/isolate/call-guard.js";
import { IdleCompaction } from "../../../src/isolation/isolate/idle-compaction.js";
import type { PooledIsolate } from "../../../src/isolation/isolate/pooled-isolate.js";
import { IsolatePool } from "../../../src/isolation/isolate/warm-pool.js";

/** The clock the pool and the compaction read (`monotonicMs`): fake timers' own. */
vi.mock("../../../src/clock.js", () => ({ monotonicMs: () => Date.now() }));

/**
 * When idle isolates are compacted (src/isolation/isolate/idle-compaction.ts), on fake timers and stand-in
 * isolates whose `compact` entry the test settles: one at a time, oldest first, once per idle period,
 * paced, and nothing scheduled once nothing is due.
 */
interface FakeIsolate {
  key: string;
  heapBytes: number;
  releasesSinceMeasure: number;
  holdsInterpreter: boolean;
  idleSinceMs: number;
  compacted: boolean;
  healthy: boolean;
  bytes: number;
  compactCalls: number;
  /** Settles the compaction in flight, after `tookMs` of (fake) time. */
  finish?: (tookMs: number) => void;
  entry: { compact: { apply: () => Promise<boolean> } };
  lineage?: string;
  contextCount: number;
  heldKeys(): Array<{ key: string; lineage: string | undefined }>;
  select(key: string): void;
  disposeByHost(): void;
}

function fakeIsolate(key: string): FakeIsolate {
  const fake: FakeIsolate = {
    key,
    heapBytes: 0,
    releasesSinceMeasure: 0,
    holdsInterpreter: false,
    idleSinceMs: 0,
    compacted: false,
    healthy: true,
    bytes: 5_000,
    compactCalls: 0,
    entry: {
      compact: {
        apply: () => {
          fake.compactCalls++;
          return new Promise<boolean>((resolve) => {
            fake.finish = (tookMs) => {
              vi.advanceTimersByTime(tookMs);
              fake.bytes = 1_000;
              resolve(true);
            };
          });
        },
      },
    },
    contextCount: 1,
    heldKeys: () => [{ key: fake.key, lineage: fake.lineage }],
    select: () => {},
    disposeByHost() {
      fake.healthy = false;
    },
  };
  return fake;
}

const AFTER_MS = 1_000;
let pool: IsolatePool;
let compaction: IdleCompaction;
const idle = async (key: string): Promise<FakeIsolate> => {
  const isolate = (await pool.acquire(key, async () => fakeIsolate(key) as unknown as PooledIsolate)) as unknown as FakeIsolate;
  pool.release(isolate as unknown as PooledIsolate, true);
  return isolate;
};
/** Lets the pass's awaits run (no timer fires). */
const turns = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

beforeEach(() => {
  vi.useFakeTimers({ now: 100_000 });
  pool = new IsolatePool(
    { maxIdleBytes: 1_000_000, maxPerKey: 4 },
    (p) => (p as unknown as FakeIsolate).bytes,
    () => compaction.noteIdle(),
  );
  compaction = new IdleCompaction(() => pool, AFTER_MS, new EntryTracker());
});
afterEach(() => {
  compaction.close();
  vi.useRealTimers();
});

describe("idle compaction's schedule", () => {
  it("compacts one idle isolate at a time, oldest first, once idle long enough, paced to a fifth of a core", async () => {
    const a = await idle("a");
    const b = await idle("b");
    const c = await idle("c");
    vi.advanceTimersByTime(300);
    const late = await idle("late");
    vi.advanceTimersByTime(AFTER_MS - 301);
    await turns();
    expect(a.compactCalls).toBe(0); // not idle long enough yet
    vi.advanceTimersByTime(1);
    await turns();
    expect([a, b, c].map((i) => i.compactCalls)).toEqual([1, 0, 0]);
    // a's compaction takes 10 ms: b, due too, waits 40 ms (10 ms is a fifth of 50).
    a.finish!(10);
    await turns();
    expect(compaction.compactions).toBe(1);
    expect(pool.stats().idleBytes).toBe(1_000 + 3 * 5_000); // a measured again
    vi.advanceTimersByTime(39);
    await turns();
    expect(b.compactCalls).toBe(0);
    vi.advanceTimersByTime(1);
    await turns();
    expect([b.compactCalls, c.compactCalls]).toEqual([1, 0]);
    b.finish!(1);
    await turns();
    vi.advanceTimersByTime(4);
    await turns();
    expect(c.compactCalls).toBe(1);
    c.finish!(1);
    await turns();
    // The one that went idle later is compacted when its own period ends (100,300 + 1,000).
    vi.advanceTimersByTime(100_000 + 300 + AFTER_MS - Date.now() - 1);
    await turns();
    expect(late.compactCalls).toBe(0);
    vi.advanceTimersByTime(1);
    await turns();
    expect(late.compactCalls).toBe(1);
    late.finish!(1);
    await turns();
    vi.advanceTimersByTime(10 * AFTER_MS);
    await turns();
    // Once per idle period: nothing more, and no timer left once nothing is due.
    expect([a, b, c, late].map((i) => i.compactCalls)).toEqual([1, 1, 1, 1]);
    expect(compaction.compactions).toBe(4);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("an isolate taken by a call before it is due is not compacted; idle again, it is, a full period later", async () => {
    const a = await idle("a");
    vi.advanceTimersByTime(AFTER_MS / 2);
    const taken = (await pool.acquire("a", async () => fakeIsolate("x") as unknown as PooledIsolate)) as unknown as FakeIsolate;
    expect(taken).toBe(a);
    vi.advanceTimersByTime(AFTER_MS);
    await turns();
    expect(a.compactCalls).toBe(0);
    pool.release(taken as unknown as PooledIsolate, true);
    vi.advanceTimersByTime(AFTER_MS - 1);
    await turns();
    expect(a.compactCalls).toBe(0);
    vi.advanceTimersByTime(1);
    await turns();
    expect(a.compactCalls).toBe(1);
  });

  it("closed, it starts nothing more (the compaction in flight ends); a failed compaction is not retried in the same idle period", async () => {
    const a = await idle("a");
    const b = await idle("b");
    a.entry.compact.apply = () => {
      a.compactCalls++;
      return Promise.reject(new Error("disposed meanwhile"));
    };
    vi.advanceTimersByTime(AFTER_MS);
    await turns();
    expect(a.compactCalls).toBe(1);
    vi.advanceTimersByTime(1);
    await turns();
    expect(b.compactCalls).toBe(1);
    compaction.close();
    b.finish!(1);
    await turns();
    vi.advanceTimersByTime(10 * AFTER_MS);
    await idle("c");
    vi.advanceTimersByTime(10 * AFTER_MS);
    await turns();
    expect([a.compactCalls, b.compactCalls]).toEqual([1, 1]);
    expect(compaction.compactions).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });
});
