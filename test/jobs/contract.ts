import { afterEach, describe, expect, it } from "vitest";
import { ToolHostError } from "../../src/errors.js";
import { type JobStore, leaseOf } from "../../src/jobs/store.js";
import { BUNDLE_CODE, BUNDLE_HASH, fakeClock, jobInput, sha256, tempDir, waitFor, withBundle } from "./helpers.js";

/**
 * Opens a store at `location` (a fresh empty directory the suite owns). Two stores opened on the same
 * location must share their jobs, as two processes on one database file do.
 */
export type MakeStore = (location: string, options: { now: () => number }) => Promise<JobStore>;

/** The behaviour every `JobStore` promises (src/jobs/store.ts). Call once per implementation. */
export function runJobStoreContract(name: string, makeStore: MakeStore): void {
  describe(`JobStore contract: ${name}`, () => {
    const cleanups: Array<() => Promise<void> | void> = [];
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    });

    async function setup() {
      const dir = tempDir();
      const clock = fakeClock();
      const opened: JobStore[] = [];
      const open = async () => {
        const store = await makeStore(dir.dir, { now: clock.now });
        opened.push(store);
        return store;
      };
      cleanups.push(dir.cleanup, async () => {
        for (const store of opened) await store.close();
      });
      const store = await withBundle(await open());
      return { store, clock, open };
    }

    it("submits a queued job with defaults and a 12-hex id, distinct per submit", async () => {
      const { store, clock } = await setup();
      const { job, created } = await store.submit(jobInput("alice"));
      const second = await store.submit(jobInput("alice"));
      expect(created).toBe(true);
      expect(job.id).toMatch(/^[0-9a-f]{12}$/);
      expect(second.job.id).not.toBe(job.id);
      expect(job).toMatchObject({
        anima: "alice",
        tool: "web",
        action: "fetch",
        schemaName: "web_fetch",
        bundleHash: BUNDLE_HASH,
        status: "queued",
        priority: 0,
        attempts: 0,
        maxAttempts: 1,
        cancelRequested: false,
        submittedAt: clock.now(),
      });
      expect(await store.get("alice", job.id)).toEqual(job);
    });

    it("refuses bad submits with InvalidArguments, and an unknown bundle with NotFound", async () => {
      const { store } = await setup();
      const bad = [
        jobInput(""),
        jobInput("alice", { argsJson: "{not json" }),
        jobInput("alice", { priority: 1.5 }),
        jobInput("alice", { maxAttempts: 0 }),
        jobInput("alice", { timeoutMs: -1 }),
      ];
      for (const input of bad) {
        await expect(store.submit(input)).rejects.toMatchObject({ type: "InvalidArguments" });
      }
      await expect(store.submit(jobInput("alice", { bundleHash: sha256("other") }))).rejects.toMatchObject({ type: "NotFound" });
      expect(await store.list("alice")).toEqual([]);
    });

    it("is durable: a submitted job is visible to another instance at once and survives reopening", async () => {
      const { store, open } = await setup();
      const { job } = await store.submit(jobInput("alice", { priority: 3, maxAttempts: 2, timeoutMs: 5_000 }));
      const other = await open();
      expect(await other.get("alice", job.id)).toEqual(job);
      const [claimed] = await store.claim({ owner: "w1", leaseMs: 1_000, limit: 1 });
      await store.close();
      const reopened = await open();
      expect(await reopened.get("alice", job.id)).toEqual(claimed);
      expect(await reopened.getBundle(BUNDLE_HASH)).toBe(BUNDLE_CODE);
    });

    it("dedupes by idempotency key per Anima, also for concurrent submits", async () => {
      const { store } = await setup();
      const input = jobInput("alice", { idempotencyKey: "k1" });
      const results = await Promise.all([store.submit(input), store.submit(input), store.submit(input)]);
      expect(new Set(results.map((r) => r.job.id)).size).toBe(1);
      expect(results.filter((r) => r.created)).toHaveLength(1);
      const bob = await store.submit(jobInput("bob", { idempotencyKey: "k1" }));
      expect(bob.created).toBe(true);
      expect(bob.job.id).not.toBe(results[0].job.id);
      await expect(store.submit(jobInput("alice", { idempotencyKey: "k1", argsJson: "{}" }))).rejects.toMatchObject({
        type: "InvalidArguments",
      });
      expect(await store.list("alice")).toHaveLength(1);
    });

    it("scopes every read and cancel to the owning Anima", async () => {
      const { store } = await setup();
      const { job } = await store.submit(jobInput("alice"));
      await store.submit(jobInput("bob"));
      expect(await store.get("bob", job.id)).toBeUndefined();
      expect(await store.requestCancel("bob", job.id)).toBeUndefined();
      expect((await store.get("alice", job.id))?.status).toBe("queued");
      expect((await store.list("bob")).map((j) => j.anima)).toEqual(["bob"]);
    });

    it("lists newest first, filtered by status and limited", async () => {
      const { store } = await setup();
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await store.submit(jobInput("alice"))).job.id);
      await store.requestCancel("alice", ids[1]!);
      expect((await store.list("alice")).map((j) => j.id)).toEqual([...ids].reverse());
      expect((await store.list("alice", { status: "cancelled" })).map((j) => j.id)).toEqual([ids[1]]);
      expect((await store.list("alice", { status: ["queued"], limit: 2 })).map((j) => j.id)).toEqual([ids[4], ids[3]]);
    });

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

    it("renews only leases still held, and reports cancel requests to the holder", async () => {
      const { store, clock } = await setup();
      await store.submit(jobInput("alice"));
      const [job] = await store.claim({ owner: "w1", leaseMs: 1_000, limit: 1 });
      const lease = leaseOf(job!);
      clock.advance(900);
      expect(await store.renewLeases([lease, { ...lease, owner: "w2" }, { ...lease, attempt: 2 }], 1_000)).toEqual([
        { held: true, cancelRequested: false },
        { held: false, cancelRequested: false },
        { held: false, cancelRequested: false },
      ]);
      clock.advance(900); // past the first expiry, within the renewed one
      expect((await store.recoverExpiredLeases()).requeued).toEqual([]);
      await store.requestCancel("alice", job!.id);
      expect(await store.renewLeases([lease], 1_000)).toEqual([{ held: true, cancelRequested: true }]);
    });

    it("completes with a result or an error, once, and only for the lease holder", async () => {
      const { store, clock } = await setup();
      await store.submit(jobInput("alice"));
      await store.submit(jobInput("alice"));
      const [ok, bad] = await store.claim({ owner: "w1", leaseMs: 1_000, limit: 2 });
      expect(await store.complete({ ...leaseOf(ok!), owner: "intruder" }, { status: "succeeded", result: "x" })).toBeUndefined();
      clock.advance(10);
      const done = await store.complete(leaseOf(ok!), { status: "succeeded", result: "42 lines" });
      expect(done).toMatchObject({ status: "succeeded", result: "42 lines", finishedAt: clock.now() });
      expect(done?.leaseOwner).toBeUndefined();
      expect(await store.complete(leaseOf(ok!), { status: "failed", error: { type: "Timeout", fault: "tool", message: "late" } })).toBeUndefined();
      const failed = await store.complete(leaseOf(bad!), { status: "failed", error: { type: "Timeout", fault: "tool", message: "too slow" } });
      expect(failed).toMatchObject({ status: "failed", error: { type: "Timeout", fault: "tool", message: "too slow" } });
      expect(await store.renewLeases([leaseOf(ok!)], 1_000)).toEqual([{ held: false, cancelRequested: false }]);
    });

    it("keeps a job's error whole: type, message, fault and hint, as the worker recorded it", async () => {
      const { store } = await setup();
      await store.submit(jobInput("alice"));
      await store.submit(jobInput("alice"));
      const [first, second] = await store.claim({ owner: "w1", leaseMs: 1_000, limit: 2 });
      const crashed = { type: "SandboxCrashed" as const, fault: "host" as const, message: "the sandbox died", hint: "see the host's log" };
      await store.complete(leaseOf(first!), { status: "failed", error: crashed });
      await store.complete(leaseOf(second!), { status: "failed", error: { type: "ExecutionError", fault: "caller", message: "stopped" } });
      expect((await store.get("alice", first!.id))?.error).toEqual(crashed);
      expect((await store.get("alice", second!.id))?.error).toEqual({ type: "ExecutionError", fault: "caller", message: "stopped" });
    });

    it("keeps whether a result is an object or text, and a cancelled job's partial result", async () => {
      const { store } = await setup();
      for (let i = 0; i < 4; i++) await store.submit(jobInput("alice"));
      const [object, text, partial, bare] = await store.claim({ owner: "w1", leaseMs: 1_000, limit: 4 });
      await store.complete(leaseOf(object!), { status: "succeeded", result: '{"n":1}', structured: true });
      // A tool that returned a string which happens to be an object's JSON returned text.
      await store.complete(leaseOf(text!), { status: "succeeded", result: '{"n":2}' });
      expect(await store.complete(leaseOf(partial!), { status: "cancelled", result: '{"done":3}', structured: true })).toMatchObject({
        status: "cancelled",
        result: '{"done":3}',
        resultStructured: true,
      });
      await store.complete(leaseOf(bare!), { status: "cancelled" });
      expect(await store.get("alice", object!.id)).toMatchObject({ result: '{"n":1}', resultStructured: true });
      expect(await store.get("alice", text!.id)).toMatchObject({ result: '{"n":2}', resultStructured: false });
      expect(await store.get("alice", partial!.id)).toMatchObject({ status: "cancelled", result: '{"done":3}', resultStructured: true });
      const cancelled = await store.get("alice", bare!.id);
      expect(cancelled?.result).toBeUndefined();
      expect(cancelled?.resultStructured).toBeUndefined();
    });

    it("cancels a queued job at once and never hands it out; flags a running one", async () => {
      const { store, clock } = await setup();
      const queued = (await store.submit(jobInput("alice"))).job;
      const cancelled = await store.requestCancel("alice", queued.id);
      expect(cancelled).toMatchObject({ status: "cancelled", finishedAt: clock.now() });
      const { job } = await store.submit(jobInput("alice"));
      const [running] = await store.claim({ owner: "w1", leaseMs: 1_000, limit: 5 });
      expect(running?.id).toBe(job.id);
      expect(await store.requestCancel("alice", job.id)).toMatchObject({ status: "running", cancelRequested: true });
      expect(await store.complete(leaseOf(running!), { status: "cancelled" })).toMatchObject({ status: "cancelled" });
      expect(await store.requestCancel("alice", job.id)).toMatchObject({ status: "cancelled" });
    });

    it("recovers an expired lease: retry with doubling backoff while attempts remain, then interrupted", async () => {
      const { store, clock } = await setup();
      const { job } = await store.submit(jobInput("alice", { maxAttempts: 3, retryBackoffMs: 100 }));
      const once = (await store.submit(jobInput("alice"))).job;
      const claimed = await store.claim({ owner: "w1", leaseMs: 1_000, limit: 2 });
      clock.advance(999);
      expect(await store.recoverExpiredLeases()).toEqual({ requeued: [], ended: [] });
      clock.advance(1);
      const first = await store.recoverExpiredLeases();
      expect(first.requeued.map((j) => [j.id, j.status, j.attempts, j.notBefore])).toEqual([[job.id, "queued", 1, clock.now() + 100]]);
      expect(first.ended).toMatchObject([{ id: once.id, status: "interrupted", attempts: 1, error: { type: "ExecutionError", fault: "host" } }]);
      expect(await store.claim({ owner: "w2", leaseMs: 1_000, limit: 1 })).toEqual([]); // backoff not over
      clock.advance(100);
      const [second] = await store.claim({ owner: "w2", leaseMs: 1_000, limit: 1 });
      expect(second).toMatchObject({ id: job.id, attempts: 2, leaseOwner: "w2" });
      // The first worker wakes up late: its lease is void, its outcome refused.
      const stale = leaseOf(claimed.find((j) => j.id === job.id)!);
      expect(await store.complete(stale, { status: "succeeded", result: "late" })).toBeUndefined();
      clock.advance(1_000);
      expect((await store.recoverExpiredLeases()).requeued[0]?.notBefore).toBe(clock.now() + 200);
      clock.advance(200);
      await store.claim({ owner: "w3", leaseMs: 1_000, limit: 1 });
      clock.advance(1_000);
      const last = await store.recoverExpiredLeases();
      expect(last.ended).toMatchObject([{ id: job.id, status: "interrupted", attempts: 3, maxAttempts: 3 }]);
      expect(await store.claim({ owner: "w4", leaseMs: 1_000, limit: 1 })).toEqual([]);
    });

    it("ends an expired job whose cancel was requested as cancelled, not retried", async () => {
      const { store, clock } = await setup();
      const { job } = await store.submit(jobInput("alice", { maxAttempts: 5 }));
      await store.claim({ owner: "w1", leaseMs: 1_000, limit: 1 });
      await store.requestCancel("alice", job.id);
      clock.advance(1_000);
      expect((await store.recoverExpiredLeases()).ended).toMatchObject([{ id: job.id, status: "cancelled" }]);
    });

    it("gives a lease back at once when renewed for 0 ms", async () => {
      const { store } = await setup();
      await store.submit(jobInput("alice", { maxAttempts: 2, retryBackoffMs: 0 }));
      const [job] = await store.claim({ owner: "w1", leaseMs: 60_000, limit: 1 });
      await store.renewLeases([leaseOf(job!)], 0);
      expect((await store.recoverExpiredLeases()).requeued.map((j) => j.id)).toEqual([job!.id]);
      expect((await store.claim({ owner: "w2", leaseMs: 1_000, limit: 1 }))[0]?.attempts).toBe(2);
    });

    it("records progress for the lease holder, clamped, and clears it for a new attempt", async () => {
      const { store } = await setup();
      const { job } = await store.submit(jobInput("alice", { maxAttempts: 2, retryBackoffMs: 0 }));
      const [running] = await store.claim({ owner: "w1", leaseMs: 1_000, limit: 1 });
      expect(await store.reportProgress(leaseOf(running!), { fraction: 0.25, message: "page 1 of 4" })).toBe(true);
      expect((await store.get("alice", job.id))?.progress).toEqual({ fraction: 0.25, message: "page 1 of 4" });
      expect(await store.reportProgress(leaseOf(running!), { fraction: 7, message: "" })).toBe(true);
      expect((await store.get("alice", job.id))?.progress?.fraction).toBe(1);
      expect(await store.reportProgress({ ...leaseOf(running!), owner: "w2" }, { fraction: 0.5, message: "" })).toBe(false);
      await store.renewLeases([leaseOf(running!)], 0);
      await store.recoverExpiredLeases();
      const [again] = await store.claim({ owner: "w2", leaseMs: 1_000, limit: 1 });
      expect(again?.progress).toBeUndefined();
    });

    it("lists finished jobs awaiting a notice until marked, honouring their age", async () => {
      const { store, clock } = await setup();
      const queued = (await store.submit(jobInput("alice"))).job;
      await store.requestCancel("alice", queued.id);
      await store.submit(jobInput("bob"));
      const [running] = await store.claim({ owner: "w", leaseMs: 1_000, limit: 1 });
      expect((await store.pendingNotices({ minAgeMs: 0, limit: 10 })).map((j) => j.id)).toEqual([queued.id]);
      expect(await store.pendingNotices({ minAgeMs: 50, limit: 10 })).toEqual([]);
      clock.advance(50);
      await store.complete(leaseOf(running!), { status: "succeeded", result: "" });
      expect((await store.pendingNotices({ minAgeMs: 0, limit: 10 })).map((j) => j.id)).toEqual([queued.id, running!.id]);
      await store.markNotified([queued.id]);
      const left = await store.pendingNotices({ minAgeMs: 0, limit: 10 });
      expect(left.map((j) => j.id)).toEqual([running!.id]);
      expect((await store.get("alice", queued.id))?.notifiedAt).toBe(clock.now());
    });

    it("purges finished jobs past retention, keeps the rest, and frees their idempotency keys and bundles", async () => {
      const { store, clock } = await setup();
      const oldCode = "export const v = 1;";
      await store.putBundle(sha256(oldCode), oldCode);
      const old = (await store.submit(jobInput("alice", { idempotencyKey: "daily", bundleHash: sha256(oldCode) }))).job;
      await store.requestCancel("alice", old.id);
      const waiting = (await store.submit(jobInput("alice"))).job;
      clock.advance(10_000);
      const recent = (await store.submit(jobInput("alice"))).job;
      await store.requestCancel("alice", recent.id);
      expect(await store.purgeFinished(5_000)).toEqual({ jobs: 1, bundles: 1 });
      expect(await store.get("alice", old.id)).toBeUndefined();
      expect(await store.get("alice", waiting.id)).toBeDefined(); // not finished: kept whatever its age
      expect(await store.get("alice", recent.id)).toBeDefined();
      expect(await store.getBundle(sha256(oldCode))).toBeUndefined();
      expect(await store.getBundle(BUNDLE_HASH)).toBe(BUNDLE_CODE); // still used by kept jobs
      expect((await store.submit(jobInput("alice", { idempotencyKey: "daily" }))).created).toBe(true);
    });

    it("pins the bundle current at submit, content-addressed", async () => {
      const { store } = await setup();
      const v1 = "export const version = 1;";
      const v2 = "export const version = 2;";
      await store.putBundle(sha256(v1), v1);
      const { job } = await store.submit(jobInput("alice", { bundleHash: sha256(v1) }));
      await store.putBundle(sha256(v2), v2); // the tool is edited after the submit
      await store.putBundle(sha256(v1), v1); // storing again is harmless
      const [claimed] = await store.claim({ owner: "w", leaseMs: 1_000, limit: 1 });
      expect(claimed?.id).toBe(job.id);
      expect(await store.getBundle(claimed!.bundleHash)).toBe(v1);
      await expect(store.putBundle(sha256(v1), v2)).rejects.toBeInstanceOf(ToolHostError);
    });

    it("reports queue status, including jobs waiting for a retry backoff", async () => {
      const { store, clock } = await setup();
      await store.submit(jobInput("a", { maxAttempts: 2, retryBackoffMs: 500 }));
      await store.submit(jobInput("b"));
      await store.submit(jobInput("c"));
      await store.claim({ owner: "w", leaseMs: 100, limit: 1 });
      clock.advance(100);
      await store.recoverExpiredLeases();
      await store.claim({ owner: "w", leaseMs: 100_000, limit: 1 });
      expect(await store.queueStatus()).toEqual({ queued: 2, runnable: 1, running: 1, nextNotBefore: clock.now() + 500 });
    });

    it("if it pushes changes, tells a subscriber of another instance about submits and cancels, once committed", async (context) => {
      const { store, open } = await setup();
      const other = await open();
      if (!store.subscribe) return context.skip(); // optional: stores without it are polled
      const events: Array<{ type: string; id?: string }> = [];
      const stop = await store.subscribe((event) => events.push(event));
      await other.submit(jobInput("alice"));
      await waitFor("a runnable event", () => events.some((e) => e.type === "runnable"));
      const [job] = await other.claim({ owner: "w2", leaseMs: 10_000, limit: 1 });
      await other.requestCancel("alice", job!.id);
      await waitFor("a cancel event", () => events.some((e) => e.type === "cancel" && e.id === job!.id));
      // A refused submit commits nothing, and tells nothing.
      const before = events.length;
      await expect(other.submit(jobInput("alice", { bundleHash: sha256("missing") }))).rejects.toMatchObject({ type: "NotFound" });
      await other.submit(jobInput("bob"));
      await waitFor("the next runnable event", () => events.length > before);
      expect(events.slice(before)).toEqual([{ type: "runnable" }]);
      await stop();
    });
  });
}
