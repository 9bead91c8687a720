import { randomBytes } from "node:crypto";
import pg from "pg";

/**
 * A throwaway PostgreSQL database for one test file, on the server the machine runs (CI and development
 * machines run PostgreSQL on 127.0.0.1:5432 with trust authentication; `.ci/run` starts it if it is down).
 * `$ANIMAWORKS_TEST_PG_URL` names another server's maintenance database.
 */
const ADMIN_URL = process.env["ANIMAWORKS_TEST_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres";

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * `settings`: the database's own defaults for its sessions (ALTER DATABASE … SET), as an operator may set
 * them, e.g. `{ default_transaction_isolation: "repeatable read" }`. Names and values are the test's own.
 */
export async function createTestDatabase(settings: Record<string, string> = {}): Promise<TestDatabase> {
  const name = `awt_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
    for (const [setting, value] of Object.entries(settings)) await admin.query(`ALTER DATABASE ${name} SET ${setting} = '${value}'`);
  } finally {
    await admin.end();
  }
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: ADMIN_URL });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
