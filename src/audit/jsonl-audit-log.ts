import { closeSync, fstatSync, mkdirSync, openSync, renameSync, writeSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { type AuditEvent, type AuditLog, type AuditQuery, type AuditRecord, boundEvent, isSecurityEvent, isoTimestamp, matches } from "./audit-log.js";

/** `audit.jsonl` → `audit.security.jsonl`. */
function securityFileOf(file: string): string {
  return file.endsWith(".jsonl") ? `${file.slice(0, -".jsonl".length)}.security.jsonl` : `${file}.security`;
}

/**
 * An append-only JSON-lines audit log, bounded in size by rotation: when the file passes `maxBytes` it
 * becomes `<file>.1` (`.1` → `.2` …, the oldest beyond `keepFiles` is dropped).
 *
 * Security events (denials, crashes, protocol violations) are also written to a trail of their own,
 * `<file without .jsonl>.security.jsonl`, rotated the same way but only by other security events: a
 * flood of ordinary records (calls, load errors) cannot rotate a denial out of the audit trail. `read`
 * merges both. Every record is bounded first (`boundEvent`).
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
  /**
   * Told when records could not be written (a read-only or full data dir), once until a write succeeds
   * again: the records are lost, and the operator must hear of it. Default: none.
   */
  onWriteError?: (error: unknown, file: string) => void;
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
  private failing = false;
  private readonly onWriteError: ((error: unknown, file: string) => void) | undefined;
  /** The security trail (see above); undefined inside it. */
  private readonly security: JsonlAuditLog | undefined;

  constructor(
    readonly file: string,
    options: JsonlAuditLogOptions = {},
    securityTrail = false,
  ) {
    this.maxBytes = options.maxBytes ?? 10 * 1024 * 1024;
    this.keepFiles = options.keepFiles ?? 3;
    this.flushIntervalMs = options.flushIntervalMs ?? 20;
    this.onWriteError = options.onWriteError;
    this.security = securityTrail ? undefined : new JsonlAuditLog(securityFileOf(file), options, true);
  }

  append(event: AuditEvent): void {
    if (this.closed) return;
    const line = JSON.stringify({ ts: isoTimestamp(), ...boundEvent(event) });
    this.appendLine(line);
    if (this.security && isSecurityEvent(event)) this.security.appendLine(line);
  }

  private appendLine(line: string): void {
    this.buffer.push(line);
    if (!this.scheduled) {
      this.scheduled = true;
      setTimeout(() => this.writeBuffered(), this.flushIntervalMs).unref();
    }
  }

  async read(query: AuditQuery = {}): Promise<AuditRecord[]> {
    await this.flush();
    const lines = await this.readLines();
    if (this.security) {
      // Security records rotated out of the main files survive in their own trail.
      const present = new Set(lines);
      const kept = (await this.security.readLines()).filter((line) => !present.has(line));
      if (kept.length > 0) lines.push(...kept);
    }
    const records: AuditRecord[] = [];
    for (const line of lines) {
      try {
        const record = JSON.parse(line) as AuditRecord;
        if (matches(record, query)) records.push(record);
      } catch {
        // a torn last line after a crash: skip it
      }
    }
    // Oldest first (ISO timestamps sort as text; the sort is stable for records of the same instant).
    return this.security ? records.sort((a, b) => (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0)) : records;
  }

  private async readLines(): Promise<string[]> {
    await this.flush();
    const files = [...Array.from({ length: this.keepFiles }, (_, i) => `${this.file}.${this.keepFiles - i}`), this.file];
    const lines: string[] = [];
    for (const file of files) {
      const text = await readFile(file, "utf8").catch(() => "");
      for (const line of text.split("\n")) if (line.trim() !== "") lines.push(line);
    }
    return lines;
  }

  async flush(): Promise<void> {
    this.writeBuffered();
    if (this.security) await this.security.flush();
  }

  async close(): Promise<void> {
    if (this.security) await this.security.close();
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
      this.failing = false;
      if (this.sizeBytes >= this.maxBytes && fstatSync(fd).size >= this.maxBytes) this.rotate();
    } catch (error) {
      // The audit log must never take a call down with it; a lost write is the lesser harm, and is reported.
      if (!this.failing) {
        this.failing = true;
        try {
          this.onWriteError?.(error, this.file);
        } catch {
          // a broken report sink changes nothing
        }
      }
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
