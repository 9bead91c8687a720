import { describe, expect, it, vi } from "vitest";
import { FakeIsolate } from "../../helpers/fake-isolate.js";
import { IsolatePool } from "../../../src/isolation/isolate/warm-pool.js";

/** The pool's clock (when an isolate went idle), set by the tests. */
const clock = vi.hoisted(() => ({ nowMs: 0 }));
vi.mock("../../../src/clock.js", () => ({ monotonicMs: () => clock.nowMs }));

/** Stand-ins for isolates (test/helpers/fake-isolate.ts). */
function fakeIsolate(key: string, bytes: number): FakeIsolate {
  return new FakeIsolate(key, bytes);
}

describe("IsolatePool (warm pool by memory)", () => {
  it("keeps Python interpreters apart from the byte budget, at most maxIdleInterpreters of them", async () => {
    const pool = new IsolatePool({ maxIdleBytes: 10_000, maxPerKey: 4, maxIdleInterpreters: 2 }, (p) => (p as ReturnType<typeof fakeIsolate>).bytes);
    const interpreters: Array<ReturnType<typeof fakeIsolate>> = [];
    for (const key of ["py1", "py2", "py3"]) {
      const isolate = await pool.acquire(key, async () => {
        const created = Object.assign(fakeIsolate(key, 100_000_000), { holdsInterpreter: true });
        interpreters.push(created);
        return created;
      });
      pool.release(isolate, true);
    }
    // Each is far over the byte budget, and still kept: the two most recent.
    expect(interpreters.map((i) => i.disposed)).toEqual([true, false, false]);
    pool.release(await pool.acquire("ts", async () => fakeIsolate("ts", 3_000)), true);
    expect(pool.stats()).toMatchObject({ idleIsolates: 3, idleInterpreters: 2, idleBytes: 3_000, evictions: 1 });
    // The byte budget evicts ordinary isolates only.
    pool.release(await pool.acquire("ts2", async () => fakeIsolate("ts2", 9_000)), true);
    expect(interpreters.map((i) => i.disposed)).toEqual([true, false, false]);
    expect(pool.stats()).toMatchObject({ idleInterpreters: 2, idleBytes: 9_000 });
  });

  it("keeps idle isolates within its byte budget, disposing the least recently used first", async () => {
    const pool = new IsolatePool({ maxIdleBytes: 10_000, maxPerKey: 4 }, (p) => (p as ReturnType<typeof fakeIsolate>).bytes);
    const made: Array<ReturnType<typeof fakeIsolate>> = [];
    for (const key of ["a", "b", "c", "d"]) {
      const isolate = await pool.acquire(key, async () => {
        const created = fakeIsolate(key, 3_000);
        made.push(created);
        return created;
      });
      pool.release(isolate, true);
    }
    expect(made.map((m) => m.disposed)).toEqual([true, false, false, false]);
    expect(pool.stats()).toMatchObject({ idleIsolates: 3, idleBytes: 9_000, maxIdleBytes: 10_000, evictions: 1 });
    // Reusing "b" makes it the most recent: the next one to go is "c".
    pool.release(await pool.acquire("b", async () => fakeIsolate("b", 0)), true);
    pool.release(await pool.acquire("e", async () => fakeIsolate("e", 3_000)), true);
    expect(made.map((m) => m.disposed)).toEqual([true, false, true, false]);
  });

  it("never keeps an isolate larger than the whole budget, nor one that cannot be measured", async () => {
    const pool = new IsolatePool({ maxIdleBytes: 1_000, maxPerKey: 4 }, (p) => {
      if (p.key === "broken") throw new Error("disposed");
      return (p as ReturnType<typeof fakeIsolate>).bytes;
    });
    const big = await pool.acquire("big", async () => fakeIsolate("big", 5_000));
    pool.release(big, true);
    const broken = await pool.acquire("broken", async () => fakeIsolate("broken", 10));
    pool.release(broken, true);
    expect([big.healthy, broken.healthy]).toEqual([false, false]);
    expect(pool.stats()).toMatchObject({ idleIsolates: 0, idleBytes: 0 });
  });

  it("measures a reused isolate again after a long call, so a heap that grew counts", async () => {
    const pool = new IsolatePool({ maxIdleBytes: 10_000, maxPerKey: 4 }, (p) => (p as ReturnType<typeof fakeIsolate>).bytes);
    const grower = fakeIsolate("g", 1_000);
    pool.release(await pool.acquire("g", async () => grower), true);
    expect(pool.stats().idleBytes).toBe(1_000);
    grower.bytes = 4_000;
    pool.release(await pool.acquire("g", async () => fakeIsolate("g", 0)), true, 1); // short call: figure kept
    expect(pool.stats().idleBytes).toBe(1_000);
    pool.release(await pool.acquire("g", async () => fakeIsolate("g", 0)), true, 50); // long call: measured again
    expect(pool.stats().idleBytes).toBe(4_000);
  });

  it("disposes a replaced version's idle isolates when the new version is first used, not another tool's", async () => {
    const pool = new IsolatePool({ maxIdleBytes: 100_000, maxPerKey: 4 }, () => 100);
    const v1 = fakeIsolate("eve\u0000v1\u0000128", 100);
    const other = fakeIsolate("eve\u0000o1\u0000128", 100);
    pool.release(await pool.acquire(v1.key, async () => v1, "eve\u0000echo\u0000128"), true);
    pool.release(await pool.acquire(other.key, async () => other, "eve\u0000other\u0000128"), true);
    // A busy isolate of the old version (a call in flight) finishes its call.
    const busyOld = await pool.acquire(v1.key, async () => fakeIsolate(v1.key, 100), "eve\u0000echo\u0000128");
    const v2 = fakeIsolate("eve\u0000v2\u0000128", 100);
    pool.release(await pool.acquire(v2.key, async () => v2, "eve\u0000echo\u0000128"), true);
    expect(busyOld).toBe(v1); // the idle v1 was reused for that call
    expect([v2.disposed, other.disposed, busyOld.healthy]).toEqual([false, false, true]);
    expect(pool.stats()).toMatchObject({ idleIsolates: 2, idleBytes: 200 });
    // The old version's call ends: its isolate is not kept.
    pool.release(busyOld, true);
    expect(v1.disposed).toBe(true);
    expect(pool.stats()).toMatchObject({ idleIsolates: 2, idleBytes: 200 });
    // A job pinned to the old version still runs, on an isolate built again; the new version's goes then.
    const pinned = fakeIsolate(v1.key, 100);
    pool.release(await pool.acquire(v1.key, async () => pinned, "eve\u0000echo\u0000128"), true);
    expect([pinned.disposed, v2.disposed, other.disposed]).toEqual([false, true, false]);
  });

  it("drops the idle isolates of one Anima only", async () => {
    const pool = new IsolatePool({ maxIdleBytes: 100_000, maxPerKey: 4 }, () => 100);
    const isolates = ["eve\u0000h1\u0000128", "eve\u0000h2\u0000128", "eve2\u0000h1\u0000128"].map((key) => fakeIsolate(key, 100));
    for (const isolate of isolates) pool.release(await pool.acquire(isolate.key, async () => isolate), true);
    pool.disposeIdleOf("eve\u0000");
    expect(isolates.map((i) => i.disposed)).toEqual([true, true, false]);
    expect(pool.stats().idleIsolates).toBe(1);
  });

  it("finds the isolates due for compaction, oldest first: JavaScript tools' only, once per idle period, none while taken", async () => {
    clock.nowMs = 1_000;
    const pool = new IsolatePool({ maxIdleBytes: 1_000_000, maxPerKey: 4 }, (p) => (p as ReturnType<typeof fakeIsolate>).bytes);
    const idle: Array<ReturnType<typeof fakeIsolate>> = [];
    for (const key of ["a", "b", "py"]) {
      const isolate = await pool.acquire(key, async () => Object.assign(fakeIsolate(key, 3_000), { holdsInterpreter: key === "py" }));
      idle.push(isolate as ReturnType<typeof fakeIsolate>);
      pool.release(isolate, true);
      clock.nowMs += 100;
    }
    // a went idle at 1,000, b at 1,100; the interpreter (py) is never due.
    expect(pool.compactionDue(1_050, 500)).toEqual({ due: [idle[0]], nextAtMs: 1_600 });
    expect(pool.compactionDue(2_000, 500)).toEqual({ due: [idle[0], idle[1]], nextAtMs: undefined });
    idle[0]!.compacted = true;
    expect(pool.compactionDue(2_000, 500).due).toEqual([idle[1]]);
    // Taken by a call, b is not idle; released again, it is due again once idle long enough.
    const taken = await pool.acquire("b", async () => fakeIsolate("b", 0));
    expect(pool.isIdle(taken)).toBe(false);
    expect(pool.compactionDue(2_000, 500).due).toEqual([]);
    clock.nowMs = 3_000;
    pool.release(taken, true);
    expect(pool.compactionDue(3_000, 500)).toEqual({ due: [taken], nextAtMs: undefined });
    expect(pool.compactionDue(2_999, 500)).toEqual({ due: [], nextAtMs: 3_500 });
  });

  it("measures a compacted isolate again: the budget counts its new size, and one that cannot be measured is dropped", async () => {
    const pool = new IsolatePool({ maxIdleBytes: 10_000, maxPerKey: 4 }, (p) => (p as ReturnType<typeof fakeIsolate>).bytes);
    const a = (await pool.acquire("a", async () => fakeIsolate("a", 6_000))) as ReturnType<typeof fakeIsolate>;
    pool.release(a, true);
    a.bytes = 2_000;
    pool.remeasureIdle(a);
    expect(pool.stats()).toMatchObject({ idleIsolates: 1, idleBytes: 2_000 });
    // Room for one more that would not have fitted before.
    pool.release(await pool.acquire("b", async () => fakeIsolate("b", 7_000)), true);
    expect(pool.stats()).toMatchObject({ idleIsolates: 2, idleBytes: 9_000, evictions: 0 });
    const b = [...(pool as unknown as { idleOrder: Set<ReturnType<typeof fakeIsolate>> }).idleOrder][1]!;
    b.bytes = Number.NaN;
    (pool as unknown as { heapBytesOf: unknown }).heapBytesOf = () => {
      throw new Error("disposed");
    };
    pool.remeasureIdle(b);
    expect(b.disposed).toBe(true);
    expect(pool.stats()).toMatchObject({ idleIsolates: 1, idleBytes: 2_000 });
  });
});
