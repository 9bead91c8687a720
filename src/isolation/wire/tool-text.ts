import { MAX_TOOL_MESSAGE_CHARS } from "../../contract/isolate.js";

/**
 * A tool's message, at most `MAX_TOOL_MESSAGE_CHARS` long with the note of how much was dropped. A cut
 * message fits the limit, so cutting it again (the prelude, the sandbox process and the host each do)
 * keeps the first note and its count. The prelude cuts the same way (sandbox/prelude.ts `failure`).
 */
export function boundToolMessage(message: string): string {
  if (message.length <= MAX_TOOL_MESSAGE_CHARS) return message;
  // The note's length with a count of as many digits as the whole length: the real count has no more.
  const kept = MAX_TOOL_MESSAGE_CHARS - `… [cut: ${message.length} more characters]`.length;
  return `${message.slice(0, kept)}… [cut: ${message.length - kept} more characters]`;
}
