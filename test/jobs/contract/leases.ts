import { expect, it } from "vitest";
import { leaseOf } from "../../../src/jobs/store.js";
import { jobInput } from "../helpers.js";
import type { ContractSetup } from "./setup.js";

/** The JobStore contract (../contract.ts) on leases and outcomes: renewals, completions and what they keep, cancels, expired leases (retries with backoff), progress. */
export function leaseContract(setup: ContractSetup): void {
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

  it("nul_in_job_outcome: records a result, error or progress holding U+0000 as it is, once, never retried", async () => {
    const { store, clock } = await setup();
    for (let i = 0; i < 5; i++) await store.submit(jobInput("alice", { maxAttempts: 3 }));
    const [ok, failing, partial, marked, long] = await store.claim({ owner: "w1", leaseMs: 1_000, limit: 5 });
    expect(await store.reportProgress(leaseOf(ok!), { fraction: 0.5, message: "step\u00002" })).toBe(true);
    expect((await store.get("alice", ok!.id))?.progress).toEqual({ fraction: 0.5, message: "step\u00002" });
    const error = { type: "ExecutionError" as const, fault: "tool" as const, message: "bad\u0000thing", hint: "\u0000" };
    const longResult = `\u0000${"z".repeat(5_000)}`;
    const outcomes = [
      [ok, { status: "succeeded", result: "before\u0000after" }],
      [failing, { status: "failed", error }],
      [partial, { status: "cancelled", result: "half\u0000", structured: false }],
      // A text that starts as a stored one with U+0000 would (a PostgreSQL store's mark) reads back as written too.
      [marked, { status: "succeeded", result: '\uFDD0"x"' }],
      [long, { status: "succeeded", result: longResult }],
    ] as const;
    for (const [job, outcome] of outcomes) {
      const done = await store.complete(leaseOf(job!), outcome);
      expect(done, outcome.status).toMatchObject({ status: outcome.status, attempts: 1 });
    }
    clock.advance(5_000); // past every lease: nothing is recovered, retried or interrupted
    expect(await store.recoverExpiredLeases()).toEqual({ requeued: [], ended: [] });
    for (const [job, outcome] of outcomes) {
      const stored = await store.get("alice", job!.id);
      expect(stored?.status).toBe(outcome.status);
      if ("result" in outcome) expect(stored?.result).toBe(outcome.result);
    }
    expect((await store.get("alice", failing!.id))?.error).toEqual(error);
    // Listings read the short texts whole; a long one as its first characters (SQLite's substr stops at U+0000).
    const listed = new Map((await store.list("alice")).map((job) => [job.id, job]));
    expect(listed.get(ok!.id)?.result).toBe("before\u0000after");
    expect(listed.get(marked!.id)?.result).toBe('\uFDD0"x"');
    expect(listed.get(failing!.id)?.error).toEqual(error);
    expect(longResult.startsWith(listed.get(long!.id)?.result ?? "-")).toBe(true);
    expect((await store.pendingNotices({ minAgeMs: 0, limit: 10 })).find((job) => job.id === partial!.id)?.result).toBe("half\u0000");
    await expect(store.submit(jobInput("alice", { idempotencyKey: "k\u0000" }))).rejects.toMatchObject({ type: "InvalidArguments" });
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
}
