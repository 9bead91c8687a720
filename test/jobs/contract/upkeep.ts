import { expect, it } from "vitest";
import { ToolHostError } from "../../../src/errors.js";
import { LISTED_TEXT_CHARS } from "../../../src/jobs/limits.js";
import { NOTICE_RETRY, leaseOf } from "../../../src/jobs/store.js";
import { BUNDLE_CODE, BUNDLE_HASH, jobInput, sha256, waitFor } from "../helpers.js";
import type { ContractSetup } from "./setup.js";

/** The JobStore contract (../contract.ts) on upkeep: notices of finished jobs, purges past retention, pinned bundles, the queue's status, change events. */
export function upkeepContract(setup: ContractSetup): void {
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

  it("notice_starvation_by_one_anima: postpones notices that could not be written, with a doubling backoff, behind those due", async () => {
    const { store, clock } = await setup();
    const ids: string[] = [];
    for (const anima of ["alice", "alice", "bob"]) {
      const { job } = await store.submit(jobInput(anima));
      await store.requestCancel(anima, job.id);
      ids.push(job.id);
      clock.advance(1);
    }
    const [a1, a2, b] = ids;
    const pending = async () => (await store.pendingNotices({ minAgeMs: 0, limit: 10 })).map((j) => j.id);
    expect(await pending()).toEqual([a1, a2, b]);
    await store.postponeNotices([a1!, a2!]);
    expect(await pending()).toEqual([b]); // no longer first in line
    // notice_left_behind: a worker about to leave reads the postponed ones too, after those due.
    expect((await store.pendingNotices({ minAgeMs: 0, limit: 10, includePostponed: true })).map((j) => j.id)).toEqual([b, a1, a2]);
    clock.advance(NOTICE_RETRY.firstMs - 1);
    expect(await pending()).toEqual([b]);
    clock.advance(1);
    expect(await pending()).toEqual([b, a1, a2]); // due again, after those never postponed
    await store.postponeNotices([a1!]); // a second failure: twice as long
    clock.advance(2 * NOTICE_RETRY.firstMs - 1);
    expect(await pending()).toEqual([b, a2]);
    clock.advance(1);
    expect(await pending()).toEqual([b, a2, a1]);
    for (let i = 0; i < 40; i++) await store.postponeNotices([a2!]); // never longer than maxMs
    clock.advance(NOTICE_RETRY.maxMs);
    expect(await pending()).toContain(a2);
    await store.markNotified([a1!, a2!, b!]);
    await store.postponeNotices([a1!]); // a written notice stays written
    expect(await pending()).toEqual([]);
    expect((await store.get("alice", a1!))?.notifiedAt).toBeDefined();
  });

  it("listed_texts_cut: list and pendingNotices read long texts cut to LISTED_TEXT_CHARS, with their whole sizes; get reads them whole", async () => {
    const { store } = await setup();
    const n = LISTED_TEXT_CHARS;
    const argsJson = JSON.stringify({ blob: "é".repeat(3 * n) });
    const longResult = `${"ü".repeat(n)}${"r".repeat(2 * n)}`;
    const message = "m".repeat(2 * n);
    await store.submit(jobInput("alice", { argsJson }));
    await store.submit(jobInput("alice"));
    await store.submit(jobInput("alice", { argsJson }));
    const [big, small, failing] = await store.claim({ owner: "w", leaseMs: 10_000, limit: 3 });
    await store.reportProgress(leaseOf(failing!), { fraction: 0.5, message: "p".repeat(900) });
    await store.complete(leaseOf(big!), { status: "succeeded", result: longResult, structured: false });
    await store.complete(leaseOf(small!), { status: "succeeded", result: '{"n":1}', structured: true });
    await store.complete(leaseOf(failing!), { status: "failed", error: { type: "ExecutionError", fault: "tool", message, hint: message } });
    const argsBytes = Buffer.byteLength(argsJson);
    const listed = new Map((await store.list("alice")).map((job) => [job.id, job]));
    const pending = new Map((await store.pendingNotices({ minAgeMs: 0, limit: 10 })).map((job) => [job.id, job]));
    expect(pending.size).toBe(3);
    for (const jobs of [listed, pending]) {
      expect(jobs.get(big!.id)).toMatchObject({
        argsJson: argsJson.slice(0, n),
        result: "ü".repeat(n),
        listed: { argsBytes, resultBytes: Buffer.byteLength(longResult) },
      });
      expect(jobs.get(small!.id)).toMatchObject({ argsJson: small!.argsJson, result: '{"n":1}', resultStructured: true, listed: { resultBytes: 7 } });
      expect(jobs.get(failing!.id)?.error).toEqual({ type: "ExecutionError", fault: "tool", message: message.slice(0, n), hint: message.slice(0, n) });
      expect(jobs.get(failing!.id)?.listed).toEqual({ argsBytes });
    }
    expect(await store.get("alice", big!.id)).toMatchObject({ argsJson, result: longResult });
    expect((await store.get("alice", failing!.id))?.error?.message).toBe(message);
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
}
