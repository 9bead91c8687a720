import { describe, expect, it } from "vitest";
import { FakeIsolate } from "../../helpers/fake-isolate.js";
import { IsolatePool, MAX_SHARED_HEAP_BYTES, type Sharing } from "../../../src/isolation/isolate/warm-pool.js";

/** Several tools of one Anima in one warm isolate (src/isolation/isolate/warm-pool.ts, sharing), on stand-in isolates. */
const ALICE = "alice\u0000128";
const key = (anima: string, hash: string) => `${anima}\u0000${hash}\u0000128`;
const lineage = (anima: string, tool: string) => `${anima}\u0000${tool}\u0000128`;

/** A pool that shares up to `toolsPerIsolate` tools per isolate, and the contexts its sharing added (by key). */
function sharingPool(toolsPerIsolate: number, maxIdleBytes = 1_000_000) {
  const pool = new IsolatePool({ maxIdleBytes, maxPerKey: 4, toolsPerIsolate }, (p) => (p as FakeIsolate).bytes);
  const added: string[] = [];
  const sharing = (group: string, fail = false): Sharing => ({
    group,
    addTool: async (host) => {
      if (fail) {
        host.disposeByHost();
        throw new Error("load failed");
      }
      added.push(host.key);
      return host;
    },
  });
  /** One call of `anima`'s tool `tool` (bundle `hash`): acquired with sharing in the Anima's group, released. */
  const call = async (anima: string, tool: string, hash: string, bytes = 1_000): Promise<FakeIsolate> => {
    const pooled = (await pool.acquire(
      key(anima, hash),
      async () => new FakeIsolate(key(anima, hash), bytes),
      lineage(anima, tool),
      sharing(`${anima}\u0000128`),
    )) as FakeIsolate;
    pool.release(pooled, true);
    return pooled;
  };
  return { pool, added, sharing, call };
}

describe("IsolatePool: one Anima's tools share an isolate", () => {
  it("gives another tool of the Anima a context in its idle isolate, and each call the context of its own tool", async () => {
    const { pool, added, call } = sharingPool(4);
    const first = await call("alice", "echo", "h1");
    const second = await call("alice", "weather", "h2");
    expect(second).toBe(first);
    expect(added).toEqual([key("alice", "h2")]);
    expect(first.contextCount).toBe(2);
    expect(pool.stats().idleIsolates).toBe(1);
    // A call of either tool takes the isolate with that tool's context current; no context is added again.
    const again = (await pool.acquire(key("alice", "h1"), async () => new FakeIsolate("unused", 0), lineage("alice", "echo"))) as FakeIsolate;
    expect([again, again.key]).toEqual([first, key("alice", "h1")]);
    pool.release(again, true);
    expect(added).toHaveLength(1);
  });

  it("never shares across Animas or groups, beyond toolsPerIsolate, or when set to 1", async () => {
    const { pool, call } = sharingPool(2);
    const a = await call("alice", "echo", "h1");
    const b = await call("bob", "echo", "h1");
    expect(b).not.toBe(a);
    expect(await call("alice", "weather", "h2")).toBe(a);
    // a holds two contexts: a third tool gets an isolate of its own.
    const third = await call("alice", "notes", "h3");
    expect(third).not.toBe(a);
    expect(pool.stats().idleIsolates).toBe(3);

    const off = sharingPool(1);
    expect(await off.call("alice", "weather", "h2")).not.toBe(await off.call("alice", "echo", "h1"));
    expect(off.added).toEqual([]);
  });

  it("shares only idle isolates, and none whose heap is over MAX_SHARED_HEAP_BYTES", async () => {
    const { pool, sharing, call } = sharingPool(4, 100 * MAX_SHARED_HEAP_BYTES);
    const busy = (await pool.acquire(
      key("alice", "h1"),
      async () => new FakeIsolate(key("alice", "h1"), 1_000),
      lineage("alice", "echo"),
      sharing(ALICE),
    )) as FakeIsolate;
    // The Anima's only isolate is in a call: another tool's call does not wait for it.
    const other = await call("alice", "weather", "h2");
    expect(other).not.toBe(busy);
    pool.release(busy, true);
    const big = await call("carol", "cache", "h1", MAX_SHARED_HEAP_BYTES + 1);
    expect(await call("carol", "echo", "h2")).not.toBe(big);
  });

  it("a replaced version takes the isolate that holds its old context, with the other tool's context", async () => {
    const { pool, call } = sharingPool(4);
    const shared = await call("alice", "echo", "v1");
    expect(await call("alice", "weather", "w1")).toBe(shared);
    const v2 = await call("alice", "echo", "v2");
    expect(shared.disposed).toBe(true);
    expect(v2).not.toBe(shared);
    expect(pool.stats().idleIsolates).toBe(1);
  });

  it("a busy isolate holding a replaced version's context is not kept when its call ends", async () => {
    const { pool, sharing, call } = sharingPool(4);
    const shared = await call("alice", "echo", "v1");
    expect(await call("alice", "weather", "w1")).toBe(shared);
    const busy = await pool.acquire(key("alice", "w1"), async () => new FakeIsolate("unused", 0), lineage("alice", "weather"), sharing(ALICE));
    expect(busy).toBe(shared);
    await call("alice", "echo", "v2");
    pool.release(busy, true);
    expect(shared.disposed).toBe(true);
  });

  it("an isolate whose added context failed to load is gone, and the pool forgets its keys", async () => {
    const { pool, sharing, call } = sharingPool(4);
    const shared = await call("alice", "echo", "h1");
    await expect(pool.acquire(key("alice", "h2"), async () => new FakeIsolate("unused", 0), lineage("alice", "weather"), sharing(ALICE, true))).rejects.toThrow(
      "load failed",
    );
    expect(shared.disposed).toBe(true);
    expect(pool.stats().idleIsolates).toBe(0);
    expect((pool as unknown as { keys: Map<string, unknown> }).keys.size).toBe(0);
    // The Anima's next call builds an isolate again.
    const next = await call("alice", "echo", "h1");
    expect([next === shared, next.disposed]).toEqual([false, false]);
  });

  it("a shared isolate not kept after a call (a stop, a recycle) frees every key it held", async () => {
    const { pool, sharing, call } = sharingPool(4);
    const shared = await call("alice", "echo", "h1");
    await call("alice", "weather", "h2");
    const taken = await pool.acquire(key("alice", "h2"), async () => new FakeIsolate("unused", 0), lineage("alice", "weather"), sharing(ALICE));
    pool.release(taken, false);
    expect(shared.disposed).toBe(true);
    expect((pool as unknown as { keys: Map<string, unknown> }).keys.size).toBe(0);
  });

  it("evicting a shared isolate frees every key it held", async () => {
    const { pool, call } = sharingPool(4);
    const shared = await call("alice", "echo", "h1");
    await call("alice", "weather", "h2");
    pool.disposeIdle();
    expect(shared.disposed).toBe(true);
    // Nothing is left of the Anima's keys or of its group's isolates with room.
    const inside = pool as unknown as { keys: Map<string, unknown>; roomy: Map<string, unknown> };
    expect([inside.keys.size, inside.roomy.size]).toEqual([0, 0]);
  });
});
