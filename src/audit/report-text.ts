import { joinReportLines } from "../terminal-text.js";
import { formatUnfinished } from "./interrupted.js";
import { formatLeastPrivilege } from "./least-privilege.js";
import type { AnimaReport } from "./report.js";
import { counted } from "../terminal-text.js";

/** An Anima's report (report.ts) as the text `animaworks-tool audit` prints: the last few of each list, and counts. */
export function formatAnimaReport(report: AnimaReport): string {
  const p = report.policy;
  const network = !p.network ? "unknown" : p.network.mode === "allowlist" ? `allowlist: ${p.network.hosts.join(", ")}` : p.network.mode;
  const c = report.coverage;
  const lines = [
    `Anima ${report.anima}`,
    `  records: ${report.records}${c.since ? ` since ${c.since}` : ""}; kept from ${c.oldestTs ?? "(none kept)"}${c.rotatedAway ? ", older ones rotated away" : ""}`,
    ...(c.warning ? [`  WARNING: ${c.warning}`] : []),
    ...(c.note ? [`  note: ${c.note}`] : []),
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
    lines.push(`    ${a.tool}: ${counted(a.calls, "call")}, ${a.ok} ok${errors ? `; ${errors}` : ""}${used ? `; used ${used}` : ""}`);
    for (const d of a.denials.slice(-10)) lines.push(`      denied ${d.operation} ${d.target} — ${d.reason} (${d.ts})`);
    if (a.denied > 10) lines.push(`      … ${a.denied - 10} earlier denials`);
  }
  lines.push(...formatUnfinished(report));
  for (const v of report.violations.slice(-10)) lines.push(`  violation${v.tool ? ` ${v.tool}` : ""}: ${v.message} (${v.ts})`);
  if (report.violations.length > 10) lines.push(`  … ${report.violations.length - 10} earlier violations`);
  for (const r of report.refusals.slice(-10)) lines.push(`  refused ${r.command} ${r.target}: ${r.errorType}: ${r.reason} (${r.ts})`);
  if (report.refusals.length > 10) lines.push(`  … ${report.refusals.length - 10} earlier refusals`);
  lines.push(...formatLeastPrivilege(report.leastPrivilege));
  for (const change of report.policyHistory.slice(-5))
    lines.push(`  policy changed ${change.from ?? "(first seen)"} → ${change.to} (${change.changedAt ?? change.ts})`);
  for (const e of report.loadErrors.slice(-10)) lines.push(`  load error ${e.tool}: ${e.message} (${e.ts})`);
  if (report.reloads.length > 10) lines.push(`  … ${report.reloads.length - 10} earlier reloads`);
  for (const r of report.reloads.slice(-10)) {
    lines.push(
      `  reload ${r.tool} (${r.origin}) ${r.change}${r.message !== undefined ? `: ${r.message}` : ""}${r.trigger ? ` by ${r.trigger}` : ""} (${r.ts})`,
    );
  }
  return joinReportLines(lines);
}
