import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteJobStore } from "../../src/jobs/sqlite-store.js";
import { jobInput, tempDir, withBundle } from "./helpers.js";
import { buildWorker, exited, spawnWorker } from "./worker-process.js";

/**
 * Claims over hand-edited rows (red team, round 2). The tables are not STRICT, so a queued row can hold
 * values of types no submit writes. Such a row must never stall the claim (which holds the database's
 * write lock for every Anima) nor stay queued forever: it ends failed with a LoadError naming the job and
 * the column, and other Animas' jobs are claimed and run. The claims run in a child process so that a
 * claim that loops is killed after a bounded wait instead of hanging the suite.
 */
describe("claims over hand-edited job rows", () => {
  const dir = tempDir("awt-jobs-badrow-");
  let script: string;

  beforeAll(async () => {
    script = await buildWorker(dir.dir);
  });
  afterAll(() => dir.cleanup());

  /** Submits one job for `example` (then hand-edited by `edit`) and one for `other`, drains them in a child worker. */
  async function drainAfterEdit(name: string, edit: string): Promise<{ bad: string; good: string; log: string; db: string }> {
    const db = join(dir.dir, `${name}.db`);
    const log = join(dir.dir, `${name}.log`);
    const store = await withBundle(new SqliteJobStore({ path: db }));
    const bad = (await store.submit(jobInput("example"))).job.id;
    const good = (await store.submit(jobInput("other"))).job.id;
    await store.close();
    const raw = new Database(db);
    raw.prepare(`UPDATE jobs SET ${edit} WHERE id = ?`).run(bad);
    raw.close();
    const dataDir = join(dir.dir, `${name}-data`);
    const drain = await exited(spawnWorker(script, { mode: "drain", db, log, dataDir, tag: name, leaseMs: 2_000 }), 15_000);
    expect(drain.code, drain.stderr).toBe(0);
    return { bad, good, log: existsSync(log) ? readFileSync(log, "utf8") : "", db };
  }

  function row(db: string, id: string): Record<string, unknown> {
    const raw = new Database(db, { readonly: true });
    try {
      return raw.prepare("SELECT status, error_type, error_fault, error_message, notified_at FROM jobs WHERE id = ?").get(id) as Record<string, unknown>;
    } finally {
      raw.close();
    }
  }

  it("blob_anima: a queued job whose anima is a BLOB is failed, and another Anima's job still runs", async () => {
    const { bad, good, log, db } = await drainAfterEdit("blob_anima", "anima = X'6578616d706c65'");
    expect(log).toContain(`end ${good} `);
    expect(log).not.toContain(bad);
    const failed = row(db, bad);
    expect(failed).toMatchObject({ status: "failed", error_type: "LoadError", error_fault: "host" });
    expect(failed.error_message).toBe(`job ${bad} cannot run: its anima column holds a blob value where the job store writes text`);
    // No Anima to tell: marked notified, so notice delivery never meets a non-text Anima.
    expect(failed.notified_at).not.toBeNull();
    const store = new SqliteJobStore({ path: db, busyTimeoutMs: 1_000 });
    expect((await store.list("other")).map((j) => j.status)).toEqual(["succeeded"]);
    await store.close();
  });

  it("text_not_before: a queued job whose not_before is text is failed, not left queued forever", async () => {
    const { bad, good, log, db } = await drainAfterEdit("text_not_before", "not_before = 'later'");
    expect(log).toContain(`end ${good} `);
    const store = new SqliteJobStore({ path: db });
    const job = await store.get("example", bad);
    expect(job).toMatchObject({ status: "failed", error: { type: "LoadError", fault: "host" } });
    expect(job!.error!.message).toBe(`job ${bad} cannot run: its not_before column holds a text value where the job store writes integer`);
    expect(job!.notBefore).toBeUndefined();
    expect(await store.queueStatus()).toEqual({ queued: 0, runnable: 0, running: 0 });
    await store.close();
  });

  it("text_timeout_ms: a queued job whose timeout_ms is text is failed before it runs", async () => {
    const { bad, good, log, db } = await drainAfterEdit("text_timeout_ms", "timeout_ms = 'soon'");
    expect(log).toContain(`end ${good} `);
    expect(log).not.toContain(bad);
    const store = new SqliteJobStore({ path: db });
    const job = await store.get("example", bad);
    expect(job).toMatchObject({ status: "failed", error: { type: "LoadError", fault: "host" } });
    expect(job!.error!.message).toContain("its timeout_ms column holds a text value");
    await store.close();
  });

  it("malformed_rows_in_one_claim: every malformed head is failed in the same claim, the usable job is claimed", async () => {
    const db = join(dir.dir, "many.db");
    const store = await withBundle(new SqliteJobStore({ path: db }));
    const bad = [];
    for (let i = 0; i < 3; i++) bad.push((await store.submit(jobInput("example", { priority: 5 }))).job.id);
    const good = (await store.submit(jobInput("example"))).job.id;
    const raw = new Database(db);
    raw.prepare("UPDATE jobs SET args_json = X'00FF' WHERE id = ?").run(bad[0]);
    raw.prepare("UPDATE jobs SET priority = 'high' WHERE id = ?").run(bad[1]);
    raw.prepare("UPDATE jobs SET max_attempts = 'many', attempts = 'x' WHERE id = ?").run(bad[2]);
    raw.close();
    const claimed = await store.claim({ owner: "w", leaseMs: 1_000, limit: 5 });
    expect(claimed.map((j) => j.id)).toEqual([good]);
    for (const id of bad) expect((await store.get("example", id))?.status).toBe("failed");
    await store.close();
  });
});
