import { expect, it } from "vitest";
import { MAX_JOB_ARGS_BYTES, MAX_LISTED_JOBS } from "../../../src/jobs/limits.js";
import { leaseOf } from "../../../src/jobs/store.js";
import { BUNDLE_CODE, BUNDLE_HASH, jobInput, sha256 } from "../helpers.js";
import type { ContractSetup } from "./setup.js";

/** The JobStore contract (../contract.ts) on submitting and reading: defaults, refusals, durability, idempotency keys, each Anima's own jobs, listings. */
export function submitContract(setup: ContractSetup): void {
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
      // Past a 32-bit integer, which PostgreSQL keeps them as: refused by both stores alike.
      jobInput("alice", { priority: 2_147_483_648 }),
      jobInput("alice", { maxAttempts: 3_000_000_000 }),
    ];
    for (const input of bad) {
      await expect(store.submit(input)).rejects.toMatchObject({ type: "InvalidArguments" });
    }
    await expect(store.submit(jobInput("alice", { bundleHash: sha256("other") }))).rejects.toMatchObject({ type: "NotFound" });
    expect(await store.list("alice")).toEqual([]);
  });

  it("job_args_over_limit: refuses arguments over MAX_JOB_ARGS_BYTES (1 MiB) as the caller's InvalidArguments, storing nothing", async () => {
    const { store } = await setup();
    // {"blob":"…"} is 11 bytes besides the blob: this one is exactly at the limit, in UTF-8 bytes (é is 2).
    const atLimit = JSON.stringify({ blob: "é".repeat((MAX_JOB_ARGS_BYTES - 12) / 2) + "x" });
    expect(Buffer.byteLength(atLimit)).toBe(MAX_JOB_ARGS_BYTES);
    const accepted = await store.submit(jobInput("alice", { argsJson: atLimit }));
    expect((await store.get("alice", accepted.job.id))?.argsJson).toBe(atLimit);
    const over = await store.submit(jobInput("alice", { argsJson: atLimit.replace('x"}', 'xx"}') })).catch((error: unknown) => error);
    expect(over).toMatchObject({ type: "InvalidArguments", fault: "caller", message: expect.stringContaining("1,048,576-byte (1 MiB) limit") });
    expect((over as { hint?: string }).hint).toMatch(/file the tool reads/);
    expect((await store.list("alice")).map((j) => j.id)).toEqual([accepted.job.id]);
  });

  it("list_limit_ceiling: lists at most MAX_LISTED_JOBS at once; a larger limit is InvalidArguments", async () => {
    const { store } = await setup();
    await store.submit(jobInput("alice"));
    expect(await store.list("alice", { limit: MAX_LISTED_JOBS })).toHaveLength(1);
    for (const limit of [MAX_LISTED_JOBS + 1, 0, 2.5]) {
      await expect(store.list("alice", { limit })).rejects.toMatchObject({ type: "InvalidArguments", message: expect.stringContaining("1 to 1,000") });
    }
  });

  it("unfinished_jobs_per_anima: an Anima's queued and running jobs are bounded in number, refused as Busy (the caller's); others are not held back", async () => {
    const { store } = await setup({ maxUnfinishedJobsPerAnima: 3 });
    const first = (await store.submit(jobInput("alice", { idempotencyKey: "k" }))).job;
    await store.submit(jobInput("alice"));
    const third = (await store.submit(jobInput("alice"))).job;
    const full = await store.submit(jobInput("alice")).catch((error: unknown) => error);
    expect(full).toMatchObject({ type: "Busy", fault: "caller", message: expect.stringContaining('Anima "alice" has 3 jobs queued or running') });
    expect((full as { hint?: string }).hint).toMatch(/cancel queued ones/);
    // The same work under its key is no new job: still answered.
    expect(await store.submit(jobInput("alice", { idempotencyKey: "k" }))).toMatchObject({ created: false, job: { id: first.id } });
    expect((await store.submit(jobInput("bob"))).created).toBe(true);
    // A running job still counts; a finished or cancelled one makes room.
    const [running] = await store.claim({ owner: "w", leaseMs: 10_000, limit: 1 });
    expect(running?.anima).toBe("alice");
    await expect(store.submit(jobInput("alice"))).rejects.toMatchObject({ type: "Busy" });
    await store.complete(leaseOf(running!), { status: "succeeded", result: "" });
    const fourth = (await store.submit(jobInput("alice"))).job;
    await expect(store.submit(jobInput("alice"))).rejects.toMatchObject({ type: "Busy" });
    await store.requestCancel("alice", third.id);
    await store.submit(jobInput("alice"));
    expect((await store.list("alice", { status: ["queued", "running"] })).map((j) => j.id)).toHaveLength(3);
    expect((await store.list("alice")).map((j) => j.id)).toContain(fourth.id);
  });

  it("unfinished_args_bytes_per_anima: the arguments an Anima's unfinished jobs hold together are bounded, also for submits at once", async () => {
    const { store } = await setup({ maxUnfinishedArgsBytesPerAnima: 1_000 });
    const args = (bytes: number) => JSON.stringify({ t: "x".repeat(bytes - 8) }); // {"t":"…"} is 8 bytes besides
    await store.submit(jobInput("carol", { argsJson: args(600) }));
    const over = await store.submit(jobInput("carol", { argsJson: args(401) })).catch((error: unknown) => error);
    expect(over).toMatchObject({ type: "Busy", fault: "caller", message: expect.stringContaining("hold 600 bytes of arguments, and this job's 401") });
    await store.submit(jobInput("carol", { argsJson: args(400) })); // exactly at the bound
    expect((await store.submit(jobInput("dave", { argsJson: args(900) }))).created).toBe(true);
    // Concurrent submits, through four instances (as four processes or machines), cannot pass the bound
    // together: 40 × 300 bytes, room for 3.
    const { store: other, open } = await setup({ maxUnfinishedArgsBytesPerAnima: 1_000 });
    const instances = [other, await open(), await open(), await open()];
    const racing = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) => instances[i % instances.length]!.submit(jobInput("erin", { argsJson: args(300) }))),
    );
    expect(racing.filter((r) => r.status === "fulfilled")).toHaveLength(3);
    for (const refused of racing.filter((r) => r.status === "rejected")) expect(refused.reason).toMatchObject({ type: "Busy" });
    expect(await other.list("erin")).toHaveLength(3);
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

  it("idempotent_resubmit_at_bound: racing submits under one key, of an Anima with room for one job, are all answered with that job", async () => {
    const { store, open } = await setup({ maxUnfinishedJobsPerAnima: 1 });
    const other = await open();
    // Several rounds, each a fresh Anima: one round may happen not to interleave.
    for (let round = 0; round < 10; round++) {
      const input = jobInput(`alice${round}`, { idempotencyKey: "same" });
      const [a, b] = await Promise.all([store.submit(input), other.submit(input)]);
      expect(a.job.id).toBe(b.job.id);
      expect([a.created, b.created].sort()).toEqual([false, true]);
    }
  });

  it("scopes every read and cancel to the owning Anima", async () => {
    const { store } = await setup();
    const { job } = await store.submit(jobInput("alice"));
    await store.submit(jobInput("bob"));
    expect(await store.get("bob", job.id)).toBeUndefined();
    expect(await store.requestCancel("bob", job.id)).toBeUndefined();
    expect((await store.get("alice", job.id))?.status).toBe("queued");
    expect((await store.list("bob")).map((j) => j.anima)).toEqual(["bob"]);
    // A name or id holding U+0000 (an MCP job_status argument may) names no job, in both stores alike.
    expect(await store.get("alice", `${job.id}\u0000`)).toBeUndefined();
    expect(await store.get("al\u0000ice", job.id)).toBeUndefined();
    expect(await store.list("al\u0000ice")).toEqual([]);
    expect(await store.requestCancel("alice", `\u0000${job.id}`)).toBeUndefined();
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
}
