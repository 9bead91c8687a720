import { type AuditQuery, type AuditRecord, AuditReadersBusy } from "./audit-log.js";

/** What ReadTurns bounds. */
export interface ReadTurnsOptions {
  /**
   * Records that readers still using theirs (`readWith`) may hold before a further `readWith` waits (what
   * they hold stays below this plus one read).
   */
  maxHeldRecords: number;
  /** How long a `readWith` waits for room before it rejects with `AuditReadersBusy`, ms. */
  maxHeldWaitMs: number;
}

/**
 * When the audit log's reads run (jsonl-audit-log.ts), and what their readers may keep: a long-running
 * host answers `audit events` and `audit` for whoever asks, and each read may hold up to a million records.
 *
 * Invariants: one read runs at a time (`readNow` is never entered twice at once); the records counted as
 * held are those of `readWith` reads whose `use` has not ended, counted from the moment they were read
 * until `use` settles, however it settles; plain reads never wait for held records.
 */
export class ReadTurns {
  /** The last read asked for: the next starts when it ends. */
  private reading: Promise<unknown> = Promise.resolve();
  /** readWith's own turns: each is admitted once the records held are below the bound. */
  private heldTurn: Promise<unknown> = Promise.resolve();
  private heldRecords = 0;
  private roomWaiters: Array<() => void> = [];

  constructor(
    private readonly readNow: (query: AuditQuery) => Promise<AuditRecord[]>,
    private readonly options: ReadTurnsOptions,
  ) {}

  read(query: AuditQuery = {}): Promise<AuditRecord[]> {
    return this.readInTurn(query, false);
  }

  /**
   * Reads for a use that holds the records a while (`audit events` streaming them to a client that may
   * stop reading: 48 such clients held 1.3 GB of the daemon after their reads had ended;
   * audit_events_stalled_clients). These reads take turns of their own: each waits until the records
   * held by the others are fewer than `maxHeldRecords` (so what they hold stays below it plus one read),
   * then reads and counts its records as held until `use` is done. Waiting past `maxHeldWaitMs` rejects
   * with `AuditReadersBusy`. Plain reads never wait for them (the report and the others go on).
   */
  readWith<T>(query: AuditQuery, use: (records: AuditRecord[]) => Promise<T>): Promise<T> {
    const admitted = this.heldTurn.then(async () => {
      await this.roomToHold();
      return this.readInTurn(query, true);
    });
    this.heldTurn = admitted.catch(() => undefined);
    return admitted.then(async (records) => {
      try {
        return await use(records);
      } finally {
        this.heldRecords -= records.length;
        for (const wake of this.roomWaiters.splice(0)) wake();
      }
    });
  }

  private async roomToHold(): Promise<void> {
    const deadline = Date.now() + this.options.maxHeldWaitMs;
    while (this.heldRecords >= this.options.maxHeldRecords) {
      const leftMs = deadline - Date.now();
      if (leftMs <= 0) throw new AuditReadersBusy(this.heldRecords);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, leftMs);
        this.roomWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /**
   * One read at a time: each holds up to maxReadRecords records while it runs, and a daemon answering many
   * at once (64 concurrent `audit events` of one Anima's 300,000 records) grew past its heap and ended
   * (audit_events_concurrent_reads). The others wait their turn. `hold`: the records count as held from
   * the moment they are read (readWith).
   */
  private readInTurn(query: AuditQuery, hold: boolean): Promise<AuditRecord[]> {
    const turn = this.reading.then(async () => {
      const records = await this.readNow(query);
      if (hold) this.heldRecords += records.length;
      return records;
    });
    this.reading = turn.catch(() => undefined);
    return turn;
  }
}
