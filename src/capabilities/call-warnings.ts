import type { LogRecord } from "../host-options.js";

/**
 * The host's own lines about one call — a capability it refused ("denied fs.readFile: …"), entries a
 * listing left out, a credential lookup refused — go to that call's caller, like its tool's log lines
 * (src/composition.ts ToolLogRouter): on the caller's stderr in-process and through a running host alike.
 * Unlike tool log lines (at most `maxLogLinesPerCall`, counted in the sandbox), they come from the host,
 * one per request, and a tool can make requests in a loop: so each call may print at most
 * `MAX_CALL_WARNINGS` of them and `MAX_CALL_WARNING_BYTES` of text, and when it ends its caller hears
 * how many more there were. That bounds what a shared host sends one caller, and what one call adds to
 * the operator's log; the same bound holds in-process, so the output is the same either way.
 */
export const MAX_CALL_WARNINGS = 50;
export const MAX_CALL_WARNING_BYTES = 16 * 1024;

/**
 * Lines below `warn` (the credential layer's debug lines) are bounded on their own and dropped without
 * a word: at the default level they are never shown, and must not use up the room of the warnings.
 */
function isWarning(record: LogRecord): boolean {
  return record.level === "warn" || record.level === "error";
}

class Budget {
  private lines = 0;
  private bytes = 0;
  dropped = 0;

  take(message: string): boolean {
    const bytes = Buffer.byteLength(message);
    if (this.lines >= MAX_CALL_WARNINGS || this.bytes + bytes > MAX_CALL_WARNING_BYTES) {
      this.dropped++;
      return false;
    }
    this.lines++;
    this.bytes += bytes;
    return true;
  }
}

/** One call's host lines: what may still be shown, and what was not. */
export class CallWarnings {
  private readonly warnings = new Budget();
  private readonly details = new Budget();
  private ended = false;

  /** Whether `record` is to be shown (false beyond the bounds, and once the call has ended: its caller has its answer). */
  admit(record: LogRecord): boolean {
    if (this.ended) return false;
    return (isWarning(record) ? this.warnings : this.details).take(record.message);
  }

  /** Ends the call; the closing line, when some of its warnings were not shown. */
  end(about: Pick<LogRecord, "anima" | "tool">): LogRecord | undefined {
    if (this.ended) return undefined;
    this.ended = true;
    const dropped = this.warnings.dropped;
    if (dropped === 0) return undefined;
    return {
      level: "warn",
      logger: "animaworks.host",
      message: `${dropped} more ${dropped === 1 ? "warning" : "warnings"} of this call not shown (at most ${MAX_CALL_WARNINGS} lines and ${MAX_CALL_WARNING_BYTES / 1024} KiB are shown per call)`,
      ...about,
    };
  }
}
