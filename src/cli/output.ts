import { EXIT_CODES, type ErrorInfo, errorEnvelope, infoOfWire } from "../errors.js";
import type { CallResult } from "../host-api.js";
import type { InvocationOutput } from "../endpoint/invocation.js";
import { terminalSafe } from "../terminal-text.js";

/** The escapes of text a tool or an Anima wrote (terminal-text.ts), for the CLI's output. */
export { terminalSafe };

/** Where the CLI writes: the endpoint's `InvocationOutput` (one shape for in-process and served invocations). */
export type Output = InvocationOutput;

/** Prints a call's result; returns the exit code. Errors are one line on stderr, or a JSON envelope on stdout. */
export function printResult(out: Output, result: CallResult, json: boolean): number {
  // The call's id in the audit trail (`audit events --call ID`), in the envelope of either outcome.
  const callId = result.callId !== undefined ? { call_id: result.callId } : {};
  if (result.status === "error") {
    if (!json) return printError(out, infoOfWire(result), json);
    const info = infoOfWire(result);
    out.stdout(JSON.stringify({ ...errorEnvelope(info), ...callId }));
    return EXIT_CODES[info.type];
  }
  if (json) {
    // An object result is JSON in the envelope (as `describe -j` shows data); other results are their text.
    const envelope: Record<string, unknown> = {
      status: "ok",
      output: result.structured !== undefined && !result.truncated ? result.structured : result.output,
      ...callId,
    };
    if (result.truncated) {
      envelope["truncated"] = true;
      envelope["original_bytes"] = result.originalBytes;
    }
    out.stdout(JSON.stringify(envelope));
  } else {
    out.stdout(result.output);
  }
  return 0;
}

export function terminalSafeOutput(out: Output): Output {
  return {
    stdout: (text) => out.stdout(terminalSafe(text)),
    stderr: (text) => out.stderr(terminalSafe(text)),
    // Cursor up one line and clear it, then the line: works through line-based writers (which add the newline).
    stderrRedraw: (text) => out.stderr(`\x1b[1A\x1b[2K${terminalSafe(text)}`),
    ...(out.drained ? { drained: () => out.drained?.() ?? Promise.resolve() } : {}),
  };
}

export function printError(out: Output, error: ErrorInfo, json: boolean): number {
  if (json) {
    out.stdout(JSON.stringify(errorEnvelope(error)));
  } else {
    const oneLine = (text: string) => terminalSafe(text.replace(/\s*\n\s*/g, " "));
    out.stderr(`Error (${error.type}): ${oneLine(error.message)}${error.hint ? ` — ${oneLine(error.hint)}` : ""}`);
  }
  return EXIT_CODES[error.type];
}
