import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresJobStore } from "../../src/jobs/postgres-store.js";
import { type TestDatabase, createTestDatabase } from "../helpers/postgres.js";
import { jobInput, withBundle } from "./helpers.js";

/**
 * The store's bounds and claims rest on READ COMMITTED (postgres-pool.ts): they must hold on a server,
 * database or role whose default isolation is stricter. Each level gets a database whose sessions
 * default to it, as an operator's ALTER DATABASE … SET would make them.
 */
describe.each(["repeatable read", "serializable"])("PostgresJobStore on a database whose default isolation is %s", (isolation) => {
  let database: TestDatabase;
  const stores: PostgresJobStore[] = [];
  beforeAll(async () => {
    database = await createTestDatabase({ default_transaction_isolation: isolation });
  });
  afterAll(async () => {
    for (const store of stores.splice(0)) await store.close();
    await database?.drop();
  });

  /** Four stores on one schema, as four processes or machines; the first holds the bundle. */
  async function instances(schema: string, options: { maxUnfinishedJobsPerAnima?: number } = {}): Promise<PostgresJobStore[]> {
    const opened = Array.from({ length: 4 }, () => new PostgresJobStore({ url: database.url, schema, ...options }));
    stores.push(...opened);
    for (const store of opened) await store.open();
    await withBundle(opened[0]!);
    return opened;
  }

  it("(set-up) a plain connection to the database gets its default isolation", async () => {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      expect((await client.query<{ level: string }>("SELECT current_setting('transaction_isolation') AS level")).rows[0]?.level).toBe(isolation);
    } finally {
      await client.end();
    }
  });

  it("racing submits from four instances stay within the per-Anima bound; the others are refused as Busy", async () => {
    const opened = await instances("isolation_submits", { maxUnfinishedJobsPerAnima: 3 });
    const racing = await Promise.allSettled(Array.from({ length: 40 }, (_, i) => opened[i % 4]!.submit(jobInput("alice"))));
    expect(racing.filter((r) => r.status === "fulfilled")).toHaveLength(3);
    for (const refused of racing.filter((r) => r.status === "rejected")) expect(refused.reason).toMatchObject({ type: "Busy" });
    expect(await opened[0]!.list("alice", { status: ["queued"] })).toHaveLength(3);
  });

  it("racing claims from four instances all succeed, and hand out each job once", async () => {
    const opened = await instances("isolation_claims");
    for (let i = 0; i < 40; i++) await opened[0]!.submit(jobInput(`a${i % 8}`));
    const racing = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => opened[i % 4]!.claim({ owner: `w${i}`, leaseMs: 60_000, limit: 2 })));
    expect(racing.filter((r) => r.status === "rejected").map((r) => String(r.reason))).toEqual([]);
    const ids = racing.flatMap((r) => (r.status === "fulfilled" ? r.value.map((job) => job.id) : []));
    expect(ids).toHaveLength(40);
    expect(new Set(ids).size).toBe(40);
  });
});
