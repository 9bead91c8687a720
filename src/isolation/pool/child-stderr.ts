import type { Readable } from "node:stream";

/** Lines of one sandbox process's stderr forwarded per window at most; the rest are dropped with one notice. */
export const MAX_STDERR_LINES_PER_WINDOW = 100;
const WINDOW_MS = 60_000;
/** Longest line forwarded, characters (and the most held while waiting for a line's end). */
const MAX_LINE_CHARS = 2_000;

/**
 * Forwards a sandbox process's stderr to the host's log, line by line, instead of letting it write to the
 * host's own stderr: V8's fatal-error dumps (an isolate out of memory) and the process's own notices then
 * reach the operator through `onLog`, with the process named, and a host that logs elsewhere (or nowhere,
 * in tests) is not written over. The process may be compromised, so what it writes is bounded (lines per
 * minute, line length) and control characters are escaped.
 */
export function forwardStderr(stream: Readable | null | undefined, pid: number | undefined, log: (message: string) => void): void {
  if (!stream) return;
  stream.setEncoding("utf8");
  let partial = "";
  let windowStart = Date.now();
  let sent = 0;
  let dropped = false;
  const emit = (line: string): void => {
    const now = Date.now();
    if (now - windowStart >= WINDOW_MS) {
      windowStart = now;
      sent = 0;
      dropped = false;
    }
    if (sent >= MAX_STDERR_LINES_PER_WINDOW) {
      if (!dropped) log(`sandbox process ${pid ?? "?"}: further output dropped for up to a minute`);
      dropped = true;
      return;
    }
    sent++;
    const text = line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}… [cut]` : line;
    if (text.trim() !== "") log(`sandbox process ${pid ?? "?"}: ${escapeControls(text)}`);
  };
  stream.on("data", (chunk: string) => {
    const lines = (partial + chunk).split("\n");
    partial = lines.pop() ?? "";
    if (partial.length > MAX_LINE_CHARS) {
      lines.push(partial);
      partial = "";
    }
    for (const line of lines) emit(line);
  });
  stream.on("end", () => partial !== "" && emit(partial));
  stream.on("error", () => {
    // the process went away; its exit is handled elsewhere
  });
}

function escapeControls(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
