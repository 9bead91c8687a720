import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresJobStore, describeServer } from "../../src/jobs/postgres-store.js";
import { type TestDatabase, createTestDatabase } from "../helpers/postgres.js";
import { runJobStoreContract } from "./contract.js";

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

/** Each location the suite hands out is its own PostgreSQL schema: two stores on one location share it. */
const schemaOf = (location: string) => `s_${createHash("sha256").update(location).digest("hex").slice(0, 16)}`;

runJobStoreContract("PostgresJobStore", async (location, { now }) => {
  const store = new PostgresJobStore({ url: database.url, schema: schemaOf(location), now });
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

  it("refuses a schema name that is not a plain identifier", () => {
    expect(() => new PostgresJobStore({ url: database.url, schema: "x; DROP TABLE jobs" })).toThrow(/lower-case letters/);
  });
});
