import { effectiveSettings, formatSettings } from "../audit/effective-config.js";
import { type HostHistory, hostHistory } from "../audit/report.js";
import { formatAnimaReport } from "../audit/report-text.js";
import { buildSummary, formatSummary } from "../audit/summary.js";
import { verifyAuditDirYielding } from "../audit/verify.js";
import { formatIntegrity, trailIntegrity } from "../audit/verify-text.js";
import { operatorLeastPrivilege } from "../audit/least-privilege.js";
import { type HostStatus, readHostStatuses } from "../audit/host-status.js";
import { counted, joinReportLines } from "../terminal-text.js";
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { ToolHostError } from "../errors.js";
import type { HostConfig } from "../config.js";
import type { ToolHost } from "../host-api.js";
import { describeLowPriority } from "../isolation/os/low-priority.js";
import { type OsSandboxStatus, describeOsSandbox, osSandboxStatus } from "../isolation/os/os-sandbox.js";
import { describeResourceCaps } from "../isolation/os/resource-caps.js";
import { describeCordons } from "../isolation/scheduling/cordons.js";
import { checkSharedIntegrity } from "../lifecycle/index.js";
import { type RuntimeReport, runtimeReport } from "../node-runtime.js";
import { scanArgs } from "./options.js";
import type { Output } from "./output.js";

export const AUDIT_USAGE = `Usage: animaworks-tool audit [--anima NAME] [--since 2026-12-01T00:00Z|30m|12h|7d] [--json] [--html FILE]
       --html FILE   write the report as one self-contained HTML page (summary, timeline, policy and version history)
       animaworks-tool audit verify [--json]     check every audit trail's hash chain (exit 1 when broken)
       animaworks-tool audit events [--format jsonl|csv] [--anima NAME] [--tool T] [--kind K] [--outcome O] [--since S] [--until U] [--call ID]
                                                 stream the records (docs/audit-records.md)
       animaworks-tool audit policy-history [--anima NAME] [--json]     every recorded policy change, with the keys that changed`;

/** `animaworks-tool audit [verify]`: each Anima's effective sandbox policy and what its tools attempted; or a subcommand. */
export async function runAudit(host: ToolHost, argv: string[], anima: string | undefined, json: boolean, out: Output, cwd = process.cwd()): Promise<number> {
  switch (argv[0]) {
    case "verify":
      return (await import("./audit-verify.js")).runAuditVerify(host, argv.slice(1), json, out);
    case "events":
      return (await import("./audit-events.js")).runAuditEvents(host, argv.slice(1), anima, out);
    case "policy-history":
      return (await import("./audit-policy-history.js")).runAuditPolicyHistory(host, argv.slice(1), anima, json, out);
    default:
      return runAuditReport(host, argv, anima, json, out, cwd);
  }
}

async function runAuditReport(host: ToolHost, argv: string[], anima: string | undefined, json: boolean, out: Output, cwd: string): Promise<number> {
  let sinceMs: number | undefined;
  let htmlFile: string | undefined;
  for (const token of scanArgs(argv, { "--since": "value", "--html": "value" })) {
    if (token.kind !== "option") throw new ToolHostError("InvalidArguments", `audit: unexpected argument "${argv[token.index]}"`, AUDIT_USAGE);
    if (token.name === "--since") sinceMs = parseSince(token.value);
    else if (token.value === undefined || token.value === "") throw new ToolHostError("InvalidArguments", "--html needs a file name", AUDIT_USAGE);
    else htmlFile = resolve(cwd, token.value);
  }
  const period = sinceMs === undefined ? {} : { sinceMs };
  const reports = await host.auditReport(anima, period);
  const summary = buildSummary(reports);
  // Host-wide settings can be judged only over every Anima: with --anima one, there is nothing to compare.
  const operator = anima === undefined ? operatorLeastPrivilege(reports, host.config.allowInternalHosts) : undefined;
  const history = await hostHistory(host.audit, period);
  // Read after the records, so that every record the report shows was in the trails verified.
  const integrity = trailIntegrity(await verifyAuditDirYielding(host.config.auditDir, undefined, anima));
  const since = sinceMs === undefined ? undefined : new Date(sinceMs).toISOString();
  if (htmlFile !== undefined) {
    const { renderHtmlReport } = await import("../audit/html-report.js");
    const page = renderHtmlReport({ generatedAt: new Date().toISOString(), ...(since ? { since } : {}), integrity, summary, reports, operator, history });
    writeFileSync(htmlFile, page, { mode: 0o600 });
    out.stdout(
      json
        ? JSON.stringify({ status: "ok", html: htmlFile, animas: reports.length })
        : `Wrote the audit report of ${counted(reports.length, "Anima")} to ${htmlFile}`,
    );
    return 0;
  }
  // Shared tools whose file no longer matches what was shared (edited in place, or never shared properly).
  const sharedTools = await checkSharedIntegrity(host.config.dataDir);
  const isolation = isolationLayers(host.config);
  // What the long-running hosts of this data dir hold now (each publishes it; audit/host-status.ts).
  const hosts = readHostStatuses(host.config.dataDir);
  const settings = effectiveSettings(host.config);
  if (json) {
    out.stdout(
      JSON.stringify(
        { status: "ok", integrity, summary, settings, isolation, hosts, operator: { grants: operator ?? null, ...history }, reports, sharedTools },
        null,
        2,
      ),
    );
    return 0;
  }
  const text = [
    joinReportLines(formatIntegrity(integrity)),
    formatSummary(summary, { ...(operator ? { operator } : {}), ...(since ? { since } : {}) }),
    formatSettings(host.config, settings),
    formatIsolation(isolation),
    formatHosts(hosts),
    ...formatHostHistory(history),
    ...(reports.length === 0 ? ["No Animas found."] : reports.map(formatAnimaReport)),
  ];
  if (sharedTools.length > 0) {
    text.push(
      [
        "Shared tools that do not match their share record:",
        ...sharedTools.map((t) => `  ${t.tool}: ${t.status}${t.sharedBy ? ` (shared by ${t.sharedBy})` : ""}${t.detail ? ` — ${t.detail}` : ""}`),
      ].join("\n"),
    );
  }
  out.stdout(text.join("\n\n"));
  return 0;
}

/** The operator's policy changes (the last 5) and host-wide reloads (the last 10), when there were any. */
function formatHostHistory(history: HostHistory): string[] {
  const lines: string[] = [];
  if (history.policyHistory.length > 0) {
    lines.push(`Operator settings changed ${counted(history.policyHistory.length, "time")} in the period:`);
    for (const c of history.policyHistory.slice(-5)) lines.push(`  ${c.from ?? "(first seen)"} → ${c.to} (${c.changedAt ?? c.ts})`);
  }
  if (history.reloads.length > 0) {
    lines.push(`Reloads of what every Anima sees: ${history.reloads.length} in the period${history.reloads.length > 10 ? " (the last 10)" : ""}:`);
    for (const r of history.reloads.slice(-10))
      lines.push(
        `  reload ${r.tool} (${r.origin}) ${r.change}${r.message !== undefined ? `: ${r.message}` : ""}${r.trigger ? ` by ${r.trigger}` : ""} (${r.ts})`,
      );
  }
  return lines.length > 0 ? [joinReportLines(lines)] : [];
}

/** An ISO date, or a duration back from now: `30m`, `12h`, `7d`. */
export function parseSince(value: string | undefined, now = Date.now()): number {
  if (value === undefined) throw new ToolHostError("InvalidArguments", "--since needs a value", AUDIT_USAGE);
  const duration = /^(\d+)\s*([smhd])$/.exec(value.trim());
  if (duration) {
    const unitMs = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[duration[2] as "s" | "m" | "h" | "d"];
    return now - Number(duration[1]) * unitMs;
  }
  const parsed = Date.parse(value);
  if (Number.isNaN(parsed)) throw new ToolHostError("InvalidArguments", `--since "${value}" is neither a date nor a duration like 12h`, AUDIT_USAGE);
  return parsed;
}

export interface IsolationLayers {
  /** Under layer 1: the Node.js and V8 that run the isolates, isolated-vm's version, and what to act on. */
  runtime: RuntimeReport;
  /** Layer 1: every call runs in an isolated-vm isolate with these limits. */
  isolate: { memoryLimitMb: number; timeoutMs: number };
  /** Layer 2: isolates run in sandbox processes (long-running hosts: `serve`, `mcp`, the library's default). */
  sandboxProcesses: number;
  /** Which Animas may share a sandbox process (scheduling/cordons.ts), and how many processes live at most. */
  cordons: { setting: HostConfig["cordons"]; description: string; maxProcesses: number; spareProcesses: number };
  /** What holds each sandbox process's memory, tasks and open files outside its isolates (os/resource-caps.ts). */
  resourceCaps: string[];
  /** Layer 3: the OS sandbox around each sandbox process, as a long-running host on this machine gets it. */
  osSandbox: OsSandboxStatus;
  /** How many tenants share the host: the warm pool's budget and each Anima's share of calls. */
  tenancy: {
    warmIsolatesMb: number;
    /** Idle isolates kept at most per process, or null for no limit (the budget decides). */
    maxIdleIsolates: number | null;
    /** Tools of one Anima whose contexts one idle isolate may hold (warm-pool.ts, sharing). */
    toolsPerIsolate: number;
    maxConcurrentCallsPerAnima: number;
    maxQueuedCallsPerAnima: number;
    /** How an Anima over its share is run (low-priority.ts), as this machine allows. */
    lowPriority: string;
  };
}

/**
 * The isolation layers a long-running host of this configuration has on this machine. (A one-shot CLI
 * call runs its isolate in-process unless the OS sandbox is required.)
 */
export function isolationLayers(config: HostConfig): IsolationLayers {
  let osSandbox: OsSandboxStatus;
  try {
    osSandbox = osSandboxStatus(config.osSandbox);
  } catch (error) {
    osSandbox = { enabled: false, mode: config.osSandbox, reason: error instanceof Error ? error.message : String(error), namespaces: [], seccomp: false };
  }
  return {
    runtime: runtimeReport(),
    isolate: { memoryLimitMb: config.memoryLimitMb, timeoutMs: config.timeoutMs },
    sandboxProcesses: config.sandboxProcesses,
    cordons: {
      setting: config.cordons,
      description: describeCordons(config.cordons),
      maxProcesses: config.maxSandboxProcesses,
      spareProcesses: config.spareSandboxProcesses,
    },
    resourceCaps: describeResourceCaps(),
    osSandbox,
    tenancy: {
      warmIsolatesMb: config.warmIsolatesMb,
      maxIdleIsolates: Number.isFinite(config.maxIdleIsolates) ? config.maxIdleIsolates : null,
      toolsPerIsolate: config.toolsPerIsolate,
      maxConcurrentCallsPerAnima: config.maxConcurrentCallsPerAnima,
      maxQueuedCallsPerAnima: config.maxQueuedCallsPerAnima,
      lowPriority: describeLowPriority(),
    },
  };
}

function formatHosts(hosts: HostStatus[]): string {
  if (hosts.length === 0) return "Running hosts: none (serve, mcp and library hosts of this data dir publish their warm pools while they run)";
  const mb = (bytes: number | undefined) => (bytes === undefined ? "?" : (bytes / 2 ** 20).toFixed(1));
  const lines = ["Running hosts:"];
  for (const status of hosts) {
    lines.push(`  pid ${status.pid}, since ${status.startedAt}, as of ${status.updatedAt}:`);
    for (const pool of status.warmPools) {
      const what =
        pool.idleIsolates === undefined
          ? "did not answer"
          : `${counted(pool.idleIsolates, "idle isolate")}, ${mb(pool.idleBytes)} of ${mb(pool.maxIdleBytes)} MB, ${pool.evictions ?? 0} evicted`;
      const cordon = pool.cordon === undefined ? "" : `; cordon ${pool.cordon}`;
      lines.push(
        `    sandbox process ${pool.pid ?? "(restarting)"}${pool.lowPriority ? " (low priority)" : ""}: ${counted(pool.animas, "Anima")} placed, ${what}${cordon}`,
      );
    }
  }
  return lines.join("\n");
}

function formatRuntime(runtime: RuntimeReport): string[] {
  const node = (side: { node: string; v8: string }) => `Node.js ${side.node} (V8 ${side.v8})`;
  const lines = [
    runtime.sandbox.path === runtime.host.path
      ? `  runtime: ${node(runtime.host)}, isolated-vm ${runtime.isolatedVm}${runtime.pinned ? `; pinned Node.js ${runtime.pinned}` : "; no Node.js pinned for this platform"}`
      : `  runtime: sandbox processes on ${node(runtime.sandbox)}, this host on ${node(runtime.host)}, isolated-vm ${runtime.isolatedVm}${runtime.pinned ? `; pinned Node.js ${runtime.pinned}` : ""}`,
  ];
  for (const warning of runtime.warnings) lines.push(`  WARNING: ${warning}`);
  return lines;
}

function formatIsolation(layers: IsolationLayers): string {
  return [
    "Isolation layers (long-running hosts: serve, mcp):",
    ...formatRuntime(layers.runtime),
    `  isolate: isolated-vm, ${layers.isolate.memoryLimitMb} MB heap, ${layers.isolate.timeoutMs} ms per call`,
    `  sandbox processes: ${layers.sandboxProcesses} per cordon, ${layers.cordons.maxProcesses} alive at most, ${layers.cordons.spareProcesses} spare; each holding isolates and no secrets; capabilities answered by the host`,
    `  cordons: ${layers.cordons.description}`,
    `  ${describeOsSandbox(layers.osSandbox)}`,
    ...layers.resourceCaps.map((line) => `  ${line}`),
    "Tenants:",
    `  warm pool: ${layers.tenancy.warmIsolatesMb.toLocaleString("en-US")} MB of idle isolates in all (${Math.floor(layers.tenancy.warmIsolatesMb / (layers.cordons.setting === "all" ? layers.sandboxProcesses : layers.cordons.maxProcesses)).toLocaleString("en-US")} MB per sandbox process${layers.tenancy.maxIdleIsolates === null ? "" : `, at most ${layers.tenancy.maxIdleIsolates} isolates`}), least recently used disposed first; ${sharingText(layers.tenancy.toolsPerIsolate)}`,
    `  per-Anima call limits: ${layers.tenancy.maxConcurrentCallsPerAnima} calls at once per Anima while others have calls, ${layers.tenancy.maxQueuedCallsPerAnima.toLocaleString("en-US")} waiting, then Busy`,
    `  over its share (a long call keeping its process busy): ${layers.tenancy.lowPriority}`,
  ].join("\n");
}

/** What `tools_per_isolate` means for the warm pool, in the audit's words. */
function sharingText(toolsPerIsolate: number): string {
  return toolsPerIsolate > 1
    ? `an idle isolate may hold up to ${toolsPerIsolate} JavaScript tools of one Anima, each in its own context (a stop of one ends the others' warm contexts)`
    : "an isolate per tool";
}
