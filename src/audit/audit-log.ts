/**
 * The audit trail (docs/design.md §1, §9): every call, capability use, denial, credential access, load
 * failure and sandbox crash. Records are plain data; secret values never appear in them: callers record
 * where a credential came from, never its value, and a record's free text is bounded (`boundEvent`).
 */
export type AuditEvent =
  | {
      kind: "call";
      anima: string;
      tool: string;
      schema: string;
      durationMs: number;
      outcome: "ok" | "error";
      errorType?: string;
      /** Who must act on the failure (`Fault`): "host" marks the failures an operator should look at. */
      errorFault?: string;
      /** Background job id, when the call ran as a job. */
      jobId?: string;
    }
  | {
      kind: "capability";
      anima: string;
      tool: string;
      /** e.g. `fs.readFile`, `fetch`. */
      operation: string;
      /** The path or URL asked for, truncated. */
      target: string;
      outcome: "ok" | "denied" | "error";
      /** Why it was denied or failed (an error type and a short reason). */
      reason?: string;
    }
  | {
      kind: "credential";
      anima: string;
      tool: string;
      /** The credential or variable name asked for — never the value. */
      name: string;
      outcome: "ok" | "missing" | "denied";
      /** Where the value came from: `config.json`, `vault.json`, `shared/credentials.json`, `environment`. */
      source?: string;
    }
  | { kind: "load_error"; anima?: string; tool: string; origin: string; message: string }
  | { kind: "sandbox_crash"; anima?: string; tool?: string; message: string }
  | {
      kind: "reload";
      /** The Anima whose view of its tools changed; absent for a reload of what every Anima sees (no Anima named). */
      anima?: string;
      tool: string;
      origin: string;
      change: ReloadChange;
      /** The load error, for `failed`. */
      message?: string;
      /** What noticed the change: an explicit refresh, the folder watcher of a long-running host, a share. */
      trigger?: ReloadTrigger;
    };

export type ReloadChange = "loaded" | "changed" | "removed" | "failed";
export type ReloadTrigger = "refresh" | "watcher" | "share";

export type AuditRecord = AuditEvent & { ts: string };

export interface AuditQuery {
  anima?: string;
  /** Only records at or after this time (ms since the epoch). */
  sinceMs?: number;
}

/** The seam: one contract test suite (test/audit/contract.ts) holds every implementation to it. */
export interface AuditLog {
  /** Records an event. Never throws and never blocks the caller on I/O. */
  append(event: AuditEvent): void;
  /** Records in the order they were appended, oldest first. */
  read(query?: AuditQuery): Promise<AuditRecord[]>;
  /** Writes out anything buffered. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** Longest argument kept in a record; the rest is cut with a marker. */
export const MAX_AUDIT_FIELD_CHARS = 256;

/** Longest message or reason kept in a record (a load error, a denial's reason). */
export const MAX_AUDIT_MESSAGE_CHARS = 2_000;

/**
 * The event as it may be written: every string field cut (messages and reasons at
 * `MAX_AUDIT_MESSAGE_CHARS`, everything else at `MAX_AUDIT_FIELD_CHARS`) with control characters
 * escaped, whoever built it. Much of an event is tool-controlled (a load error, a tool's name, a path),
 * and one tool's 11 MB load error once made 11 MB records that rotated everything else away.
 */
export function boundEvent(event: AuditEvent): AuditEvent {
  const bounded: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(event)) {
    bounded[key] =
      typeof value === "string" ? truncateForAudit(value, key === "message" || key === "reason" ? MAX_AUDIT_MESSAGE_CHARS : MAX_AUDIT_FIELD_CHARS) : value;
  }
  return bounded as AuditEvent;
}

/** Denials, crashes and protocol violations: what the audit trail must keep longest (see JsonlAuditLog). */
export function isSecurityEvent(event: AuditEvent): boolean {
  return event.kind === "sandbox_crash" || ("outcome" in event && event.outcome === "denied");
}

export function truncateForAudit(text: string, maxChars = MAX_AUDIT_FIELD_CHARS): string {
  const clean = text.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  return clean.length > maxChars ? `${clean.slice(0, maxChars)}…[${clean.length - maxChars} more]` : clean;
}

/**
 * The current time as `Date#toISOString` writes it (UTC, milliseconds, `Z`). Built from the UTC getters
 * because the first `toISOString()` in a process costs ≈ 0.7 ms (the getters ≈ 0.1 ms), and a one-shot
 * CLI call writes one record.
 */
export function isoTimestamp(date = new Date()): string {
  const pad = (value: number, width = 2) => String(value).padStart(width, "0");
  return (
    `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}` +
    `T${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}.${pad(date.getUTCMilliseconds(), 3)}Z`
  );
}

export function matches(record: AuditRecord, query: AuditQuery): boolean {
  if (query.anima !== undefined && ("anima" in record ? record.anima : undefined) !== query.anima) return false;
  if (query.sinceMs !== undefined && Date.parse(record.ts) < query.sinceMs) return false;
  return true;
}

/** Keeps records in memory: for tests and for embedding where no file is wanted. */
export class MemoryAuditLog implements AuditLog {
  private readonly records: AuditRecord[] = [];

  constructor(private readonly maxRecords = 100_000) {}

  append(event: AuditEvent): void {
    this.records.push({ ...boundEvent(event), ts: isoTimestamp() });
    if (this.records.length > this.maxRecords) this.records.splice(0, this.records.length - this.maxRecords);
  }

  async read(query: AuditQuery = {}): Promise<AuditRecord[]> {
    return this.records.filter((record) => matches(record, query));
  }

  async flush(): Promise<void> {}

  async close(): Promise<void> {}
}
