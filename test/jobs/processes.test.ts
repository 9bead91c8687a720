import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { noticePath } from "../../src/jobs/notices.js";
import { SqliteJobStore } from "../../src/jobs/sqlite-store.js";
import type { Job } from "../../src/jobs/store.js";
import { jobInput, tempDir, waitFor, withBundle } from "./helpers.js";
import { buildWorker, exited, spawnWorker } from "./worker-process.js";

// Several OS processes on one database file: the situation BEGIN IMMEDIATE and leases exist for.
describe("job store shared by worker processes", () => {
  const dir = tempDir("awt-jobs-proc-");
  let script: string;

  beforeAll(async () => {
    script = await buildWorker(dir.dir);
  });
  afterAll(() => dir.cleanup());

  it("never hands one job to two processes claiming at the same time", async () => {
    const db = join(dir.dir, "race.db");
    const store = await withBundle(new SqliteJobStore({ path: db }));
    const total = 1_500;
    await Promise.all(Array.from({ length: total }, (_, i) => store.submit(jobInput(`anima${i % 5}`))));
    const go = join(dir.dir, "go");
    const children = ["p1", "p2", "p3"].map((tag) => spawnWorker(script, { mode: "claim", db, tag, go }));
    const outputs = children.map(() => "");
    children.forEach((child, i) => child.stdout!.on("data", (d: Buffer) => (outputs[i] += d.toString())));
    const results = children.map((child) => exited(child, 30_000));
    await waitFor("all claimers ready", () => outputs.every((out) => out.startsWith("ready\n")), 15_000);
    writeFileSync(go, "");
    for (const r of await Promise.all(results)) expect(r.code, r.stderr).toBe(0);
    const claimed = outputs.map((out) => JSON.parse(out.split("\n")[1]!) as string[]);
    const all = claimed.flat();
    expect(new Set(all).size).toBe(all.length);
    expect(all).toHaveLength(total);
    // The race really happened: more than one process won jobs.
    expect(claimed.filter((ids) => ids.length > 0).length).toBeGreaterThan(1);
    await store.close();
  });

  it("loses no job and runs none twice beyond its retry policy when workers are SIGKILLed at random", async () => {
    const seed = Date.now() % 100_000;
    const random = mulberry32(seed);
    const db = join(dir.dir, "crash.db");
    const log = join(dir.dir, "executions.log");
    const dataDir = join(dir.dir, "data");
    writeFileSync(log, "");
    const store = await withBundle(new SqliteJobStore({ path: db }));
    const submitted = await Promise.all(
      Array.from({ length: 80 }, (_, i) =>
        store.submit(jobInput(`anima${i % 4}`, { maxAttempts: i % 2 === 0 ? 1 : 3, retryBackoffMs: 10, timeoutMs: 10_000 })),
      ),
    );
    const lines = () => readFileSync(log, "utf8").split("\n").filter(Boolean);
    const settled = async () => {
      const s = await store.queueStatus();
      return s.queued === 0 && s.running === 0;
    };
    const common = { db, log, dataDir, leaseMs: 400, concurrency: 3, maxWorkMs: 60 };
    for (let round = 0; round < 5 && !(await settled()); round++) {
      const workers = [0, 1].map((n) => spawnWorker(script, { ...common, mode: "run", tag: `r${round}w${n}` }));
      const exits = workers.map((w) => exited(w, 30_000));
      for (const worker of workers) {
        // Kill at a random moment: after a random number of further job starts/ends (bounded wait).
        const target = lines().length + 2 + Math.floor(random() * 12);
        await waitFor("job activity", async () => lines().length >= target || (await settled()), 15_000);
        worker.kill("SIGKILL");
      }
      for (const e of exits) expect((await e).code).toBe(null); // killed, not exited on its own
    }
    const drain = await exited(spawnWorker(script, { ...common, mode: "drain", tag: "drainer" }), 30_000);
    expect(drain.code, drain.stderr).toBe(0);

    const starts = new Map<string, number>();
    const ends = new Set<string>();
    for (const line of lines()) {
      const [kind, id, , attempt] = line.split(" ");
      if (kind === "start") starts.set(id!, (starts.get(id!) ?? 0) + 1);
      else ends.add(`${id}#${attempt}`);
    }
    const final: Job[] = [];
    for (const { job } of submitted) final.push((await store.get(job.anima, job.id))!);
    const context = `seed ${seed}`;
    for (const job of final) {
      const ran = starts.get(job.id) ?? 0;
      expect(["succeeded", "interrupted"], `${context}: ${job.id} is ${job.status}`).toContain(job.status);
      expect(ran, `${context}: ${job.id} ran ${ran}× with ${job.attempts} attempts`).toBeLessThanOrEqual(job.attempts);
      expect(job.attempts).toBeLessThanOrEqual(job.maxAttempts);
      if (job.status === "succeeded") expect(ends.has(`${job.id}#${job.attempts}`), context).toBe(true);
      if (job.status === "interrupted") expect(job.attempts, context).toBe(job.maxAttempts);
      // Every finished job's notice was delivered, even when its worker died right after finishing it.
      const notice = noticePath(join(dataDir, "animas", job.anima), job.id);
      expect(existsSync(notice), `${context}: notice of ${job.id}`).toBe(true);
      expect(readFileSync(notice, "utf8")).toContain(job.status === "succeeded" ? "- Status: completed" : "- Status: interrupted");
    }
    // The kills really hit running jobs (otherwise this test proved nothing).
    expect(
      final.some((j) => j.attempts > 1 || j.status === "interrupted"),
      context,
    ).toBe(true);
    await store.close();
  }, 60_000);
});

/** Small seeded PRNG so a failing run can be replayed from the seed in its message. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
