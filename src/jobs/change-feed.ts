import type { JobStore } from "./store.js";

/** How long after a failed attempt to listen for store changes a worker tries again, ms. */
const LISTEN_RETRY_MS = 1_000;

/** How long a worker gathers submit notifications before it claims, ms. */
const NOTIFY_COALESCE_MS = 5;

/**
 * A worker's subscription to the changes its store pushes (PostgreSQL's LISTEN/NOTIFY), for worker.ts: a
 * submit anywhere wakes the worker to claim, and a cancel reaches the worker running the job at once. The
 * worker still checks the store before it acts (a claim, a lease renewal); without a feed, or while it is
 * down, its polls and heartbeats do the same more slowly.
 *
 * Invariants:
 *  - Submits are coalesced: under load they arrive one per submit, and a claim per notification (each a
 *    transaction serialised with every other worker's) would cost more than the jobs, so `onRunnable` is
 *    called once `NOTIFY_COALESCE_MS` after the first of a burst, for all of it.
 *  - A failed subscription is reported (`warn`) and tried again every `LISTEN_RETRY_MS`, for as long as
 *    `wanted()` holds: polling covers the gap.
 *  - `close` clears both timers and ends the subscription, once it was made.
 */
export class StoreChangeFeed {
  /** Resolves to the function that ends the subscription (undefined: it failed). */
  private subscription: Promise<(() => Promise<void>) | undefined> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private coalesceTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: JobStore,
    private readonly handlers: {
      /** Jobs may be claimable (coalesced; see the class). */
      onRunnable: () => void;
      /** A cancel was requested for job `id`, which may be running here. */
      onCancel: (id: string) => void;
      /** Whether the worker still wants the feed (a retry is made only then). */
      wanted: () => boolean;
      warn: (what: string, error: unknown) => void;
    },
  ) {}

  /** Subscribes, if the store pushes changes at all. */
  open(): void {
    const subscribe = this.store.subscribe?.bind(this.store);
    if (!subscribe) return;
    this.subscription = subscribe((event) => {
      if (event.type === "runnable") this.runnableSoon();
      else this.handlers.onCancel(event.id);
    }).catch((error: unknown) => {
      this.handlers.warn("listening for job changes failed (polling until it works)", error);
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        if (this.handlers.wanted()) this.open();
      }, LISTEN_RETRY_MS);
      return undefined;
    });
  }

  async close(): Promise<void> {
    clearTimeout(this.coalesceTimer);
    this.coalesceTimer = undefined;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const unsubscribe = await this.subscription;
    this.subscription = undefined;
    await unsubscribe?.();
  }

  private runnableSoon(): void {
    if (this.coalesceTimer) return;
    this.coalesceTimer = setTimeout(() => {
      this.coalesceTimer = undefined;
      this.handlers.onRunnable();
    }, NOTIFY_COALESCE_MS);
  }
}
