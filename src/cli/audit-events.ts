import { type AuditKind, type AuditQuery, AuditReadTooLarge, AuditReadersBusy } from "../audit/audit-log.js";
import { AUDIT_KINDS, AUDIT_OUTCOMES, type ExportFormat, recordChunks } from "../audit/export.js";
import { verifyAuditDirYielding } from "../audit/verify.js";
import { type TrailIntegrity, brokenFindingLines, trailIntegrity } from "../audit/verify-text.js";
import { ToolHostError } from "../errors.js";
import type { ToolHost } from "../host-api.js";
import { joinReportLines } from "../terminal-text.js";
import { scanArgs } from "./options.js";
import type { Output } from "./output.js";

export const AUDIT_EVENTS_USAGE = `Usage: animaworks-tool audit events [--format jsonl|csv] [--anima NAME] [--tool NAME] [--kind KIND] [--outcome OUTCOME]
                                    [--since DATE|12h] [--until DATE|12h] [--call ID]
  Streams the audit records, oldest first: JSON lines (default; every field) or CSV (fixed columns).
  --kind: ${AUDIT_KINDS.join(", ")}
  --outcome: ${AUDIT_OUTCOMES.join(", ")}
  --since / --until: an ISO date, or a duration back from now (30m, 12h, 7d); --until is exclusive
  --call: every record of one call (the call_id of a -j envelope, _meta["animaworks/call_id"] over MCP)
  The trails' hash chains are checked too (audit verify): when they do not verify, stderr says so
  after the records, which may then include inserted or edited ones (the exit code stays 0)
  Record schema and CSV columns: docs/audit-records.md`;

const OPTIONS = {
  "--format": "value",
  "--tool": "value",
  "--kind": "value",
  "--outcome": "value",
  "--since": "value",
  "--until": "value",
  "--call": "value",
} as const;

export interface EventsRequest {
  format: ExportFormat;
  query: AuditQuery;
}

/**
 * `animaworks-tool audit events`: the records of the audit trails (every Anima's and the host's, merged
 * oldest first), filtered, written a chunk at a time. `--anima` and `-j` are the CLI's own options (main
 * hands `anima` over); `-j` changes nothing, JSON lines being JSON already.
 */
export async function runAuditEvents(host: ToolHost, argv: string[], anima: string | undefined, out: Output): Promise<number> {
  const request = parseEventsArgs(argv, anima);
  // The records stay counted as held until streamed (readWith): a client that stops reading keeps them.
  const integrity = await host.audit
    .readWith(request.query, async (records) => {
      // Walked after the records were read, so that every record streamed was in the trails verified. A
      // JSON line or CSV row has no room for a verdict, and the report's own check (`audit`) is not in an
      // export: an auditor relying on one must hear when it holds records the chain does not vouch for.
      const verified = trailIntegrity(await verifyAuditDirYielding(host.config.auditDir, undefined, request.query.anima));
      // A chunk at a time, waiting while a running host's client has not taken what came before (reply-writer.ts).
      for (const chunk of recordChunks(records, request.format)) {
        out.stdout(chunk);
        await out.drained?.();
      }
      return verified;
    })
    .catch((error: unknown) => {
      if (error instanceof AuditReadersBusy) {
        throw new ToolHostError(
          "Busy",
          `audit events: ${error.message}`,
          "try again once those runs end (a client that stopped reading is cut after a while), or narrow the query",
        );
      }
      if (!(error instanceof AuditReadTooLarge)) throw error;
      throw new ToolHostError(
        "InvalidArguments",
        `audit events: ${error.message}`,
        "narrow it: a time window (--since, --until), an Anima (--anima), a tool, a kind or an outcome; windows one after the other give everything",
      );
    });
  if (!integrity.ok) out.stderr(joinReportLines(brokenTrailLines(integrity)));
  return 0;
}

function brokenTrailLines(integrity: TrailIntegrity): string[] {
  return [
    `Warning: the audit trails do not verify (${integrity.broken} findings): records above may have been inserted, edited or removed; \`animaworks-tool audit verify\` lists where`,
    ...brokenFindingLines(integrity),
  ];
}

/** The request `argv` (after `events`) makes; InvalidArguments with the usage for anything else. */
export function parseEventsArgs(argv: string[], anima: string | undefined, now = Date.now()): EventsRequest {
  const query: AuditQuery = anima !== undefined ? { anima } : {};
  let format: ExportFormat = "jsonl";
  for (const token of scanArgs(argv, OPTIONS)) {
    if (token.kind !== "option") throw invalid(`audit events: unexpected argument "${argv[token.index]}"`);
    const value = token.value;
    if (value === undefined || value === "") throw invalid(`audit events: ${token.name} needs a value`);
    switch (token.name) {
      case "--format":
        if (value !== "jsonl" && value !== "csv") throw invalid(`audit events: --format must be jsonl or csv, not ${JSON.stringify(value)}`);
        format = value;
        break;
      case "--tool":
        query.tool = value;
        break;
      case "--kind":
        if (!(AUDIT_KINDS as readonly string[]).includes(value))
          throw invalid(`audit events: --kind must be one of ${AUDIT_KINDS.join(", ")}, not ${JSON.stringify(value)}`);
        query.kind = value as AuditKind;
        break;
      case "--outcome":
        if (!(AUDIT_OUTCOMES as readonly string[]).includes(value))
          throw invalid(`audit events: --outcome must be one of ${AUDIT_OUTCOMES.join(", ")}, not ${JSON.stringify(value)}`);
        query.outcome = value;
        break;
      case "--since":
        query.sinceMs = parseTime("--since", value, now);
        break;
      case "--until":
        query.untilMs = parseTime("--until", value, now);
        break;
      case "--call":
        query.callId = value;
        break;
    }
  }
  if (query.sinceMs !== undefined && query.untilMs !== undefined && query.sinceMs > query.untilMs) throw invalid("audit events: --since is after --until");
  return { format, query };
}

/**
 * An ISO date, or a duration back from now (`30m`, `12h`, `7d`): what `audit --since` takes (audit.ts
 * `parseSince`, which this module cannot import: audit.ts loads this one).
 */
export function parseTime(flag: string, value: string, now: number): number {
  const duration = /^(\d+)\s*([smhd])$/.exec(value.trim());
  if (duration) {
    const unitMs = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[duration[2] as "s" | "m" | "h" | "d"];
    return now - Number(duration[1]) * unitMs;
  }
  const parsed = Date.parse(value);
  if (Number.isNaN(parsed)) throw invalid(`audit events: ${flag} "${value}" is neither a date nor a duration like 12h`);
  return parsed;
}

function invalid(message: string): ToolHostError {
  return new ToolHostError("InvalidArguments", message, AUDIT_EVENTS_USAGE);
}
