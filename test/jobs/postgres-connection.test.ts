import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobDatabase } from "../../src/jobs/postgres-pool.js";
import { type TestDatabase, createTestDatabase } from "../helpers/postgres.js";

/**
 * The job database's connections are never without an 'error' listener. pg-pool drops its own listener
 * when it hands a client over, and the caller's follows a microtask later: a backend terminated as its
 * connection opens (ReadyForQuery and FATAL 57P01 in one read) emitted 'error' in that gap, and an event
 * without a listener ends a daemon or a job worker (seen as an uncaught error under load).
 */
let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

describe("job database connections", () => {
  it("survive an 'error' emitted between the pool's hand-over and the caller's listener, and keep serving", async () => {
    const db = new JobDatabase({ url: database.url, schema: "handover_gap" });
    await db.open();
    const pool = Reflect.get(db, "pool") as pg.Pool;
    let injected = 0;
    // 'acquire' is emitted before pg-pool removes its idle listener; this microtask runs after that and
    // before the awaiting caller resumes, which is the gap a terminated backend's event falls into.
    pool.on("acquire", (client) => {
      if (injected > 0) return;
      injected++;
      queueMicrotask(() => client.emit("error", Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" })));
    });
    const first = await db.queryOne<{ n: number }>("SELECT 1 AS n", []);
    const second = await db.queryOne<{ n: number }>("SELECT 2 AS n", []);
    expect(injected).toBe(1);
    expect([first?.n, second?.n]).toEqual([1, 2]);
    db.closed = true;
    await db.end();
  });
});
