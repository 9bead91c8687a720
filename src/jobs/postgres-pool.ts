import pg from "pg";
import { ToolHostError } from "../errors.js";
import { migratePostgres } from "./postgres-schema.js";
import { ListenedClient, withPooledClient } from "./postgres-connection.js";
import type { JobRow } from "./sqlite-schema.js";

export interface JobDatabaseOptions {
  url: string;
  /** The PostgreSQL schema of the store's tables (checked by the caller), set as every connection's search_path. */
  schema: string;
  /** Connections opened at most. Default: 4. */
  maxConnections?: number;
  /** Longest wait for a connection, ms. Default: 5,000. */
  connectTimeoutMs?: number;
}

/**
 * The PostgreSQL job store's way to its database (postgres-store.ts): a pool whose connections read bigint
 * as numbers and use the store's schema, opened and migrated on first use, and the shapes of work the
 * store runs on it (one client, a transaction, a query). Nothing here knows what a job is.
 */
export class JobDatabase {
  private readonly pool: pg.Pool;
  private ready: Promise<void> | undefined;
  /** Set by `close`: work is refused from then on (`connect` still runs, for the store's last notification). */
  closed = false;

  constructor(private readonly options: JobDatabaseOptions) {
    this.pool = new pg.Pool({
      Client: ListenedClient,
      connectionString: options.url,
      max: options.maxConnections ?? 4,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
      // READ COMMITTED whatever the server, database or role default (default_transaction_isolation): the
      // store's exclusivity rests on it. submit_job and claim_jobs take an advisory lock and then count and
      // pick from a statement snapshot taken after it, which must see every write committed before the lock
      // was granted; under REPEATABLE READ the snapshot is the transaction's first, taken before the lock, so
      // racing submits passed the per-Anima bounds, and claims (and serializable ones) failed with 40001.
      // A startup option covers every statement, in a transaction or not; a backslash escapes the space.
      options: `-c search_path=${options.schema} -c default_transaction_isolation=read\\ committed`,
      // bigint columns hold epoch ms and counts well inside 2^53: read them as numbers.
      types: {
        getTypeParser: (oid: number, format?: "text" | "binary") => (oid === 20 ? Number : (pg.types.getTypeParser(oid, format) as (value: string) => unknown)),
      },
    });
    // An idle connection the server dropped is reported here; the next query opens a new one.
    this.pool.on("error", () => {});
  }

  /** Opens the pool and creates or migrates the schema; every `run` waits for it. */
  open(): Promise<void> {
    // A failed open (the server down, the connection dropped mid-way) is tried again by the next call.
    this.ready ??= this.connect(async (client) => migratePostgres(client, this.options.schema)).catch((error: unknown) => {
      this.ready = undefined;
      throw error;
    });
    return this.ready;
  }

  /** `work` with a pooled client, once the schema is ready; refused after `close`. */
  async run<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    if (this.closed) throw closedError();
    await this.open();
    return this.connect(work);
  }

  /** `work` with a pooled client, without waiting for the schema or looking at `closed`. */
  connect<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return withPooledClient(this.pool, this.options.url, work);
  }

  transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.run(async (client) => {
      await client.query("BEGIN");
      try {
        const result = await work(client);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => {});
        throw error;
      }
    });
  }

  async queryRows<R extends pg.QueryResultRow = JobRow>(sql: string, values: unknown[]): Promise<R[]> {
    return (await this.run((client) => client.query<R>(sql, values))).rows;
  }

  async queryOne<R extends pg.QueryResultRow = JobRow>(sql: string, values: unknown[]): Promise<R | undefined> {
    return (await this.queryRows<R>(sql, values))[0];
  }

  /** Ends the pool (after `closed` was set and any last work done). */
  end(): Promise<void> {
    return this.pool.end();
  }
}

export function closedError(): ToolHostError {
  return new ToolHostError("ExecutionError", "the job store is closed");
}
