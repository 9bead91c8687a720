import type Database from "better-sqlite3";

/**
 * Group commit for better-sqlite3: every write requested during one turn of the event loop runs in ONE
 * `BEGIN IMMEDIATE` transaction, committed once, and each caller's promise settles only after that commit.
 *
 * Why: with `synchronous = FULL` a commit costs an fsync (about 0.7 ms on this project's machines), so one
 * transaction per write caps the store at ~1,500 writes/s. Sharing the fsync keeps every write durable
 * before its promise resolves while letting a burst of submits, claims and completions cost one sync.
 *
 * A write that throws is rolled back alone and rejects only its own promise; the rest of the batch still
 * commits (see `flush` for how, cheaply).
 *
 * Durability is chosen per batch: if any write in it is `durable`, the batch commits with
 * `synchronous = FULL`, otherwise with NORMAL (no fsync). WAL frames are appended in order, so a later FULL
 * commit also makes every earlier NORMAL commit durable.
 */
export class GroupCommit {
  private queue: PendingWrite[] = [];
  private scheduled = false;
  private syncMode: "FULL" | "NORMAL" | undefined;
  private readonly inSavepoint: (write: () => unknown) => unknown;

  constructor(private readonly db: Database.Database) {
    // A better-sqlite3 transaction function called while a transaction is open uses a SAVEPOINT.
    this.inSavepoint = db.transaction((write: () => unknown) => write());
  }

  /** Queues `write` (synchronous SQL) for the next batch; resolves with its return value after commit. */
  run<T>(durable: boolean, write: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ durable, write, resolve: resolve as (value: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        // setImmediate rather than a microtask: writes issued from other I/O callbacks of this loop turn
        // (e.g. several jobs finishing together) join the same batch.
        setImmediate(() => this.flush());
      }
    });
  }

  /** Commits everything queued now. Safe to call at any time (e.g. before closing the database). */
  flush(): void {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    let outcomes: Outcome[];
    try {
      const mode = batch.some((w) => w.durable) ? "FULL" : "NORMAL";
      if (mode !== this.syncMode) {
        this.db.pragma(`synchronous = ${mode}`);
        this.syncMode = mode;
      }
      // Fast path: no savepoints (they cost about as much as a small write). If any write throws, the
      // whole transaction is rolled back and the batch runs again with one savepoint per write. Writes are
      // plain functions of the database state, so running one again is safe.
      outcomes = this.commit(batch, false) ?? this.commit(batch, true)!;
    } catch (error) {
      outcomes = batch.map(() => ({ ok: false, error }));
    }
    batch.forEach((w, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) w.resolve(outcome.value);
      else w.reject(outcome.error);
    });
  }

  /** Runs the batch in one transaction. Without isolation, returns undefined if a write threw. */
  private commit(batch: readonly PendingWrite[], isolate: boolean): Outcome[] | undefined {
    // IMMEDIATE takes the write lock up front (waiting up to busy_timeout for another process), so the
    // reads a write makes (e.g. choosing which job to claim) cannot be invalidated before it commits.
    this.db.exec("BEGIN IMMEDIATE");
    const outcomes: Outcome[] = [];
    try {
      for (const w of batch) {
        if (!isolate) {
          outcomes.push({ ok: true, value: w.write() });
          continue;
        }
        try {
          outcomes.push({ ok: true, value: this.inSavepoint(w.write) });
        } catch (error) {
          outcomes.push({ ok: false, error });
        }
      }
      this.db.exec("COMMIT");
      return outcomes;
    } catch (error) {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
      // A lone write needs no second run to know its own error.
      if (!isolate && batch.length === 1) return [{ ok: false, error }];
      if (!isolate) return undefined;
      throw error;
    }
  }
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

interface PendingWrite {
  durable: boolean;
  write: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}
