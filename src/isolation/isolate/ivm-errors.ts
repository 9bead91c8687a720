import type { ErrorInfo } from "../../errors.js";

/**
 * The one place where isolated-vm's error strings are turned into the host's error types. isolated-vm
 * reports limits only as message text; if a new version rewords them, this table is what changes.
 */
const PATTERNS: ReadonlyArray<{ pattern: RegExp; type: "Timeout" | "MemoryLimit" | "Disposed" }> = [
  { pattern: /Script execution timed out/i, type: "Timeout" },
  { pattern: /disposed during execution due to memory limit/i, type: "MemoryLimit" },
  { pattern: /Array buffer allocation failed/i, type: "MemoryLimit" },
  { pattern: /Isolate was disposed/i, type: "Disposed" },
  { pattern: /Isolate is disposed/i, type: "Disposed" },
  // A call's promise whose isolate went away before it settled.
  { pattern: /Promise was abandoned/i, type: "Disposed" },
];

export type IvmFailure = "Timeout" | "MemoryLimit" | "Disposed" | "Other";

export function classifyIvmError(error: unknown): IvmFailure {
  const message = error instanceof Error ? error.message : String(error);
  for (const { pattern, type } of PATTERNS) if (pattern.test(message)) return type;
  return "Other";
}

/** Why a call ended badly, in words for the tool author. `why` overrides what the error string says. */
export function ivmErrorInfo(error: unknown, limits: { timeoutMs: number; memoryLimitMb: number }, why?: "Timeout" | "MemoryLimit" | "Aborted"): ErrorInfo {
  const kind = why ?? classifyIvmError(error);
  switch (kind) {
    case "Aborted":
      return { type: "ExecutionError", fault: "caller", message: "the call was stopped by its caller before it finished" };
    case "Timeout":
      return {
        type: "Timeout",
        fault: "tool",
        message: `the tool did not finish within ${limits.timeoutMs} ms and was stopped`,
        hint: "make the work smaller, add timeouts to waits, or set EXECUTION_PROFILE.<action>.timeout_seconds",
      };
    case "MemoryLimit":
      return {
        type: "MemoryLimit",
        fault: "tool",
        message: `the tool exceeded its memory limit of ${limits.memoryLimitMb} MB and was stopped`,
        hint: "process data in smaller pieces",
      };
    case "Disposed":
      return { type: "ExecutionError", fault: "host", message: "the tool's isolate was stopped before the call finished" };
    default:
      return { type: "ExecutionError", fault: "tool", message: stripHostDetails(error instanceof Error ? error.message : String(error)) };
  }
}

/** Removes stack frames from a message before it is shown to a tool's caller. */
export function stripStackFrames(message: string): string {
  return message
    .split("\n")
    .filter((line) => !/^\s+at\s/.test(line))
    .join("\n")
    .trim();
}

/** For messages that come from the host side: also hides absolute host paths. */
export function stripHostDetails(message: string): string {
  return stripStackFrames(message).replace(/(?:file:\/\/)?\/(?:[^\s/:'"()]+\/)+[^\s/:'"()]*/g, "<path>");
}
