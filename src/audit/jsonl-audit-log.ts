import { closeSync, fstatSync, mkdirSync, openSync, renameSync, writeSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { type AuditEvent, type AuditLog, type AuditQuery, type AuditRecord, isoTimestamp, matches } from "./audit-log.js";

/**
 * An append-only JSON-lines audit log, bounded in size by rotation: when the file passes `maxBytes` it
 * becomes `<file>.1` (`.1` → `.2` …, the oldest beyond `keepFiles` is dropped).
 *
 * Records are buffered and written at most `flushIntervalMs` later in one `write` to a file opened
 * with O_APPEND, so a call never waits on the disk and several processes (one-shot CLI runs next to a
 * server) can share the file without interleaving inside a line. `close()` writes what is buffered.
 */
export interface JsonlAuditLogOptions {
  /** Rotate when the file reaches this size, in bytes. Default: 10 MiB. */
  maxBytes?: number;
  /** Rotated files kept besides the current one. Default: 3. */
  keepFiles?: number;
  /** Longest time a record waits in memory before it is written, in ms. Default: 20. */
  flushIntervalMs?: number;
}

export class JsonlAuditLog implements AuditLog {
  private readonly maxBytes: number;
  private readonly keepFiles: number;
  private buffer: string[] = [];
  private scheduled = false;
  private fd: number | undefined;
  /** Size of the open file as this writer knows it (other writers may add more; rotation is approximate). */
  private sizeBytes = 0;
  private readonly flushIntervalMs: number;
  private closed = false;

  constructor(
    readonly file: string,
    options: JsonlAuditLogOptions = {},
  ) {
    this.maxBytes = options.maxBytes ?? 10 * 1024 * 1024;
    this.keepFiles = options.keepFiles ?? 3;
    this.flushIntervalMs = options.flushIntervalMs ?? 20;
  }

  append(event: AuditEvent): void {
    if (this.closed) return;
    this.buffer.push(JSON.stringify({ ts: isoTimestamp(), ...event }));
    if (!this.scheduled) {
      this.scheduled = true;
      setTimeout(() => this.writeBuffered(), this.flushIntervalMs).unref();
    }
  }

  async read(query: AuditQuery = {}): Promise<AuditRecord[]> {
    await this.flush();
    const files = [...Array.from({ length: this.keepFiles }, (_, i) => `${this.file}.${this.keepFiles - i}`), this.file];
    const records: AuditRecord[] = [];
    for (const file of files) {
      const text = await readFile(file, "utf8").catch(() => "");
      for (const line of text.split("\n")) {
        if (line.trim() === "") continue;
        try {
          const record = JSON.parse(line) as AuditRecord;
          if (matches(record, query)) records.push(record);
        } catch {
          // a torn last line after a crash: skip it
        }
      }
    }
    return records;
  }

  async flush(): Promise<void> {
    this.writeBuffered();
  }

  async close(): Promise<void> {
    this.writeBuffered();
    this.closed = true;
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private writeBuffered(): void {
    this.scheduled = false;
    if (this.buffer.length === 0) return;
    const text = `${this.buffer.join("\n")}\n`;
    this.buffer = [];
    try {
      const fd = this.open();
      this.sizeBytes += writeSync(fd, text);
      if (this.sizeBytes >= this.maxBytes && fstatSync(fd).size >= this.maxBytes) this.rotate();
    } catch {
      // The audit log must never take a call down with it; a lost write is the lesser harm.
    }
  }

  private open(): number {
    if (this.fd === undefined) {
      mkdirSync(dirname(this.file), { recursive: true });
      this.fd = openSync(this.file, "a", 0o600);
      this.sizeBytes = fstatSync(this.fd).size;
    }
    return this.fd;
  }

  private rotate(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
    for (let i = this.keepFiles - 1; i >= 1; i--) {
      try {
        renameSync(`${this.file}.${i}`, `${this.file}.${i + 1}`);
      } catch {
        // that generation does not exist yet
      }
    }
    renameSync(this.file, `${this.file}.1`);
  }
}
