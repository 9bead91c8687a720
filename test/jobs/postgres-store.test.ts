import { createHash } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresJobStore, describeServer } from "../../src/jobs/postgres-store.js";
import { type TestDatabase, createTestDatabase } from "../helpers/postgres.js";
import { leaseOf } from "../../src/jobs/store.js";
import { jobOutputValue } from "../../src/jobs/view.js";
import { runJobStoreContract } from "./contract.js";
import { OLDER_BUILD_ARGS_BOUND, olderBuildRows } from "./older-build-rows.js";
import { jobInput, withBundle } from "./helpers.js";

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

/** Takes a schema back to before the notice retry columns (migration 7) and the size columns (migration 5) were added. */
const DROP_SIZES = "DROP COLUMN notice_failures, DROP COLUMN notice_retry_at, DROP COLUMN args_bytes, DROP COLUMN result_bytes";

/** Each location the suite hands out is its own PostgreSQL schema: two stores on one location share it. */
const schemaOf = (location: string) => `s_${createHash("sha256").update(location).digest("hex").slice(0, 16)}`;

runJobStoreContract("PostgresJobStore", async (location, options) => {
  const store = new PostgresJobStore({ url: database.url, schema: schemaOf(location), ...options });
  await store.open();
  return store;
});

describe("PostgresJobStore specifics", () => {
  it("creates its schema once when several stores start at once against an empty database", async () => {
    const stores = Array.from({ length: 4 }, () => new PostgresJobStore({ url: database.url, schema: "racing_start" }));
    await Promise.all(stores.map((store) => store.open()));
    expect((await stores[0]!.queueStatus()).queued).toBe(0);
    await Promise.all(stores.map((store) => store.close()));
  });

  it("says which server it cannot reach, without the password", async () => {
    const store = new PostgresJobStore({ url: "postgres://eve:hunter2@127.0.0.1:1/jobs", connectTimeoutMs: 2_000 });
    const failure = await store.open().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ type: "ExecutionError", message: expect.stringContaining("postgres://eve@127.0.0.1:1/jobs") });
    expect(JSON.stringify(failure)).not.toContain("hunter2");
    expect(String((failure as Error).message)).not.toContain("hunter2");
    await store.close();
    expect(describeServer("not a url")).toMatch(/does not parse/);
  });

  it("migrates a version 2 schema in place: failed jobs read with their type's usual fault, claims and new errors work", async () => {
    const schema = "migrates_v2";
    const old = new PostgresJobStore({ url: database.url, schema });
    await old.open();
    await withBundle(old);
    const { job } = await old.submit(jobInput("alice"));
    const [claimed] = await old.claim({ owner: "w1", leaseMs: 60_000, limit: 1 });
    await old.complete(leaseOf(claimed!), { status: "failed", error: { type: "Timeout", fault: "tool", message: "slow" } });
    await old.close();
    // What a host before faults were stored left behind: no fault or hint columns, schema version 2.
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    await admin.query(
      `ALTER TABLE ${schema}.jobs DROP COLUMN error_fault, DROP COLUMN error_hint, DROP COLUMN result_structured, ${DROP_SIZES}; UPDATE ${schema}.schema_version SET version = 2`,
    );
    await admin.end();
    const store = new PostgresJobStore({ url: database.url, schema });
    await store.open();
    expect((await store.get("alice", job.id))?.error).toEqual({ type: "Timeout", fault: "tool", message: "slow" });
    const { job: next } = await store.submit(jobInput("alice"));
    const [running] = await store.claim({ owner: "w2", leaseMs: 60_000, limit: 1 });
    expect(running?.id).toBe(next.id);
    await store.complete(leaseOf(running!), { status: "failed", error: { type: "ExecutionError", fault: "host", message: "bug", hint: "report it" } });
    expect((await store.get("alice", next.id))?.error).toEqual({ type: "ExecutionError", fault: "host", message: "bug", hint: "report it" });
    await store.close();
  });

  it("migrates a version 3 schema in place: results read as before the flag was kept, claims and new results work", async () => {
    const schema = "migrates_v3";
    const old = new PostgresJobStore({ url: database.url, schema });
    await old.open();
    await withBundle(old);
    const { job } = await old.submit(jobInput("alice"));
    const [claimed] = await old.claim({ owner: "w1", leaseMs: 60_000, limit: 1 });
    await old.complete(leaseOf(claimed!), { status: "succeeded", result: '{"n":1}' });
    await old.close();
    // What a host before result kinds were stored left behind: claim_jobs as migration 3 made it, no column.
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    await admin.query(`ALTER TABLE ${schema}.jobs DROP COLUMN result_structured, ${DROP_SIZES}; UPDATE ${schema}.schema_version SET version = 3`);
    await admin.end();
    const store = new PostgresJobStore({ url: database.url, schema });
    await store.open();
    const before = (await store.get("alice", job.id))!;
    expect(before.resultStructured).toBeUndefined();
    expect(jobOutputValue(before)).toEqual({ n: 1 });
    const { job: next } = await store.submit(jobInput("alice"));
    const [running] = await store.claim({ owner: "w2", leaseMs: 60_000, limit: 1 });
    expect(running?.id).toBe(next.id);
    await store.complete(leaseOf(running!), { status: "succeeded", result: '{"n":2}', structured: true });
    expect(await store.get("alice", next.id)).toMatchObject({ result: '{"n":2}', resultStructured: true });
    await store.close();
  });

  it("migrates a version 4 schema in place: the sizes of its jobs' arguments and results are filled in for listings", async () => {
    const schema = "migrates_v4";
    const old = new PostgresJobStore({ url: database.url, schema });
    await old.open();
    await withBundle(old);
    const { job } = await old.submit(jobInput("alice", { argsJson: JSON.stringify({ text: "é".repeat(5_000) }) }));
    const [claimed] = await old.claim({ owner: "w1", leaseMs: 60_000, limit: 1 });
    await old.complete(leaseOf(claimed!), { status: "succeeded", result: "ü".repeat(6_000) });
    await old.close();
    // What a host before sizes were kept left behind: no size columns, schema version 4.
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    await admin.query(`ALTER TABLE ${schema}.jobs ${DROP_SIZES}; UPDATE ${schema}.schema_version SET version = 4`);
    await admin.end();
    const store = new PostgresJobStore({ url: database.url, schema });
    await store.open();
    const [listed] = await store.list("alice");
    expect(listed?.listed).toEqual({ argsBytes: job.argsJson.length + 5_000, resultBytes: 12_000 });
    expect((await store.get("alice", job.id))?.result).toBe("ü".repeat(6_000));
    const { job: next } = await store.submit(jobInput("alice"));
    expect((await store.claim({ owner: "w2", leaseMs: 60_000, limit: 1 }))[0]?.id).toBe(next.id);
    await store.close();
  });

  it("older_build_rows: a job written without its sizes is listed as cut with its real sizes, and its arguments count against the bound", async () => {
    const schema = "older_build_rows";
    const store = new PostgresJobStore({ url: database.url, schema, maxUnfinishedArgsBytesPerAnima: OLDER_BUILD_ARGS_BOUND });
    await withBundle(store);
    await olderBuildRows(store, async () => {
      const admin = new pg.Client({ connectionString: database.url });
      await admin.connect();
      await admin.query(`UPDATE ${schema}.jobs SET args_bytes = 0, result_bytes = NULL`);
      await admin.end();
    });
    await store.close();
  });

  it("refuses a schema name that is not a plain identifier", () => {
    expect(() => new PostgresJobStore({ url: database.url, schema: "x; DROP TABLE jobs" })).toThrow(/lower-case letters/);
  });
});
