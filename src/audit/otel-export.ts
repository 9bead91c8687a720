import type { Logger } from "@opentelemetry/api";
import type { LogRecordExporter, LoggerProvider } from "@opentelemetry/sdk-logs";
import type { HostConfig } from "../config.js";
import { maskUrlPassword } from "../operator-config.js";
import { type AuditEvent, type AuditLog, type AuditRecord, ForwardingAuditLog } from "./audit-log.js";
import { auditSeverity, recordSummary } from "./export.js";
import { RECORD_SCHEMA_VERSION } from "./trail.js";

/**
 * A copy of the audit trail for an OpenTelemetry collector (the operator's `audit_otlp_endpoint`): every
 * record the host appends is also emitted as an OTLP log record, over HTTP (JSON), by the official
 * OpenTelemetry SDK. The answer to an intruder who rewrites a whole trail on disk (trail.ts): the copy
 * is elsewhere by then. docs/audit-records.md gives the mapping.
 *
 * Invariants:
 * - a call never waits on it and never fails through it: `append` hands the record to the SDK's batching
 *   processor (or, while the SDK loads, to a bounded queue) and returns; nothing it does throws;
 * - the SDK is loaded on the first record (≈ 190 ms of modules), never by a host without an endpoint;
 * - problems (an unreachable collector, a full queue, a close that could not wait for the last batch) are
 *   told to the host's log once, and again only after an export succeeded in between;
 * - the trail on disk stays the record: what the collector missed, `audit events --since` exports.
 *
 * Records are copied as their trail wrote them (JsonlAuditLog's `onWritten`), so the copy carries `seq` and
 * `prev` too: a collector's copy of a trail can be checked along the same chain as the trail on disk.
 */
export interface AuditExportOptions {
  /** The collector's OTLP/HTTP logs URL (config.ts has added `/v1/logs` where needed). */
  endpoint: string;
  /** The host's log, told of problems. */
  onLog: HostConfig["onLog"];
  /** Longest a record waits before its batch is sent, ms. Default: 1,000. */
  scheduledDelayMs?: number;
  /** Longest a host's close waits for the last records to be sent, ms. Default: 2,000. */
  closeTimeoutMs?: number;
  /** Records waiting to be sent at most; beyond it records are not copied (and that is told). Default: 10,000. */
  maxQueuedRecords?: number;
  /** Resource attributes besides `service.name`, `host.name` and `process.pid`. */
  resource?: Record<string, string | number>;
}

/** OpenTelemetry's SeverityNumber values (the enum is in @opentelemetry/api, which is loaded only with the SDK). */
const SEVERITY_NUMBER = { INFO: 9, WARN: 13 } as const;
/** Per request, retries included (the exporter retries a refused or failed request with backoff within it). */
const REQUEST_TIMEOUT_MS = 5_000;
const MAX_BATCH = 512;
/** ExportResultCode.SUCCESS (@opentelemetry/core, which this module does not import). */
const EXPORT_SUCCESS = 0;

/**
 * An AuditLog whose trail copies each record it writes to an OpenTelemetry collector: `make` builds the
 * trail with the copy's `onWritten` hook (composition.ts), and closing this closes both.
 */
export class ExportingAuditLog extends ForwardingAuditLog {
  private readonly copy: OtelAuditCopy;

  constructor(make: (onWritten: (records: AuditRecord[]) => void) => AuditLog, options: AuditExportOptions) {
    const copy = new OtelAuditCopy(options);
    super(make((records) => copy.emitWritten(records)));
    this.copy = copy;
  }

  // flush is the trail's only (inherited): a reader must not wait on the collector (the copy is sent by
  // its own schedule, and on close).

  override async close(): Promise<void> {
    await Promise.all([this.inner.close(), this.copy.close()]);
  }
}

interface Waiting {
  event: AuditEvent;
  ts: string;
}

/** The OpenTelemetry side: the SDK, loaded on first use, and what is told of its troubles. */
class OtelAuditCopy {
  private state: "idle" | "loading" | "ready" | "off" = "idle";
  private readonly waiting: Waiting[] = [];
  private loading: Promise<void> | undefined;
  private provider: LoggerProvider | undefined;
  private logger: Logger | undefined;
  /** Records handed to the SDK whose export has not ended (the SDK drops silently beyond its queue: this counts first). */
  private inFlight = 0;
  private notCopied = 0;
  /** A problem was told, and no export succeeded since. */
  private troubled = false;
  private closed = false;
  private readonly maxQueued: number;
  private readonly where: string;

  constructor(private readonly options: AuditExportOptions) {
    this.maxQueued = Math.max(MAX_BATCH, options.maxQueuedRecords ?? 10_000);
    this.where = maskUrlPassword(options.endpoint);
  }

  /** Records as their trail wrote them (bounded, chained): each is copied, or counted as not copied. */
  emitWritten(records: AuditRecord[]): void {
    for (const written of records) {
      if (this.closed || this.state === "off") return;
      try {
        const { ts, ...event } = written;
        const record = { event: event as AuditEvent, ts };
        if (this.state === "ready") this.send(record);
        else if (this.waiting.length >= this.maxQueued) this.lost(1);
        else {
          this.waiting.push(record);
          this.loading ??= this.load();
        }
      } catch (error) {
        this.tell(`a record could not be copied (${messageOf(error)})`);
      }
    }
  }

  private async load(): Promise<void> {
    this.state = "loading";
    try {
      const [{ BatchLogRecordProcessor, LoggerProvider }, { OTLPLogExporter }, { resourceFromAttributes }] = await Promise.all([
        import("@opentelemetry/sdk-logs"),
        import("@opentelemetry/exporter-logs-otlp-http"),
        import("@opentelemetry/resources"),
      ]);
      const exporter = this.watched(new OTLPLogExporter({ url: this.options.endpoint, timeoutMillis: REQUEST_TIMEOUT_MS }));
      const processor = new BatchLogRecordProcessor({
        exporter,
        maxQueueSize: this.maxQueued,
        maxExportBatchSize: MAX_BATCH,
        scheduledDelayMillis: this.options.scheduledDelayMs ?? 1_000,
        exportTimeoutMillis: REQUEST_TIMEOUT_MS + 1_000,
      });
      const resource = resourceFromAttributes({
        "service.name": "animaworks-tool",
        "host.name": process.getBuiltinModule("node:os").hostname(),
        "process.pid": process.pid,
        ...this.options.resource,
      });
      this.provider = new LoggerProvider({ resource, processors: [processor] });
      this.logger = this.provider.getLogger("animaworks.audit", String(RECORD_SCHEMA_VERSION));
      this.state = "ready";
      for (const record of this.waiting.splice(0)) this.send(record);
    } catch (error) {
      this.state = "off";
      this.waiting.length = 0;
      this.tell(`the OpenTelemetry SDK could not be started (${messageOf(error)}); no record is copied until the host restarts`);
    }
  }

  /** The exporter, with each batch's outcome counted and a failure told. */
  private watched(exporter: LogRecordExporter): LogRecordExporter {
    return {
      export: (logs, done) => {
        exporter.export(logs, (result) => {
          this.inFlight = Math.max(0, this.inFlight - logs.length);
          if ((result.code as number) === EXPORT_SUCCESS) this.troubled = false;
          else this.tell(`sending ${logs.length} records failed (${messageOf(result.error)})`);
          done(result);
        });
      },
      shutdown: () => exporter.shutdown(),
      forceFlush: () => exporter.forceFlush(),
    };
  }

  private send({ event, ts }: Waiting): void {
    if (this.inFlight >= this.maxQueued) return this.lost(1);
    const record = { ...event, ts } as AuditRecord;
    const severity = auditSeverity(event);
    this.inFlight++;
    this.logger?.emit({
      eventName: `animaworks.audit.${event.kind}`,
      timestamp: new Date(ts),
      severityNumber: SEVERITY_NUMBER[severity],
      severityText: severity,
      body: recordSummary(record),
      attributes: attributesOf(event, ts),
    });
  }

  private lost(count: number): void {
    this.notCopied += count;
    this.tell(`the collector is behind: ${this.notCopied} records were not copied (at most ${this.maxQueued} wait)`);
  }

  /** Flushes what waits, waiting `closeTimeoutMs` at most: a host's close must not hang on a collector. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.loading === undefined) return;
    const sent = (async () => {
      await this.loading;
      await this.provider?.shutdown();
    })().then(
      () => true,
      () => false,
    );
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.options.closeTimeoutMs ?? 2_000)));
    const done = await Promise.race([sent, timeout]);
    clearTimeout(timer);
    if (!done || this.inFlight > 0) this.tell(`the last records may not have reached it before the host closed`);
  }

  /** Tells the host's log of a problem, once until an export succeeds again. */
  private tell(problem: string): void {
    if (this.troubled) return;
    this.troubled = true;
    try {
      this.options.onLog({
        level: "warn",
        logger: "animaworks.host",
        message: `audit export to the OpenTelemetry collector ${this.where}: ${problem}; the audit trail on disk has every record (audit events exports them)`,
      });
    } catch {
      // a broken log sink changes nothing
    }
  }
}

/**
 * Every field of the record as an attribute `animaworks.audit.<field>` (the record's own names, as in
 * its JSON line), plus its time and the schema version. Strings, numbers and booleans as they are,
 * lists of strings as arrays, anything else as JSON text.
 */
export function attributesOf(event: AuditEvent, ts: string): Record<string, string | number | boolean | string[]> {
  const attributes: Record<string, string | number | boolean | string[]> = { "animaworks.audit.v": RECORD_SCHEMA_VERSION, "animaworks.audit.ts": ts };
  for (const [field, value] of Object.entries(event)) {
    if (value === undefined) continue;
    const key = `animaworks.audit.${field}`;
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") attributes[key] = value;
    else if (Array.isArray(value) && value.every((item) => typeof item === "string")) attributes[key] = value;
    else attributes[key] = JSON.stringify(value);
  }
  return attributes;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : typeof error === "string" ? error : "unknown error";
}
