import type pg from "pg";
import type { JobDatabase } from "./postgres-pool.js";

/** Submits of one store instance notify at most this often; the rest are covered by a trailing one, ms. */
const NOTIFY_EVERY_MS = 2;

/**
 * The PostgreSQL job store's wake-ups for workers (postgres-connection.ts `listen` hears them): `runnable`
 * after submits and requeues, `cancel:<id>` for a running job, on one channel per schema so that stores in
 * other schemas of the database do not wake each other.
 *
 * PostgreSQL serialises the commits of transactions that NOTIFY (a lock on the notification queue), so a
 * notification in every submit of a burst makes each submit wait for the one before it to reach the disk.
 * A submit notifies unless another notified within `NOTIFY_EVERY_MS`; one that did not is followed, once
 * committed, by a notification of its own at most `NOTIFY_EVERY_MS` later (`soon`).
 */
export class StoreNotifications {
  readonly channel: string;
  /** When this instance last sent a `runnable` notification, performance.now() ms. */
  private lastAt = Number.NEGATIVE_INFINITY;
  private trailing: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: JobDatabase,
    schema: string,
  ) {
    this.channel = `${schema}_jobs`;
  }

  /** Whether a submit notifies in its own statement (always inside a transaction the caller commits later). */
  submitNotifies(inTransaction: boolean): boolean {
    const notify = inTransaction || performance.now() - this.lastAt >= NOTIFY_EVERY_MS;
    if (notify) this.lastAt = performance.now();
    return notify;
  }

  async send(client: pg.PoolClient, payload: string): Promise<void> {
    await client.query("SELECT pg_notify($1, $2)", [this.channel, payload]);
  }

  /**
   * A notification on its own, `NOTIFY_EVERY_MS` from now: one for all submits that skipped theirs
   * meanwhile. Called only once such a submit committed (the one-statement submit commits by itself).
   */
  soon(): void {
    if (this.trailing || this.db.closed) return;
    this.trailing = setTimeout(() => {
      this.trailing = undefined;
      this.lastAt = performance.now();
      this.db
        .run((client) => this.send(client, "runnable"))
        .catch(() => {
          // polling covers a lost wake-up
        });
    }, NOTIFY_EVERY_MS);
  }

  /** At close: the notification a skipped submit is owed goes out before the pool closes. */
  async flush(): Promise<void> {
    if (!this.trailing) return;
    clearTimeout(this.trailing);
    this.trailing = undefined;
    await this.db.connect((client) => this.send(client, "runnable")).catch(() => {});
  }
}
