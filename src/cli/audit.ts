import { formatAnimaReport } from "../audit/report.js";
import { ToolHostError } from "../errors.js";
import type { ToolHost } from "../host.js";
import { checkSharedIntegrity } from "../lifecycle/index.js";
import type { Output } from "./output.js";

export const AUDIT_USAGE = "Usage: animaworks-tool audit [--anima NAME] [--since 2026-12-01T00:00Z|30m|12h|7d] [--json]";

/** `animaworks-tool audit`: each Anima's effective sandbox policy and what its tools attempted. */
export async function runAudit(host: ToolHost, argv: string[], anima: string | undefined, json: boolean, out: Output): Promise<number> {
  let sinceMs: number | undefined;
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] as string;
    if (token === "--since" || token.startsWith("--since=")) {
      const value = token.includes("=") ? token.slice(token.indexOf("=") + 1) : argv[++i];
      sinceMs = parseSince(value);
    } else {
      throw new ToolHostError("InvalidArguments", `audit: unexpected argument "${token}"`, AUDIT_USAGE);
    }
  }
  const reports = await host.auditReport(anima, sinceMs === undefined ? {} : { sinceMs });
  // Shared tools whose file no longer matches what was shared (edited in place, or never shared properly).
  const sharedTools = await checkSharedIntegrity(host.config.dataDir);
  if (json) {
    out.stdout(JSON.stringify({ status: "ok", reports, sharedTools }, null, 2));
    return 0;
  }
  const text = reports.length === 0 ? ["No Animas found."] : reports.map(formatAnimaReport);
  if (sharedTools.length > 0) {
    text.push(["Shared tools that do not match their share record:", ...sharedTools.map((t) => `  ${t.tool}: ${t.status}${t.sharedBy ? ` (shared by ${t.sharedBy})` : ""}${t.detail ? ` — ${t.detail}` : ""}`)].join("\n"));
  }
  out.stdout(text.join("\n\n"));
  return 0;
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
