import pg from "pg";
import { ToolHostError } from "../errors.js";
import { type StoreEvent, describeServer } from "./store.js";

/**
 * Connections to the jobs database as postgres-store.ts uses them: a pooled client checked out for one
 * piece of work, and the LISTEN connection that wakes workers. Both survive what a server does to its
 * connections (a restart, a terminated backend): a broken client is closed rather than handed on, and a
 * lost LISTEN is opened again. Errors name the server without its password.
 */

/**
 * A pg.Client that is never without an 'error' listener. pg-pool removes its own listener when it hands
 * a client over, and the caller's listener can only follow a microtask later; a backend that is
 * terminated as its connection opens (its ReadyForQuery and the FATAL 57P01 in one read) emits 'error' in
 * between, and an 'error' event without a listener ends the process (a daemon or a job worker). What the
 * event means is not lost: the client is marked unqueryable, its next query fails, and a failed query
 * discards the client (`withPooledClient`).
 */
export class ListenedClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    this.on("error", () => {});
  }
}

/** How long a lost LISTEN connection waits before it is opened again, ms. */
const RELISTEN_AFTER_MS = 1_000;

/**
 * Runs `work` with a client of `pool`. While checked out, a client whose connection the server ends
 * reports it as an 'error' event (without a listener that would end this process); one whose connection
 * failed is closed, not handed to the next caller.
 */
export async function withPooledClient<T>(pool: pg.Pool, url: string, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw unreachable(url, error);
  }
  const onError = (): void => {};
  client.on("error", onError);
  let broken = false;
  try {
    return await work(client);
  } catch (error) {
    broken = isConnectionError(error);
    throw error;
  } finally {
    client.off("error", onError);
    client.release(broken);
  }
}

export interface ListenOptions {
  url: string;
  connectTimeoutMs: number;
  channel: string;
  /** True once the store is closed: no connection is opened again then. */
  closed: () => boolean;
}

/**
 * LISTENs on `channel` through a connection of its own (outside the pool, which it would otherwise hold
 * for good) and tells `listener` of `runnable` and `cancel:<id>` notifications. A lost connection is
 * opened again after `RELISTEN_AFTER_MS`, and the listener is told `runnable` then, since it may have
 * missed submits meanwhile (polling covered the gap). Resolves once the first LISTEN is in place, or once
 * it failed and was scheduled again; with the function that stops listening.
 */
export async function listen(options: ListenOptions, listener: (event: StoreEvent) => void): Promise<() => Promise<void>> {
  let stopped = false;
  let current: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  const connect = async (): Promise<void> => {
    const client = new ListenedClient({ connectionString: options.url, connectionTimeoutMillis: options.connectTimeoutMs });
    client.on("notification", (message) => {
      const payload = message.payload ?? "";
      if (payload === "runnable") listener({ type: "runnable" });
      else if (payload.startsWith("cancel:")) listener({ type: "cancel", id: payload.slice("cancel:".length) });
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${options.channel}`);
    } catch (error) {
      await client.end().catch(() => {});
      throw unreachable(options.url, error);
    }
    client.once("end", () => {
      if (stopped || options.closed()) return;
      retry = setTimeout(reconnect, RELISTEN_AFTER_MS);
    });
    current = client;
  };
  const reconnect = (): void => {
    retry = undefined;
    if (stopped || options.closed()) return;
    connect().then(
      () => listener({ type: "runnable" }),
      () => {
        if (!stopped && !options.closed()) retry = setTimeout(reconnect, RELISTEN_AFTER_MS);
      },
    );
  };
  // The first LISTEN is in place when this resolves, unless the server cannot be reached now: then it is
  // tried again in the background (the worker polls meanwhile) instead of never.
  await connect().catch(() => {
    retry = setTimeout(reconnect, RELISTEN_AFTER_MS);
  });
  return async () => {
    stopped = true;
    clearTimeout(retry);
    await current?.end().catch(() => {});
  };
}

/** A failure of the connection rather than of the statement (classes 08 and 57P, or none at all). */
function isConnectionError(error: unknown): boolean {
  if (error instanceof ToolHostError) return false;
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code !== "string" || code.startsWith("08") || code.startsWith("57P");
}

function unreachable(url: string, error: unknown): ToolHostError {
  const reason = error instanceof Error ? error.message : String(error);
  return new ToolHostError(
    "ExecutionError",
    `cannot reach the job database ${describeServer(url)}: ${reason.replaceAll(url, describeServer(url))}`,
    "check that PostgreSQL runs and the URL (ANIMAWORKS_JOBS_URL or --jobs-url) names it",
  );
}
