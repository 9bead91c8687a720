import { type AuditCoverage, type AuditEvent, type AuditLog, type AuditQuery, type AuditRecord, boundEvent, isoTimestamp, matches } from "./audit-log.js";

/** Keeps records in memory: for tests and for embedding where no file is wanted. */
export class MemoryAuditLog implements AuditLog {
  private readonly records: AuditRecord[] = [];
  private seq = 0;

  constructor(private readonly maxRecords = 100_000) {}

  append(event: AuditEvent): void {
    this.records.push({ ...boundEvent(event), ts: isoTimestamp(), seq: ++this.seq });
    if (this.records.length > this.maxRecords) this.records.splice(0, this.records.length - this.maxRecords);
  }

  async read(query: AuditQuery = {}): Promise<AuditRecord[]> {
    return this.records.filter((record) => matches(record, query));
  }

  async readWith<T>(query: AuditQuery, use: (records: AuditRecord[]) => Promise<T>): Promise<T> {
    return use(await this.read(query));
  }

  async coverage(anima?: string): Promise<AuditCoverage> {
    const kept = anima === undefined ? this.records : this.records.filter((record) => "anima" in record && record.anima === anima);
    const first = kept[0];
    return { ...(first ? { oldestTs: first.ts } : {}), rotatedAway: first !== undefined && first.seq !== undefined && this.records[0]?.seq !== 1 };
  }

  async flush(): Promise<void> {}

  async close(): Promise<void> {}
}
