import { verifyAuditDirYielding } from "../audit/verify.js";
import { formatVerifyReport } from "../audit/verify-text.js";
import { ToolHostError } from "../errors.js";
import type { ToolHost } from "../host-api.js";
import type { Output } from "./output.js";

export const AUDIT_VERIFY_USAGE = "Usage: animaworks-tool audit verify [--json]";

/**
 * `animaworks-tool audit verify`: walks every trail's hash chain (audit/verify.ts). Exit 0 when every chain
 * is whole, 1 when a record was changed, removed, reordered or truncated (the findings say where).
 */
export async function runAuditVerify(host: ToolHost, argv: string[], json: boolean, out: Output): Promise<number> {
  const unexpected = argv.find((arg) => arg !== "--json" && arg !== "-j");
  if (unexpected !== undefined) throw new ToolHostError("InvalidArguments", `audit verify: unexpected argument "${unexpected}"`, AUDIT_VERIFY_USAGE);
  await host.audit.flush();
  // The daemon runs this for whoever asks: its other calls go on while the trails are walked.
  const report = await verifyAuditDirYielding(host.config.auditDir);
  if (json) out.stdout(JSON.stringify({ status: report.ok ? "ok" : "error", ...report }, null, 2));
  else out.stdout(formatVerifyReport(report));
  return report.ok ? 0 : 1;
}
