import { statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { SCHEMA_VERSION } from "../../src/jobs/sqlite-schema.js";
import { SqliteJobStore } from "../../src/jobs/sqlite-store.js";
import { runJobStoreContract } from "./contract.js";
import { OLDER_BUILD_ARGS_BOUND, olderBuildRows } from "./older-build-rows.js";
import { jobInput, tempDir, withBundle } from "./helpers.js";
import { leaseOf } from "../../src/jobs/store.js";
import { jobOutputValue } from "../../src/jobs/view.js";

/** Takes a database back to before the notice retry columns (migration 5) and the size columns (migration 4) were added. */
const DROP_SIZES =
  "DROP INDEX jobs_notices_due; ALTER TABLE jobs DROP COLUMN notice_failures; ALTER TABLE jobs DROP COLUMN notice_retry_at; " +
  "ALTER TABLE jobs DROP COLUMN args_bytes; ALTER TABLE jobs DROP COLUMN result_bytes";

runJobStoreContract("SqliteJobStore", async (location, options) => new SqliteJobStore({ path: join(location, "jobs.db"), ...options }));

describe("SqliteJobStore specifics", () => {
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });
  function dbPath(): string {
    const dir = tempDir();
    cleanups.push(dir.cleanup);
    return join(dir.dir, "nested", "jobs.db");
  }

  it("creates its folder and a private WAL database at the current schema version", async () => {
    const path = dbPath();
    const store = new SqliteJobStore({ path });
    await withBundle(store);
    await store.submit(jobInput("alice"));
    const raw = new Database(path, { readonly: true });
    try {
      expect(raw.pragma("journal_mode", { simple: true })).toBe("wal");
      expect(raw.pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
    } finally {
      raw.close();
    }
    expect(statSync(path).mode & 0o777).toBe(0o600);
    await store.close();
  });

  it("refuses a database from a newer schema version instead of guessing", () => {
    const path = dbPath();
    void new SqliteJobStore({ path }).close();
    const raw = new Database(path);
    raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    raw.close();
    expect(() => new SqliteJobStore({ path })).toThrow(/newer than this host understands/);
  });

  it("migrates a version 1 database in place: its failed jobs read with their type's usual fault, new ones store theirs", async () => {
    const path = dbPath();
    const old = await withBundle(new SqliteJobStore({ path }));
    const { job } = await old.submit(jobInput("alice"));
    const [claimed] = await old.claim({ owner: "w1", leaseMs: 1_000, limit: 1 });
    await old.complete({ id: claimed!.id, owner: "w1", attempt: 1 }, { status: "failed", error: { type: "SandboxCrashed", fault: "host", message: "gone" } });
    await old.close();
    // What a host before faults were stored left behind: no fault or hint columns, schema version 1.
    const raw = new Database(path);
    raw.exec(
      "ALTER TABLE jobs DROP COLUMN error_fault; ALTER TABLE jobs DROP COLUMN error_hint; ALTER TABLE jobs DROP COLUMN result_structured; " + DROP_SIZES,
    );
    raw.pragma("user_version = 1");
    raw.close();
    const store = new SqliteJobStore({ path });
    expect((await store.get("alice", job.id))?.error).toEqual({ type: "SandboxCrashed", fault: "host", message: "gone" });
    const { job: next } = await store.submit(jobInput("alice"));
    const [running] = await store.claim({ owner: "w2", leaseMs: 1_000, limit: 1 });
    await store.complete(
      { id: running!.id, owner: "w2", attempt: 1 },
      { status: "failed", error: { type: "ExecutionError", fault: "host", message: "bug", hint: "report it" } },
    );
    expect((await store.get("alice", next.id))?.error).toEqual({ type: "ExecutionError", fault: "host", message: "bug", hint: "report it" });
    await store.close();
  });

  it("migrates a version 2 database in place: its results read as before the flag was kept, new ones keep it", async () => {
    const path = dbPath();
    const old = await withBundle(new SqliteJobStore({ path }));
    await old.submit(jobInput("alice"));
    await old.submit(jobInput("alice"));
    const [object, text] = await old.claim({ owner: "w1", leaseMs: 1_000, limit: 2 });
    await old.complete(leaseOf(object!), { status: "succeeded", result: '{"n":1}' });
    await old.complete(leaseOf(text!), { status: "succeeded", result: "plain words" });
    await old.close();
    // What a host before result kinds were stored left behind: no result_structured column, schema version 2.
    const raw = new Database(path);
    raw.exec(`ALTER TABLE jobs DROP COLUMN result_structured; ${DROP_SIZES}`);
    raw.pragma("user_version = 2");
    raw.close();
    const store = new SqliteJobStore({ path });
    const before = await store.get("alice", object!.id);
    expect(before).toMatchObject({ status: "succeeded", result: '{"n":1}' });
    expect(before?.resultStructured).toBeUndefined();
    // Without the flag, an object's JSON reads as the object (what the host wrote for one), other text as text.
    expect(jobOutputValue(before!)).toEqual({ n: 1 });
    expect(jobOutputValue((await store.get("alice", text!.id))!)).toBe("plain words");
    await store.submit(jobInput("alice"));
    const [running] = await store.claim({ owner: "w2", leaseMs: 1_000, limit: 1 });
    await store.complete(leaseOf(running!), { status: "succeeded", result: '{"n":2}', structured: false });
    const after = (await store.get("alice", running!.id))!;
    expect(after.resultStructured).toBe(false);
    expect(jobOutputValue(after)).toBe('{"n":2}');
    await store.close();
  });

  it("migrates a version 3 database in place: the sizes of its jobs' arguments and results are filled in for listings", async () => {
    const path = dbPath();
    const old = await withBundle(new SqliteJobStore({ path }));
    const { job } = await old.submit(jobInput("alice", { argsJson: JSON.stringify({ text: "é".repeat(5_000) }) }));
    const [claimed] = await old.claim({ owner: "w1", leaseMs: 1_000, limit: 1 });
    await old.complete(leaseOf(claimed!), { status: "succeeded", result: "ü".repeat(6_000) });
    await old.close();
    // What a host before sizes were kept left behind: no size columns, schema version 3.
    const raw = new Database(path);
    raw.exec(DROP_SIZES);
    raw.pragma("user_version = 3");
    raw.close();
    const store = new SqliteJobStore({ path });
    const [listed] = await store.list("alice");
    expect(listed?.listed).toEqual({ argsBytes: job.argsJson.length + 5_000, resultBytes: 12_000 });
    expect((await store.get("alice", job.id))?.result).toBe("ü".repeat(6_000));
    await store.close();
  });

  it("older_build_rows: a job written without its sizes is listed cut with its real sizes, and its arguments count against the bound", async () => {
    const path = dbPath();
    const store = await withBundle(new SqliteJobStore({ path, maxUnfinishedArgsBytesPerAnima: OLDER_BUILD_ARGS_BOUND }));
    await olderBuildRows(store, async () => {
      const raw = new Database(path);
      raw.exec("UPDATE jobs SET args_bytes = 0, result_bytes = NULL");
      raw.close();
    });
    await store.close();
  });

  it("rejects calls after close", async () => {
    const store = new SqliteJobStore({ path: dbPath() });
    await store.close();
    await expect(store.submit(jobInput("alice"))).rejects.toThrow(/closed/);
    await expect(store.get("alice", "000000000000")).rejects.toThrow(/closed/);
  });

  it("commits a burst of submits as one group, each durable when its promise resolves", async () => {
    const path = dbPath();
    const store = await withBundle(new SqliteJobStore({ path }));
    const results = await Promise.all(Array.from({ length: 500 }, () => store.submit(jobInput("alice"))));
    // A second connection sees every job the moment the promises resolved: committed, not buffered.
    const raw = new Database(path, { readonly: true });
    try {
      expect((raw.prepare("SELECT COUNT(*) AS n FROM jobs").get() as { n: number }).n).toBe(500);
    } finally {
      raw.close();
    }
    expect(new Set(results.map((r) => r.job.id)).size).toBe(500);
    await store.close();
  });

  it("rolls back only the failing write of a group", async () => {
    const store = await withBundle(new SqliteJobStore({ path: dbPath() }));
    const [good, bad, good2] = await Promise.allSettled([
      store.submit(jobInput("alice")),
      store.submit(jobInput("alice", { bundleHash: "f".repeat(64) })),
      store.submit(jobInput("alice")),
    ]);
    expect(good.status).toBe("fulfilled");
    expect(bad.status).toBe("rejected");
    expect(good2.status).toBe("fulfilled");
    expect(await store.list("alice")).toHaveLength(2);
    await store.close();
  });
});
