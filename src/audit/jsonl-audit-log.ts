import { basename, dirname, join, relative } from "node:path";
import {
  type AuditCoverage,
  type AuditEvent,
  type AuditKind,
  type AuditLog,
  type AuditQuery,
  type AuditRecord,
  boundEvent,
  ALWAYS_SECURITY_KINDS,
  isSecurityEvent,
  isoTimestamp,
} from "./audit-log.js";
import { isAnimaName } from "../registry/animas.js";
import { type PendingRecord, type TrailMemo, type TrailOptions, type TrailStart, type TrailTruncation, appendChained, generationsOf } from "./trail.js";
import { readHead } from "./trail-head.js";
import { firstRecordTs, trailFilesIn } from "./trail-files.js";
import { RecordRuns } from "./record-order.js";
import { type LineFilter, Pacer, readTrailRecords } from "./trail-read.js";
import { ReadTurns } from "./read-turns.js";

/**
 * The audit log on disk: a folder of chained trails (trail.ts), one pair per Anima and one for the host.
 *
 *   <dir>/host.jsonl, host.security.jsonl                  records of no known Anima (crashes, core reloads,
 *                                                          calls naming an Anima that does not exist)
 *   <dir>/animas/<anima>.jsonl, <anima>.security.jsonl     everything of one Anima
 *
 * Why a pair per Anima: retention is per trail, so one Anima's flood of calls rotates away only its own
 * records, never another's; and security records (denials, refusals, crashes, policy changes) have a trail
 * of their own that ordinary records never rotate, so a tool cannot flood its own denials away either.
 * Each record is written to exactly one trail; `read` merges them, oldest first.
 *
 * Records are buffered and written at most `flushIntervalMs` later, in one locked append per trail, so a
 * call never waits on the disk. Every record is bounded first (`boundEvent`). A record that cannot be
 * written stays buffered (up to `maxBufferedRecords` per trail); what is dropped beyond that is counted and
 * written as an `audit_gap` record when the trail can be written again: nothing is lost unseen.
 */
export interface JsonlAuditLogOptions {
  /** Rotate a trail's file when it reaches this size, in bytes. Default: 10 MiB. */
  maxBytes?: number;
  /** Rotated files kept per trail besides the current one. Default: 3. */
  keepFiles?: number;
  /** Longest time a record waits in memory before it is written, in ms. Default: 20. */
  flushIntervalMs?: number;
  /** Records kept in memory per trail while it cannot be written; older ones are dropped and counted. Default: 50,000. */
  maxBufferedRecords?: number;
  /**
   * Records one `read` may hold (≈ 420 bytes of memory each): a read matching more rejects with
   * `AuditReadTooLarge`, asking for a narrower query, instead of growing a shared host without bound (a
   * full trail pair of one Anima holds ≈ 280,000). Default: 1,000,000.
   */
  maxReadRecords?: number;
  /**
   * Records that readers still using theirs (`readWith`: `audit events` streaming to a client that may
   * not read) may hold before a further `readWith` waits (what they hold stays below this plus one read).
   * Default: `maxReadRecords`.
   */
  maxHeldRecords?: number;
  /** How long a `readWith` waits for room before it rejects with `AuditReadersBusy`, ms. Default: 30,000. */
  maxHeldWaitMs?: number;
  /**
   * Whether a name is an Anima of this data dir (its records get a trail of their own). Names it refuses go
   * to the host trail, so a caller cannot make files for made-up Animas. Default: any plain name.
   */
  isAnima?: (name: string) => boolean;
  /**
   * Given each batch of records as written to a trail (with `v`, `seq` and `prev`), e.g. to copy them to a
   * collector (otel-export.ts). Must not throw (what it throws is ignored). Default: none.
   */
  onWritten?: (records: AuditRecord[]) => void;
  /**
   * Told when records could not be written (a read-only or full data dir), once until a write succeeds
   * again: the records wait in memory, and the operator must hear of it. Default: none.
   */
  onWriteError?: (error: unknown, file: string) => void;
}

/**
 * Kinds found only in security trails: those always security events, but for `audit_gap` (written into
 * whichever trail lost records), and trail announcements (always in the host's security trail).
 */
const SECURITY_KINDS: ReadonlySet<string> = new Set<AuditKind>([...[...ALWAYS_SECURITY_KINDS].filter((kind) => kind !== "audit_gap"), "trail"]);

/** How soon a write blocked by another process's lock is tried again, ms. */
const LOCK_RETRY_MS = 5;

interface PendingTrail {
  records: PendingRecord[];
  /** Records dropped because the buffer was full, not yet reported. */
  lost: number;
}

export class JsonlAuditLog implements AuditLog {
  private readonly trail: TrailOptions;
  private readonly flushIntervalMs: number;
  private readonly maxBuffered: number;
  private readonly maxReadRecords: number;
  /** Reads one at a time, and the records readers still hold (read-turns.ts). */
  private readonly turns: ReadTurns;
  private readonly isAnima: (name: string) => boolean;
  private readonly onWriteError: ((error: unknown, file: string) => void) | undefined;
  private readonly onWritten: ((records: AuditRecord[]) => void) | undefined;
  private readonly pending = new Map<string, PendingTrail>();
  /** Animas known to have trails of their own (only positive answers are kept: a made-up name costs a lookup, not memory). */
  private readonly animaBases = new Map<string, string>();
  /** What this writer left of each trail it wrote (trail.ts): an append that finds it so skips re-reading it. */
  private readonly memos = new Map<string, TrailMemo>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private failing = false;

  constructor(
    readonly dir: string,
    options: JsonlAuditLogOptions = {},
  ) {
    this.trail = { maxBytes: options.maxBytes ?? 10 * 1024 * 1024, keepFiles: Math.max(1, options.keepFiles ?? 3) };
    this.flushIntervalMs = options.flushIntervalMs ?? 20;
    this.maxBuffered = options.maxBufferedRecords ?? 50_000;
    this.maxReadRecords = options.maxReadRecords ?? 1_000_000;
    this.turns = new ReadTurns((query) => this.readNow(query), {
      maxHeldRecords: options.maxHeldRecords ?? this.maxReadRecords,
      maxHeldWaitMs: options.maxHeldWaitMs ?? 30_000,
    });
    this.isAnima = options.isAnima ?? ((name) => isAnimaName(name));
    this.onWriteError = options.onWriteError;
    this.onWritten = options.onWritten;
  }

  /** The trail file an event goes to. */
  fileFor(event: AuditEvent): string {
    // A trail's announcement goes to the host's security trail, which the Animas' volume never rotates.
    if (event.kind === "trail") return join(this.dir, "host.security.jsonl");
    return `${this.baseOf("anima" in event ? event.anima : undefined)}${isSecurityEvent(event) ? ".security" : ""}.jsonl`;
  }

  private baseOf(anima: string | undefined): string {
    if (anima === undefined) return join(this.dir, "host");
    let base = this.animaBases.get(anima);
    if (base === undefined && isAnimaName(anima) && this.isAnima(anima)) this.animaBases.set(anima, (base = join(this.dir, "animas", anima)));
    return base ?? join(this.dir, "host");
  }

  append(event: AuditEvent): void {
    if (this.closed) return;
    const file = this.fileFor(event);
    this.enqueue(file, { ts: isoTimestamp(), event: boundEvent(event) });
  }

  /**
   * What the writer found of a trail with no head, under its lock (trail.ts). A new trail (its first
   * records just written) is announced, file by file, in the host's security trail: verify then misses no
   * file of one (deleting one file of an Anima's pair shows), and a trail started twice was deleted in
   * between (verify reports it). Deciding under the lock makes one announcement per start, whatever
   * processes race to write it. The host's security trail cannot announce itself: verify reports it
   * missing whenever another trail exists. A trail whose head was lost while its files held records gets
   * a `trail_head_lost` record in its security trail.
   */
  private started(start: TrailStart): void {
    const anima = animaOfTrail(this.dir, start.file);
    const trail = relative(this.dir, start.file);
    if ("rewritten" in start) {
      this.append({ kind: "trail_rewritten", ...(anima !== undefined ? { anima } : {}), trail, headSeq: start.headSeq, fileSeq: start.fileSeq });
      return;
    }
    if ("headLost" in start) {
      this.append({ kind: "trail_head_lost", ...(anima !== undefined ? { anima } : {}), trail, fileSeq: start.fileSeq });
      return;
    }
    const hostSecurity = join(this.dir, "host.security.jsonl");
    if (start.file !== hostSecurity)
      this.enqueue(hostSecurity, { ts: isoTimestamp(), event: { kind: "trail", ...(anima !== undefined ? { anima } : {}), file: trail } });
  }

  private enqueue(file: string, record: PendingRecord): void {
    let trail = this.pending.get(file);
    if (!trail) this.pending.set(file, (trail = { records: [], lost: 0 }));
    trail.records.push(record);
    if (trail.records.length > this.maxBuffered) {
      trail.records.shift();
      trail.lost++;
    }
    this.schedule(this.flushIntervalMs);
  }

  private schedule(delayMs: number): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.writeBuffered();
    }, delayMs);
    this.timer.unref();
  }

  /** Writes every trail it can; true when nothing is left waiting on a lock. */
  private writeBuffered(): boolean {
    let blocked = false;
    for (const [file, trail] of this.pending) {
      if (trail.records.length === 0 && trail.lost === 0) continue;
      const records = trail.lost > 0 ? [gapRecord(trail.lost), ...trail.records] : trail.records;
      try {
        const truncations: TrailTruncation[] = [];
        const starts: TrailStart[] = [];
        const written = appendChained(
          file,
          this.trail,
          records,
          this.onWritten !== undefined,
          this.memos,
          (truncation) => truncations.push(truncation),
          (start) => starts.push(start),
        );
        if (!written) {
          blocked = true;
          continue;
        }
        this.pending.delete(file);
        // After the delete: a record for this very trail (a security trail found cut) is a new batch, which
        // this loop reaches (a Map visits keys added while it is walked).
        for (const truncation of truncations) this.append(truncationRecord(this.dir, truncation));
        for (const start of starts) this.started(start);
        this.failing = false;
        try {
          this.onWritten?.(written as AuditRecord[]);
        } catch {
          // a copy's failure is the copy's to report; the trail is written
        }
      } catch (error) {
        // The audit log must never take a call down with it: the records wait (bounded), and the operator hears of it once.
        if (!this.failing) {
          this.failing = true;
          try {
            this.onWriteError?.(error, file);
          } catch {
            // a broken report sink changes nothing
          }
        }
      }
    }
    if (blocked && !this.closed) this.schedule(LOCK_RETRY_MS);
    return !blocked;
  }

  /**
   * The records matching `query`, oldest first (record-order.ts), read trail by trail in paced slices
   * (trail-read.ts): a long-running host's event loop gets a turn every few thousand lines, whatever the
   * trails hold. A record not matching is never kept, and a line that cannot match is not even parsed.
   */
  read(query: AuditQuery = {}): Promise<AuditRecord[]> {
    return this.turns.read(query);
  }

  readWith<T>(query: AuditQuery, use: (records: AuditRecord[]) => Promise<T>): Promise<T> {
    return this.turns.readWith(query, use);
  }

  private async readNow(query: AuditQuery): Promise<AuditRecord[]> {
    await this.flush();
    // Only the trails that can hold what is asked for: a security-only kind lives in the security trails.
    const securityOnly = query.kind !== undefined && SECURITY_KINDS.has(query.kind);
    const mustHold = [
      query.kind !== undefined ? `"kind":${JSON.stringify(query.kind)}` : [],
      query.callId !== undefined ? `"callId":${JSON.stringify(query.callId)}` : [],
    ].flat();
    const filter: LineFilter = { query, mustHold, maxRecords: this.maxReadRecords };
    // Records naming no Anima are only ever in the host's trails.
    const files = query.hostWide === true ? this.trailFiles(undefined).filter((file) => dirname(file) === this.dir) : this.trailFiles(query.anima);
    const runs = new RecordRuns();
    const pacer = new Pacer();
    for (const file of files) {
      if (securityOnly && !file.endsWith(".security.jsonl")) continue;
      await readTrailRecords(generationsOf(file, this.trail.keepFiles), filter, runs, pacer);
    }
    return runs.merged(pacer.turn);
  }

  async coverage(anima?: string): Promise<AuditCoverage> {
    await this.flush();
    let oldestTs: string | undefined;
    let rotatedAway = false;
    // An Anima's coverage is its own trails' (the host's trail holds records of other Animas and none).
    for (const file of this.trailFiles(anima, true)) {
      if ((readHead(file)?.droppedThroughSeq ?? 0) > 0) rotatedAway = true;
      for (const generation of generationsOf(file, this.trail.keepFiles)) {
        const first = firstRecordTs(generation);
        if (first === undefined) continue;
        if (oldestTs === undefined || first < oldestTs) oldestTs = first;
        break;
      }
    }
    return { ...(oldestTs !== undefined ? { oldestTs } : {}), rotatedAway };
  }

  /** Every trail's current file (for one Anima: its own and the host's; `ownOnly`: its own alone, when it has one). */
  trailFiles(anima?: string, ownOnly = false): string[] {
    const host = [join(this.dir, "host.jsonl"), join(this.dir, "host.security.jsonl")];
    if (anima !== undefined) {
      const base = this.baseOf(anima);
      if (!base.startsWith(join(this.dir, "animas"))) return host;
      return ownOnly ? [`${base}.jsonl`, `${base}.security.jsonl`] : [`${base}.jsonl`, `${base}.security.jsonl`, ...host];
    }
    return trailFilesIn(this.dir);
  }

  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    // Another process holding a trail's lock holds it for one append: wait for it, boundedly.
    for (let attempt = 0; !this.writeBuffered() && attempt < 2_000; attempt++) await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_MS));
  }

  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** The Anima whose trail `file` is (undefined for the host's trails). */
function animaOfTrail(dir: string, file: string): string | undefined {
  return dirname(file) === join(dir, "animas") ? basename(file).replace(/(\.security)?\.jsonl$/, "") : undefined;
}

/**
 * The security record of a trail found cut behind its head (trail.ts): in its Anima's security trail (the
 * host's for the host's trails), which the next flush writes.
 */
function truncationRecord(dir: string, truncation: TrailTruncation): AuditEvent {
  const anima = animaOfTrail(dir, truncation.file);
  return {
    kind: "trail_truncated",
    ...(anima !== undefined ? { anima } : {}),
    trail: relative(dir, truncation.file),
    headSeq: truncation.headSeq,
    fileSeq: truncation.fileSeq,
    headSizeBytes: truncation.headSizeBytes,
    fileSizeBytes: truncation.fileSizeBytes,
  };
}

function gapRecord(lost: number): PendingRecord {
  const event: AuditEvent = { kind: "audit_gap", lost, reason: "the trail could not be written and the records waiting for it passed the buffer's bound" };
  return { ts: isoTimestamp(), event: event };
}
