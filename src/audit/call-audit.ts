import type { AuditLog } from "./audit-log.js";
import { newCallId } from "./call-id.js";

/** What the end record reads of a call's result (host-api.ts `CallResult`, which audit/ does not import). */
type EndedCall = { status: "ok"; durationMs: number } | { status: "error"; durationMs: number; error_type: string; fault: string; message: string };

/** What a call's records share: who called what, which version, and the call's id. */
export interface CallRecord {
  callId: string;
  anima: string;
  tool: string;
  schema: string;
  /** The tool version (bundle hash), once one was chosen. */
  version?: string;
  jobId?: string;
}

/**
 * The records of one call (issue #34's "trace one call end to end"): a start before it runs, so that a call
 * the host never finished (kill -9) shows as interrupted; an end with its outcome, the tool's real name, its
 * version and the isolation layers that ran it; and the call's id on the result, which the CLI's `-j`
 * envelope and MCP's `_meta` hand to the caller. Every capability record of the call carries the same id
 * (it travels in the call's `CallContext`).
 */
export class CallAudit {
  constructor(
    private readonly audit: Pick<AuditLog, "append">,
    /** The isolation layers every call of the host runs in, outermost first. */
    private readonly layers: string[],
  ) {}

  /** A new call's record, with a fresh id. */
  record(fields: Omit<CallRecord, "callId">): CallRecord {
    return { callId: newCallId(), ...fields };
  }

  start(record: CallRecord): void {
    this.audit.append({ kind: "call_start", ...record, version: record.version ?? "", pid: process.pid });
  }

  /** The end record; `ran`: the call reached the executor (its layers are named). Returns the result with its call id. */
  end<R extends EndedCall>(record: CallRecord, result: R, ran: boolean): R & { callId: string } {
    this.audit.append({
      kind: "call",
      ...record,
      ...(ran ? { layers: this.layers } : {}),
      durationMs: Math.round(result.durationMs * 1000) / 1000,
      outcome: result.status,
      ...(result.status === "error" ? { errorType: result.error_type, errorFault: result.fault } : {}),
    });
    if (result.status === "error" && result.error_type === "SandboxCrashed")
      this.audit.append({ kind: "sandbox_crash", callId: record.callId, anima: record.anima, tool: record.tool, message: result.message });
    return { ...result, callId: record.callId };
  }
}
