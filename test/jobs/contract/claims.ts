import { expect, it } from "vitest";
import { jobInput } from "../helpers.js";
import type { ContractSetup } from "./setup.js";

/** The JobStore contract (../contract.ts) on claiming: leases, the order of claims across Animas and within one, per-Anima limits, no job handed out twice. */
export function claimContract(setup: ContractSetup): void {
  it("claims under a lease: running, one attempt, lease owner and expiry", async () => {
    const { store, clock } = await setup();
    const { job } = await store.submit(jobInput("alice"));
    const [claimed] = await store.claim({ owner: "w1", leaseMs: 1_000, limit: 5 });
    expect(claimed).toMatchObject({
      id: job.id,
      status: "running",
      attempts: 1,
      leaseOwner: "w1",
      leaseExpiresAt: clock.now() + 1_000,
      startedAt: clock.now(),
    });
    expect(await store.claim({ owner: "w2", leaseMs: 1_000, limit: 5 })).toEqual([]);
  });

  it("claims round-robin across Animas whatever their priorities; within an Anima, highest priority then oldest", async () => {
    const { store } = await setup();
    const a = [];
    for (let i = 0; i < 4; i++) a.push((await store.submit(jobInput("a"))).job.id);
    const b1 = (await store.submit(jobInput("b"))).job.id;
    const b2 = (await store.submit(jobInput("b"))).job.id;
    const cUrgent = (await store.submit(jobInput("c", { priority: 5 }))).job.id;
    const aUrgent = (await store.submit(jobInput("a", { priority: 9 }))).job.id;
    const order = (await store.claim({ owner: "w", leaseMs: 1_000, limit: 10 })).map((j) => j.id);
    // Animas not served yet go in the order their most urgent job came (b, c, a: a's priority-9 job came
    // last, and heads a's queue); then they take turns.
    expect(order).toEqual([b1, cUrgent, aUrgent, b2, a[0], a[1], a[2], a[3]]);
  });

  it("does not let an Anima's high priorities delay another Anima's job by more than one turn", async () => {
    const { store } = await setup();
    for (let i = 0; i < 20; i++) await store.submit(jobInput("greedy", { priority: 1_000_000 }));
    const modest = (await store.submit(jobInput("modest", { priority: -5 }))).job.id;
    const order = (await store.claim({ owner: "w", leaseMs: 1_000, limit: 3 })).map((j) => j.id);
    expect(order.indexOf(modest)).toBe(1);
  });

  it("keeps round-robin turns across claims, so a newcomer waits at most one claim", async () => {
    const { store } = await setup();
    await Promise.all(Array.from({ length: 50 }, () => store.submit(jobInput("a"))));
    expect((await store.claim({ owner: "w", leaseMs: 1_000, limit: 1 }))[0]?.anima).toBe("a");
    const b = (await store.submit(jobInput("b"))).job.id;
    expect((await store.claim({ owner: "w", leaseMs: 1_000, limit: 1 }))[0]?.id).toBe(b);
  });

  it("respects the per-Anima limit across claimers, and skips to other Animas", async () => {
    const { store, open } = await setup();
    for (let i = 0; i < 5; i++) await store.submit(jobInput("a"));
    await store.submit(jobInput("b"));
    const other = await open();
    const first = await store.claim({ owner: "w1", leaseMs: 1_000, limit: 1, perAnimaLimit: 2 });
    const second = await other.claim({ owner: "w2", leaseMs: 1_000, limit: 5, perAnimaLimit: 2 });
    expect(first.map((j) => j.anima)).toEqual(["a"]);
    expect(second.map((j) => j.anima).sort()).toEqual(["a", "b"]);
    expect(await store.claim({ owner: "w1", leaseMs: 1_000, limit: 5, perAnimaLimit: 2 })).toEqual([]);
  });

  it("never hands one job to two store instances claiming concurrently", async () => {
    const { store, open } = await setup();
    const total = 120;
    await Promise.all(Array.from({ length: total }, (_, i) => store.submit(jobInput(`anima${i % 7}`))));
    const stores = [store, await open(), await open()];
    const claimedBy = await Promise.all(
      stores.map(async (s, n) => {
        const mine: string[] = [];
        for (;;) {
          const jobs = await s.claim({ owner: `w${n}`, leaseMs: 60_000, limit: 3 });
          if (jobs.length === 0) return mine;
          mine.push(...jobs.map((j) => j.id));
        }
      }),
    );
    const all = claimedBy.flat();
    expect(all).toHaveLength(total);
    expect(new Set(all).size).toBe(total);
    expect(claimedBy.every((ids) => ids.length > 0)).toBe(true);
  });
}
