/**
 * The audit trail (docs/design.md §1, §9): every call, capability use, denial, credential access, load
 * failure and sandbox crash. Records are plain data; secret values never appear in them: callers record
 * where a credential came from, never its value, and a record's free text is bounded (`boundEvent`).
 */
export type AuditEvent =
  | {
      /** Written when a call starts, so that a call the host never finished (a crash, kill -9) still shows. */
      kind: "call_start";
      callId: string;
      anima: string;
      tool: string;
      schema: string;
      /** The tool version called: its bundle's hash. */
      version: string;
      jobId?: string;
      /** The process of the host that runs the call: `audit` shows a start without an end as interrupted once it is gone. */
      pid: number;
    }
  | {
      kind: "call";
      /** Ties this record to its start and to every capability, credential and fetch record of the call. */
      callId: string;
      anima: string;
      /** The tool's name; `(unknown)` when no tool of that action exists (`schema` is what was asked for). */
      tool: string;
      schema: string;
      /** The tool version called (bundle hash); absent when the call failed before a version was chosen. */
      version?: string;
      /** The isolation layers that ran it, outermost first (`bwrap+seccomp`, `process`, `isolate`); absent when it never ran. */
      layers?: string[];
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
      callId?: string;
      anima: string;
      tool: string;
      /** e.g. `fs.readFile`, `fetch`. */
      operation: string;
      /** The path or URL asked for, truncated. */
      target: string;
      outcome: "ok" | "denied" | "error";
      /** Why it was denied or failed (an error type and a short reason). */
      reason?: string;
      /** On a denial: the hash of the Anima's policy in force (policy-ledger.ts), as in its `policy_change` records. */
      policy?: string;
    }
  | {
      kind: "credential";
      callId?: string;
      anima: string;
      tool: string;
      /** The credential or variable name asked for — never the value. */
      name: string;
      outcome: "ok" | "missing" | "denied";
      /** Where the value came from: `config.json`, `vault.json`, `shared/credentials.json`, `environment`. */
      source?: string;
      /** Why it was denied, when the name alone does not say (a variable outside `allowed_environment`). */
      reason?: string;
      /** On a denial: the policy in force, as for capabilities. */
      policy?: string;
    }
  | { kind: "load_error"; callId?: string; anima?: string; tool: string; origin: string; message: string }
  | { kind: "sandbox_crash"; callId?: string; anima?: string; tool?: string; message: string }
  | {
      /** A management command or door that refused (a share without the permission, a write into another Anima's folder). */
      kind: "refusal";
      anima?: string;
      /** What was asked: `share_tool`, `write_memory_file`, `refresh_tools`, `submit_job`… */
      command: string;
      /** What it was asked of: a tool name, a path. */
      target: string;
      errorType: string;
      errorFault?: string;
      reason: string;
      policy?: string;
    }
  | {
      /** An Anima's permissions or the operator's `animaworks_tool` settings changed (policy-ledger.ts). */
      kind: "policy_change";
      /** Absent for the operator's settings, which hold for every Anima. */
      anima?: string;
      scope: "permissions" | "operator";
      /** Policy hash before (absent the first time a policy is seen) and after. */
      from?: string;
      to: string;
      /** The policy before and after, as JSON text (bounded). */
      before?: string;
      after: string;
      /** When the file that holds it was last changed, if known (the change is recorded when a host notices it). */
      changedAt?: string;
    }
  | {
      /**
       * A trail file was started (verify checks that every trail named here still exists). In the host's
       * security trail, whose own loss verify reports whenever another trail exists.
       */
      kind: "trail";
      /** The trail's Anima; absent for the host's `host.jsonl`. */
      anima?: string;
      /** The trail's file, relative to the audit folder; absent in announcements of earlier builds (an Anima's pair, either file). */
      file?: string;
    }
  | {
      /** Records this writer could not write and dropped (a trail locked or unwritable for too long). */
      kind: "audit_gap";
      anima?: string;
      lost: number;
      reason: string;
    }
  | {
      /**
       * A writer found a trail's files ending behind its head (records or bytes cut off its end): it went on
       * from the head, so the gap stays in the chain (trail.ts). In the trail's Anima's security trail.
       */
      kind: "trail_truncated";
      anima?: string;
      /** The trail's file, relative to the audit folder. */
      trail: string;
      /** The head's last seq and the last seq the files still held (0: none). */
      headSeq: number;
      fileSeq: number;
      /** The current file's size the head recorded and the size found. */
      headSizeBytes: number;
      fileSizeBytes: number;
    }
  | {
      /**
       * A writer found no readable head for a trail whose files already held records (deleted or spoiled:
       * no crash does that, but for one between a trail's very first write and its first head): what the
       * head protected, the trail's end, can no longer be checked, so verify reports it (trail.ts).
       */
      kind: "trail_head_lost";
      anima?: string;
      /** The trail's file, relative to the audit folder. */
      trail: string;
      /** The last seq the files held, where the writer went on from. */
      fileSeq: number;
    }
  | {
      /**
       * A writer found a trail's files past its head whose record at the head's seq no longer hashes to the
       * head's hash (records rewritten and re-chained, more appended): it went on from the head (trail.ts).
       */
      kind: "trail_rewritten";
      anima?: string;
      /** The trail's file, relative to the audit folder. */
      trail: string;
      /** The head's last seq, and the last seq the files held. */
      headSeq: number;
      fileSeq: number;
    }
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

export type AuditKind = AuditEvent["kind"];

export type ReloadChange = "loaded" | "changed" | "removed" | "failed";
export type ReloadTrigger = "refresh" | "watcher" | "share";

/**
 * A record as read back: the event, its time, and its place in its trail (trail.ts): the record schema
 * version `v`, the sequence number `seq` and the hash of the record before it `prev` (absent in
 * MemoryAuditLog's records; a trail record without them was not written by the host: `unverified`).
 */
export type AuditRecord = AuditEvent & {
  ts: string;
  v?: number;
  seq?: number;
  prev?: string;
  /**
   * Set by JsonlAuditLog's `read`, never stored: a record of a trail without `seq`. The host never wrote
   * one (every trail is chained from its start), so it is most likely inserted; `audit verify` fails on it.
   */
  unverified?: true;
};

export interface AuditQuery {
  anima?: string;
  /** Only records that name no Anima (the operator's policy, core and shared tools' reloads, crashes of no cordon). */
  hostWide?: boolean;
  /** Only records at or after this time (ms since the epoch). */
  sinceMs?: number;
  /** Only records before this time (ms since the epoch). */
  untilMs?: number;
  tool?: string;
  kind?: AuditKind;
  /** `ok`, `error`, `denied`, `missing`… (records without an outcome never match). */
  outcome?: string;
  /** Only the records of one call (its id: a `-j` envelope's `call_id`, MCP's `_meta["animaworks/call_id"]`). */
  callId?: string;
}

/**
 * A read matched more records than it may hold: the host keeps every record of a read in memory (their
 * order is defined over all of them, record-order.ts), and an unbounded one could end a shared host.
 */
export class AuditReadTooLarge extends Error {
  override readonly name = "AuditReadTooLarge";
  constructor(readonly maxRecords: number) {
    super(`more than ${maxRecords.toLocaleString("en-US")} audit records match, more than one read holds`);
  }
}

/** Readers still using theirs (`readWith`) hold as many records as the log lets them: a further one waited past its time. */
export class AuditReadersBusy extends Error {
  override readonly name = "AuditReadersBusy";
  constructor(readonly heldRecords: number) {
    super(`other reads still hold ${heldRecords.toLocaleString("en-US")} audit records (streaming them to clients that have not taken them)`);
  }
}

/** The seam: one contract test suite (test/audit/contract.ts) holds every implementation to it. */
export interface AuditLog {
  /** Records an event. Never throws and never blocks the caller on I/O. */
  append(event: AuditEvent): void;
  /**
   * Records in the order they were appended, oldest first. Rejects with `AuditReadTooLarge` when more
   * records match than one read may hold (JsonlAuditLog's `maxReadRecords`): narrow the query.
   */
  read(query?: AuditQuery): Promise<AuditRecord[]>;
  /**
   * `read`, the records counted as held until `use` is done with them (streaming them to a client that
   * may be slow): a log that bounds what its readers hold at once makes the next read wait for room.
   * `use` must not read the log itself (it would wait on its own records). Returns what `use` returns.
   */
  readWith<T>(query: AuditQuery, use: (records: AuditRecord[]) => Promise<T>): Promise<T>;
  /** Which period the kept records of an Anima (or of all, without one) cover: what retention left. */
  coverage(anima?: string): Promise<AuditCoverage>;
  /** Writes out anything buffered. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/**
 * An AuditLog that stands in front of another (redaction, a copy to a collector): every method goes to
 * `inner` unless the subclass overrides it, so a wrapper states only what it changes.
 */
export abstract class ForwardingAuditLog implements AuditLog {
  constructor(protected readonly inner: AuditLog) {}

  append(event: AuditEvent): void {
    this.inner.append(event);
  }

  read(query?: AuditQuery): Promise<AuditRecord[]> {
    return this.inner.read(query);
  }

  readWith<T>(query: AuditQuery, use: (records: AuditRecord[]) => Promise<T>): Promise<T> {
    return this.inner.readWith(query, use);
  }

  coverage(anima?: string): Promise<AuditCoverage> {
    return this.inner.coverage(anima);
  }

  flush(): Promise<void> {
    return this.inner.flush();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

export interface AuditCoverage {
  /** The oldest record kept (absent: none). */
  oldestTs?: string;
  /** Whether older records were rotated away (or dropped) before it: a report of an earlier period is incomplete. */
  rotatedAway: boolean;
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
  for (const key of Object.keys(event)) {
    const value = (event as Record<string, unknown>)[key];
    bounded[key] = typeof value === "string" ? truncateForAudit(value, FIELD_LIMITS[key] ?? MAX_AUDIT_FIELD_CHARS) : value;
  }
  return bounded as AuditEvent;
}

/** Fields allowed longer than `MAX_AUDIT_FIELD_CHARS`: free text, and a policy's JSON (policy_change). */
const FIELD_LIMITS: Record<string, number> = { message: MAX_AUDIT_MESSAGE_CHARS, reason: MAX_AUDIT_MESSAGE_CHARS, before: 4_100, after: 4_100 };

/** Kinds that are security events whatever they say (other kinds are when their outcome is `denied`). */
export const ALWAYS_SECURITY_KINDS: ReadonlySet<AuditKind> = new Set<AuditKind>([
  "sandbox_crash",
  "refusal",
  "policy_change",
  "audit_gap",
  "trail_truncated",
  "trail_head_lost",
  "trail_rewritten",
]);

/** Denials, refusals, crashes, violations, policy changes, gaps and truncations: what the audit trail must keep longest (see JsonlAuditLog). */
export function isSecurityEvent(event: AuditEvent): boolean {
  return ALWAYS_SECURITY_KINDS.has(event.kind) || ("outcome" in event && event.outcome === "denied");
}

const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/g;

export function truncateForAudit(text: string, maxChars = MAX_AUDIT_FIELD_CHARS): string {
  // Most fields hold no control character: the test alone is cheaper than a replace with a callback.
  const clean = CONTROL_CHARACTER.test(text) ? text.replace(CONTROL_CHARACTERS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`) : text;
  return clean.length > maxChars ? `${clean.slice(0, maxChars)}…[${clean.length - maxChars} more]` : clean;
}

/**
 * The current time (or `date`) as `Date#toISOString` writes it (UTC, milliseconds, `Z`). Built from the UTC
 * getters because the first `toISOString()` in a process costs ≈ 0.7 ms (the getters ≈ 0.1 ms), and a
 * one-shot CLI call writes one record. The current time's text is kept for its millisecond: a busy host
 * writes several records in each (two per call).
 */
export function isoTimestamp(date?: Date): string {
  if (date !== undefined) return isoText(date);
  const nowMs = Date.now();
  if (nowMs !== lastStamp.ms) {
    lastStamp.ms = nowMs;
    lastStamp.text = isoText(new Date(nowMs));
  }
  return lastStamp.text;
}

const lastStamp = { ms: Number.NaN, text: "" };

function isoText(date: Date): string {
  const pad = (value: number, width = 2) => String(value).padStart(width, "0");
  return (
    `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}` +
    `T${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}.${pad(date.getUTCMilliseconds(), 3)}Z`
  );
}

export function matches(record: AuditRecord, query: AuditQuery): boolean {
  // A trail's announcement is the trail's own bookkeeping (verify reads it): asked for by kind only.
  if (record.kind === "trail" && query.kind !== "trail") return false;
  if (query.anima !== undefined && ("anima" in record ? record.anima : undefined) !== query.anima) return false;
  if (query.hostWide === true && "anima" in record && record.anima !== undefined) return false;
  if (query.kind !== undefined && record.kind !== query.kind) return false;
  if (query.tool !== undefined && ("tool" in record ? record.tool : undefined) !== query.tool) return false;
  if (query.outcome !== undefined && ("outcome" in record ? record.outcome : undefined) !== query.outcome) return false;
  if (query.callId !== undefined && ("callId" in record ? record.callId : undefined) !== query.callId) return false;
  if (query.sinceMs !== undefined && Date.parse(record.ts) < query.sinceMs) return false;
  if (query.untilMs !== undefined && Date.parse(record.ts) >= query.untilMs) return false;
  return true;
}
