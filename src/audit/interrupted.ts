import { isProcessAlive } from "../process-alive.js";
import type { AuditRecord } from "./audit-log.js";

/** A call whose start was recorded and whose end was not. */
export interface UnfinishedCall {
  callId: string;
  tool: string;
  schema: string;
  /** The tool version (bundle hash) the call ran; "" when none was chosen yet. */
  version: string;
  startedAt: string;
  /** The host process that ran it. */
  pid: number;
  jobId?: string;
}

export interface UnfinishedCalls {
  /** Started in a host process that is gone (a crash, kill -9): the call never finished, and no one will finish it. */
  interrupted: UnfinishedCall[];
  /** Started in a host process that still runs: the call may yet end. */
  inFlight: UnfinishedCall[];
}

/**
 * The calls among `records` (one Anima's, oldest first) with a `call_start` and no `call` of the same
 * callId, told apart by whether the process that ran each is alive. A call that started before the
 * period read is not seen at all, and its end is not counted either: only starts open a call.
 *
 * A recycled pid (the host died, another process got its number) reads as alive: such a call is shown in
 * flight rather than interrupted until that process ends too. `isAlive` is asked once per pid.
 */
export function unfinishedCalls(records: Iterable<AuditRecord>, isAlive: (pid: number) => boolean = isProcessAlive): UnfinishedCalls {
  const open = new OpenCalls();
  for (const record of records) open.see(record);
  return open.settle(isAlive);
}

/** `unfinishedCalls` one record at a time, for a reader that gives the event loop turns between them (report.ts). */
export class OpenCalls {
  private readonly open = new Map<string, UnfinishedCall>();

  see(record: AuditRecord): void {
    if (record.kind === "call_start") {
      this.open.set(record.callId, {
        callId: record.callId,
        tool: record.tool,
        schema: record.schema,
        version: record.version,
        startedAt: record.ts,
        pid: record.pid,
        ...(record.jobId !== undefined ? { jobId: record.jobId } : {}),
      });
    } else if (record.kind === "call") {
      this.open.delete(record.callId);
    }
  }

  /** The calls still open, told apart by whether the process that ran each is alive. */
  settle(isAlive: (pid: number) => boolean = isProcessAlive): UnfinishedCalls {
    const alive = new Map<number, boolean>();
    const result: UnfinishedCalls = { interrupted: [], inFlight: [] };
    for (const call of this.open.values()) {
      let living = alive.get(call.pid);
      if (living === undefined) alive.set(call.pid, (living = isAlive(call.pid)));
      (living ? result.inFlight : result.interrupted).push(call);
    }
    return result;
  }
}

/** The text report's lines for an Anima's unfinished calls (the last 10 of each). */
export function formatUnfinished(calls: UnfinishedCalls): string[] {
  const line = (c: UnfinishedCall) =>
    `    ${c.schema} (tool ${c.tool}, version ${c.version ? c.version.slice(0, 12) : "(none)"}${c.jobId ? `, job ${c.jobId}` : ""}) started ${c.startedAt}, pid ${c.pid}`;
  const lines: string[] = [];
  if (calls.interrupted.length > 0) {
    lines.push(`  interrupted calls: ${calls.interrupted.length} (started, never ended; the host process that ran them is gone)`);
    if (calls.interrupted.length > 10) lines.push(`    … ${calls.interrupted.length - 10} earlier`);
    lines.push(...calls.interrupted.slice(-10).map(line));
  }
  if (calls.inFlight.length > 0) {
    lines.push(`  in flight: ${calls.inFlight.length} (started in a host process that is still running)`);
    lines.push(...calls.inFlight.slice(-10).map(line));
  }
  return lines;
}
