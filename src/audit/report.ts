import type { HostConfig } from "../config.js";
import type { ToolListing } from "../registry/listing.js";
import { type Permissions, loadPermissions } from "../policy/permissions.js";
import { cordonMates, cordonOf } from "../isolation/scheduling/cordons.js";
import { type CredentialInventory, credentialInventory, readableBy } from "../credentials/inventory.js";
import type { AuditCoverage, AuditLog, AuditRecord } from "./audit-log.js";
import { OpenCalls, type UnfinishedCall } from "./interrupted.js";
import { type AnimaLeastPrivilege, PrivilegeUse } from "./least-privilege.js";
import { counted } from "../terminal-text.js";

/** What a tool did, per tool, in an Anima's audit report. */
export interface ToolActivity {
  tool: string;
  calls: number;
  ok: number;
  /** Error type → count (Timeout, MemoryLimit, SandboxCrashed, ExecutionError…). */
  errors: Record<string, number>;
  /** Capability operation → count of uses (`fs.readFile`, `fetch`, `credential`). */
  used: Record<string, number>;
  /** Requests of the tool the policy refused, all counted. */
  denied: number;
  /** The last `MAX_DENIALS_KEPT` of them, oldest first (a flood of denials must not make the report unbounded). */
  denials: Array<{ ts: string; operation: string; target: string; reason: string }>;
}

/** Denials listed per tool in a report; `denied` counts them all. */
export const MAX_DENIALS_KEPT = 100;

/** One Anima's sandbox policy audit (`auditReport`; built by audit/report.ts): the policy in force and what its tools did. */
export interface AnimaReport {
  anima: string;
  policy: {
    source: Permissions["source"] | "invalid";
    /** Set when the permissions file is broken: everything that depends on it is refused. */
    problem?: string;
    toolCreation?: Permissions["toolCreation"];
    network?: Permissions["sandbox"]["network"];
    allowInternalHosts: string[];
    fsLimits: HostConfig["fsLimits"];
    allowedEnvironment: string[];
    timeoutMs: number;
    memoryLimitMb: number;
    /**
     * The cordon its tools run in (src/isolation/scheduling/cordons.ts): its sandbox processes run no
     * code of any Anima outside it. `anima:<name>` when it is a cordon of its own.
     */
    cordon: string;
    /** The other Animas named in its cordon's group ("all" when every Anima shares one). */
    cordonMates: string[] | "all";
  };
  tools: Array<{ name: string; origin: string; status: string; error?: string }>;
  activity: ToolActivity[];
  loadErrors: Array<{ ts: string; tool: string; message: string }>;
  /** Tools of this Anima loaded new, changed, removed or failed by a refresh, a watcher or a share, oldest first. */
  reloads: Array<{ ts: string; tool: string; origin: string; change: string; trigger?: string; message?: string }>;
  /** Records of the period read (any kind). */
  records: number;
  /** Which period its kept records cover, and whether the report is incomplete for the period asked. */
  coverage: ReportCoverage;
  /** Calls started in a host process that is gone, with no end recorded (audit/interrupted.ts). */
  interrupted: UnfinishedCall[];
  /** Calls started in a host process still running, not ended yet. */
  inFlight: UnfinishedCall[];
  /** `sandbox_crash` records: a sandbox process that crashed, or broke the protocol and was killed. */
  violations: Array<{ ts: string; tool?: string; message: string }>;
  /** Management commands refused to it (a share without the permission, a write outside its folder). */
  refusals: Array<{ ts: string; command: string; target: string; errorType: string; reason: string }>;
  /** Each grant beside its use (audit/least-privilege.ts). */
  leastPrivilege: AnimaLeastPrivilege;
  /** Its permissions as they changed (`policy_change` records), oldest first. */
  policyHistory: PolicyChange[];
  /** The versions (bundle hashes) of each tool its calls ran, by first use. */
  versions: Array<{ tool: string; version: string; firstTs: string; lastTs: string; calls: number }>;
  /** Denials, failed calls, violations, refusals and interrupted calls, oldest first: the newest `MAX_TIMELINE`. */
  timeline: TimelineEvent[];
  /** Timeline events left out (older than those kept). */
  timelineDropped: number;
}

export interface ReportCoverage extends AuditCoverage {
  /** The start of the period asked (`--since`), if any. */
  since?: string;
  /** Records the writers dropped (`audit_gap` records of the period). */
  lostRecords: number;
  /** Set when the report is incomplete for the period asked: older records rotated away, or records lost. */
  warning?: string;
  /** Said when the period reaches before the oldest kept record and nothing was rotated away (the trail began then). */
  note?: string;
}

export type PolicyChange = { ts: string; scope: "permissions" | "operator"; from?: string; to: string; before?: string; after: string; changedAt?: string };

export interface TimelineEvent {
  ts: string;
  kind: "denial" | "failure" | "violation" | "refusal" | "interrupted";
  tool?: string;
  /** What was refused or failed: an operation and its target, an error type, a command. */
  what: string;
  /** Why, as recorded (a denial's or a refusal's reason). */
  reason?: string;
}

/** Timeline events kept per Anima (a flood of denials must not make the report unbounded). */
export const MAX_TIMELINE = 500;
/** Records an Anima's report walks between two turns of the event loop: a few milliseconds. */
const RECORDS_PER_TURN = 10_000;

/**
 * The sandbox policy auditing report: per Anima, the policy in force and what its tools actually did.
 * Built from plain data (the audit records, the tool listing, the permissions file); it never reads a
 * secret value, because none is ever recorded. Its types are the host's public API (host-api.ts).
 */

/** What `buildAnimaReport` needs beside the records: read once for every Anima of a report. */
export interface ReportContext {
  coverage?: AuditCoverage;
  sinceMs?: number;
  inventory?: CredentialInventory;
  isAlive?: (pid: number) => boolean;
}

/**
 * The reports of `names`, one Anima at a time (only one Anima's records are held at once); `resolve`
 * gives an Anima's folder and tool listing (the host's view).
 */
export async function buildAnimaReports(
  config: HostConfig,
  audit: Pick<AuditLog, "read" | "coverage">,
  names: readonly string[],
  options: { sinceMs?: number },
  resolve: (anima: string) => Promise<{ dir: string; listing: ToolListing }>,
): Promise<AnimaReport[]> {
  const inventory = await credentialInventory(config.dataDir, { allowed: config.allowedEnvironment, set: config.environment });
  const reports: AnimaReport[] = [];
  for (const name of names) {
    const { dir, listing } = await resolve(name);
    const records = await audit.read({ anima: name, ...(options.sinceMs !== undefined ? { sinceMs: options.sinceMs } : {}) });
    const context: ReportContext = { coverage: await audit.coverage(name), inventory, ...(options.sinceMs !== undefined ? { sinceMs: options.sinceMs } : {}) };
    reports.push(await buildAnimaReport(config, name, dir, listing, records, context));
  }
  return reports;
}

export async function buildAnimaReport(
  config: HostConfig,
  anima: string,
  animaDir: string,
  listing: ToolListing,
  records: AuditRecord[],
  context: ReportContext = {},
): Promise<AnimaReport> {
  let policy: AnimaReport["policy"];
  const common = {
    allowInternalHosts: config.allowInternalHosts,
    fsLimits: config.fsLimits,
    allowedEnvironment: config.allowedEnvironment,
    timeoutMs: config.timeoutMs,
    memoryLimitMb: config.memoryLimitMb,
    cordon: cordonOf(config.cordons, anima),
    cordonMates: cordonMates(config.cordons, anima),
  };
  try {
    const permissions = await loadPermissions(animaDir);
    policy = { source: permissions.source, toolCreation: permissions.toolCreation, network: permissions.sandbox.network, ...common };
  } catch (error) {
    policy = { source: "invalid", problem: error instanceof Error ? error.message : String(error), ...common };
  }
  const byTool = new Map<string, ToolActivity>();
  const activity = (tool: string): ToolActivity => {
    let entry = byTool.get(tool);
    if (!entry) byTool.set(tool, (entry = { tool, calls: 0, ok: 0, errors: {}, used: {}, denied: 0, denials: [] }));
    return entry;
  };
  const loadErrors: AnimaReport["loadErrors"] = [];
  const reloads: AnimaReport["reloads"] = [];
  const violations: AnimaReport["violations"] = [];
  const refusals: AnimaReport["refusals"] = [];
  const policyHistory: PolicyChange[] = [];
  const versions = new Map<string, AnimaReport["versions"][number]>();
  const timeline: TimelineEvent[] = [];
  const deny = (entry: ToolActivity, denial: ToolActivity["denials"][number]): void => {
    entry.denied++;
    entry.denials.push(denial);
    if (entry.denials.length >= 2 * MAX_DENIALS_KEPT) entry.denials.splice(0, entry.denials.length - MAX_DENIALS_KEPT);
  };
  let lostRecords = 0;
  let unverified = 0;
  const open = new OpenCalls();
  const privileges = new PrivilegeUse({
    network: policy.network,
    allowInternalHosts: config.allowInternalHosts,
    readable: context.inventory ? readableBy(context.inventory, anima) : [],
  });
  let walked = 0;
  for (const record of records) {
    // One Anima's trails hold up to ≈ 280,000 records: walked in one piece, ≈ 0.5 s of the shared
    // daemon's event loop per Anima per `audit` run (which an Anima can ask for, over records it made).
    if (++walked % RECORDS_PER_TURN === 0) await new Promise((resolve) => setImmediate(resolve));
    open.see(record);
    privileges.see(record);
    if (record.unverified) unverified++;
    switch (record.kind) {
      case "call": {
        const entry = activity(record.tool);
        entry.calls++;
        if (record.outcome === "ok") entry.ok++;
        else {
          entry.errors[record.errorType ?? "ExecutionError"] = (entry.errors[record.errorType ?? "ExecutionError"] ?? 0) + 1;
          timeline.push({ ts: record.ts, kind: "failure", tool: record.tool, what: record.errorType ?? "ExecutionError" });
        }
        if (record.version) {
          const key = `${record.tool}\0${record.version}`;
          const seen = versions.get(key);
          if (seen) {
            seen.calls++;
            seen.lastTs = record.ts;
          } else versions.set(key, { tool: record.tool, version: record.version, firstTs: record.ts, lastTs: record.ts, calls: 1 });
        }
        break;
      }
      case "capability": {
        const entry = activity(record.tool);
        entry.used[record.operation] = (entry.used[record.operation] ?? 0) + 1;
        if (record.outcome === "denied") {
          const reason = marked(record, record.reason ?? "");
          deny(entry, { ts: record.ts, operation: record.operation, target: record.target, reason });
          timeline.push({ ts: record.ts, kind: "denial", tool: record.tool, what: `${record.operation} ${record.target}`, ...(reason ? { reason } : {}) });
        }
        break;
      }
      case "credential": {
        const entry = activity(record.tool);
        entry.used["credential"] = (entry.used["credential"] ?? 0) + 1;
        if (record.outcome === "denied") {
          // The record names what was refused: another Anima's name, or a variable outside allowed_environment.
          const reason = marked(record, record.reason ?? "another Anima's credential");
          deny(entry, { ts: record.ts, operation: "credential", target: record.name, reason: `PermissionDenied: ${reason}` });
          timeline.push({ ts: record.ts, kind: "denial", tool: record.tool, what: `credential ${record.name}`, reason });
        }
        break;
      }
      case "sandbox_crash":
        violations.push({ ts: record.ts, ...(record.tool !== undefined ? { tool: record.tool } : {}), message: record.message });
        timeline.push({ ts: record.ts, kind: "violation", ...(record.tool !== undefined ? { tool: record.tool } : {}), what: record.message });
        break;
      case "refusal":
        refusals.push({ ts: record.ts, command: record.command, target: record.target, errorType: record.errorType, reason: record.reason });
        timeline.push({ ts: record.ts, kind: "refusal", what: `${record.command} ${record.target}`, reason: `${record.errorType}: ${record.reason}` });
        break;
      case "policy_change":
        policyHistory.push(policyChangeOf(record));
        break;
      case "audit_gap":
        lostRecords += record.lost;
        break;
      case "load_error":
        loadErrors.push({ ts: record.ts, tool: record.tool, message: record.message });
        break;
      case "reload":
        reloads.push(reloadOf(record));
        break;
      default:
        break;
    }
  }
  const unfinished = open.settle(context.isAlive);
  for (const call of unfinished.interrupted)
    timeline.push({ ts: call.startedAt, kind: "interrupted", tool: call.tool, what: `${call.schema} (pid ${call.pid})` });
  timeline.sort((a, b) => (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0));
  const kept = timeline.slice(-MAX_TIMELINE);
  return {
    anima,
    policy,
    tools: listing.tools.map((tool) => ({ name: tool.name, origin: tool.origin, status: tool.status, ...(tool.error ? { error: tool.error.message } : {}) })),
    activity: [...byTool.values()].sort((a, b) => a.tool.localeCompare(b.tool)).map((a) => ({ ...a, denials: a.denials.slice(-MAX_DENIALS_KEPT) })),
    loadErrors,
    reloads,
    records: records.length,
    coverage: reportCoverage(context, lostRecords, unverified),
    ...unfinished,
    violations,
    refusals,
    leastPrivilege: privileges.result(),
    policyHistory,
    versions: [...versions.values()].sort((a, b) => a.tool.localeCompare(b.tool) || a.firstTs.localeCompare(b.firstTs)),
    timeline: kept,
    timelineDropped: timeline.length - kept.length,
  };
}

/** What holds for every Anima: the operator's policy changes and the reloads of core and shared tools (records naming no Anima). */
export interface HostHistory {
  policyHistory: PolicyChange[];
  reloads: AnimaReport["reloads"];
}

export async function hostHistory(audit: Pick<AuditLog, "read">, period: { sinceMs?: number }): Promise<HostHistory> {
  const changes = await audit.read({ kind: "policy_change", hostWide: true, ...period });
  const reloads = await audit.read({ kind: "reload", hostWide: true, ...period });
  return {
    policyHistory: changes.flatMap((r) => (r.kind === "policy_change" ? [policyChangeOf(r)] : [])),
    reloads: reloads.flatMap((r) => (r.kind === "reload" ? [reloadOf(r)] : [])),
  };
}

function policyChangeOf(record: Extract<AuditRecord, { kind: "policy_change" }>): PolicyChange {
  return {
    ts: record.ts,
    scope: record.scope,
    ...(record.from !== undefined ? { from: record.from } : {}),
    to: record.to,
    ...(record.before !== undefined ? { before: record.before } : {}),
    after: record.after,
    ...(record.changedAt !== undefined ? { changedAt: record.changedAt } : {}),
  };
}

function reloadOf(record: Extract<AuditRecord, { kind: "reload" }>): AnimaReport["reloads"][number] {
  return {
    ts: record.ts,
    tool: record.tool,
    origin: record.origin,
    change: record.change,
    ...(record.trigger ? { trigger: record.trigger } : {}),
    ...(record.message !== undefined ? { message: record.message } : {}),
  };
}

/** A denial's reason, said to be unverified when its record is not chained (`AuditRecord.unverified`). */
function marked(record: AuditRecord, reason: string): string {
  return record.unverified ? `UNVERIFIED (not chained, likely inserted): ${reason}` : reason;
}

/**
 * The period the report covers. Incomplete when older records were rotated away and the period asked
 * reaches before the oldest kept one (without `--since`, the period is everything), or when a writer
 * dropped records (`audit_gap`); and a warning when it counts records that are not chained (inserted).
 */
export function reportCoverage(context: Pick<ReportContext, "coverage" | "sinceMs">, lostRecords = 0, unverifiedRecords = 0): ReportCoverage {
  const { oldestTs, rotatedAway = false } = context.coverage ?? {};
  const since = context.sinceMs !== undefined ? new Date(context.sinceMs).toISOString() : undefined;
  const reachesBefore = oldestTs !== undefined && (context.sinceMs === undefined || context.sinceMs < Date.parse(oldestTs));
  const warnings: string[] = [];
  let note: string | undefined;
  if (rotatedAway && (reachesBefore || oldestTs === undefined)) {
    warnings.push(`records before ${oldestTs ?? "now"} were rotated away: this report is incomplete for that period`);
  } else if (reachesBefore && since !== undefined) {
    note = `--since ${since} reaches before the oldest kept record (${oldestTs}); nothing was rotated away: the trail began then`;
  }
  if (lostRecords > 0)
    warnings.push(
      `${counted(lostRecords, "record")} ${lostRecords === 1 ? "was" : "were"} lost before they could be written (audit_gap): this report is incomplete`,
    );
  if (unverifiedRecords > 0)
    warnings.push(
      `${counted(unverifiedRecords, "record")} ${unverifiedRecords === 1 ? "is" : "are"} not chained (no seq), which the host never writes: most likely inserted, this report counts them; \`audit verify\` says where`,
    );
  return {
    ...(oldestTs !== undefined ? { oldestTs } : {}),
    rotatedAway,
    ...(since !== undefined ? { since } : {}),
    lostRecords,
    ...(warnings.length > 0 ? { warning: warnings.join("; ") } : {}),
    ...(note !== undefined ? { note } : {}),
  };
}
