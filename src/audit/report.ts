import type { HostConfig } from "../config.js";
import type { ToolListing } from "../registry/listing.js";
import { type Permissions, loadPermissions } from "../policy/permissions.js";
import { cordonMates, cordonOf } from "../isolation/scheduling/cordons.js";
import type { AuditRecord } from "./audit-log.js";

/** What a tool did, per tool, in an Anima's audit report. */
export interface ToolActivity {
  tool: string;
  calls: number;
  ok: number;
  /** Error type → count (Timeout, MemoryLimit, SandboxCrashed, ExecutionError…). */
  errors: Record<string, number>;
  /** Capability operation → count of uses (`fs.readFile`, `fetch`, `credential`). */
  used: Record<string, number>;
  denials: Array<{ ts: string; operation: string; target: string; reason: string }>;
}

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
}

/**
 * The sandbox policy auditing report: per Anima, the policy in force and what its tools actually did.
 * Built from plain data (the audit records, the tool listing, the permissions file); it never reads a
 * secret value, because none is ever recorded. Its types are the host's public API (host-api.ts).
 */

export async function buildAnimaReport(
  config: HostConfig,
  anima: string,
  animaDir: string,
  listing: ToolListing,
  records: AuditRecord[],
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
    if (!entry) byTool.set(tool, (entry = { tool, calls: 0, ok: 0, errors: {}, used: {}, denials: [] }));
    return entry;
  };
  const loadErrors: AnimaReport["loadErrors"] = [];
  const reloads: AnimaReport["reloads"] = [];
  for (const record of records) {
    switch (record.kind) {
      case "call": {
        const entry = activity(record.tool);
        entry.calls++;
        if (record.outcome === "ok") entry.ok++;
        else entry.errors[record.errorType ?? "ExecutionError"] = (entry.errors[record.errorType ?? "ExecutionError"] ?? 0) + 1;
        break;
      }
      case "capability": {
        const entry = activity(record.tool);
        entry.used[record.operation] = (entry.used[record.operation] ?? 0) + 1;
        if (record.outcome === "denied") entry.denials.push({ ts: record.ts, operation: record.operation, target: record.target, reason: record.reason ?? "" });
        break;
      }
      case "credential": {
        const entry = activity(record.tool);
        entry.used["credential"] = (entry.used["credential"] ?? 0) + 1;
        if (record.outcome === "denied")
          entry.denials.push({ ts: record.ts, operation: "credential", target: record.name, reason: "PermissionDenied: another Anima's credential" });
        break;
      }
      case "load_error":
        loadErrors.push({ ts: record.ts, tool: record.tool, message: record.message });
        break;
      case "reload":
        reloads.push({
          ts: record.ts,
          tool: record.tool,
          origin: record.origin,
          change: record.change,
          ...(record.trigger ? { trigger: record.trigger } : {}),
          ...(record.message !== undefined ? { message: record.message } : {}),
        });
        break;
      default:
        break;
    }
  }
  return {
    anima,
    policy,
    tools: listing.tools.map((tool) => ({ name: tool.name, origin: tool.origin, status: tool.status, ...(tool.error ? { error: tool.error.message } : {}) })),
    activity: [...byTool.values()].sort((a, b) => a.tool.localeCompare(b.tool)),
    loadErrors,
    reloads,
  };
}

export function formatAnimaReport(report: AnimaReport): string {
  const p = report.policy;
  const network = !p.network ? "unknown" : p.network.mode === "allowlist" ? `allowlist: ${p.network.hosts.join(", ")}` : p.network.mode;
  const lines = [
    `Anima ${report.anima}`,
    `  policy (${p.source})${p.problem ? `: BROKEN — ${p.problem}` : ""}`,
    ...(p.toolCreation ? [`    tool creation: personal ${p.toolCreation.personal ? "yes" : "no"}, shared ${p.toolCreation.shared ? "yes" : "no"}`] : []),
    `    network: ${network}${p.allowInternalHosts.length ? ` (operator allows internal: ${p.allowInternalHosts.join(", ")})` : ""}`,
    `    files: quota ${p.fsLimits.quotaBytes} bytes / ${p.fsLimits.maxFiles} entries, read ≤ ${p.fsLimits.maxReadBytes} bytes, write ≤ ${p.fsLimits.maxWriteBytes} bytes`,
    `    environment visible to getCredential: ${p.allowedEnvironment.length ? p.allowedEnvironment.join(", ") : "none"}`,
    `    limits: timeout ${p.timeoutMs} ms, memory ${p.memoryLimitMb} MB`,
    `    cordon: ${p.cordonMates === "all" ? "all Animas (an isolate escape here reaches every Anima of the host)" : p.cordonMates.length === 0 ? "its own (no sandbox process runs another Anima's code)" : `${p.cordon.replace(/^group:/, "")}, with ${p.cordonMates.join(", ")} (an isolate escape here reaches them, no one else)`}`,
    "  tools",
    ...report.tools.map((t) => `    ${t.name} (${t.origin}) ${t.status}${t.error ? `: ${t.error}` : ""}`),
    "  activity",
  ];
  if (report.activity.length === 0) lines.push("    (none recorded)");
  for (const a of report.activity) {
    const errors = Object.entries(a.errors)
      .map(([type, n]) => `${type} ×${n}`)
      .join(", ");
    const used = Object.entries(a.used)
      .map(([op, n]) => `${op} ×${n}`)
      .join(", ");
    lines.push(`    ${a.tool}: ${a.calls} calls, ${a.ok} ok${errors ? `; ${errors}` : ""}${used ? `; used ${used}` : ""}`);
    for (const d of a.denials.slice(-10)) lines.push(`      denied ${d.operation} ${d.target} — ${d.reason} (${d.ts})`);
    if (a.denials.length > 10) lines.push(`      … ${a.denials.length - 10} earlier denials`);
  }
  for (const e of report.loadErrors.slice(-10)) lines.push(`  load error ${e.tool}: ${e.message} (${e.ts})`);
  if (report.reloads.length > 10) lines.push(`  … ${report.reloads.length - 10} earlier reloads`);
  for (const r of report.reloads.slice(-10)) {
    lines.push(
      `  reload ${r.tool} (${r.origin}) ${r.change}${r.message !== undefined ? `: ${r.message}` : ""}${r.trigger ? ` by ${r.trigger}` : ""} (${r.ts})`,
    );
  }
  return lines.join("\n");
}
