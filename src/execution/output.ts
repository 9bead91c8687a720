import type { ResultValue } from "../isolation/wire/messages.js";
import { cutUtf8 } from "../isolation/wire/result-bounds.js";

export { cutUtf8 };

export const NO_OUTPUT = "(no output)";

export interface FormattedOutput {
  text: string;
  truncated: boolean;
  /** UTF-8 size of the result before truncation. */
  originalBytes: number;
}

/**
 * Turns a tool's result into the text callers see (docs/design.md §3): JSON for objects, `(no output)` for
 * null/undefined, text otherwise; over `maxOutputBytes` UTF-8 bytes it is cut on a character boundary
 * and a notice with the original size is appended.
 */
export function formatOutput(value: ResultValue, maxOutputBytes: number): FormattedOutput {
  if (value.kind === "none") return { text: NO_OUTPUT, truncated: false, originalBytes: 0 };
  const originalBytes = Math.max(value.bytes, Buffer.byteLength(value.text));
  if (originalBytes <= maxOutputBytes && !value.truncated) return { text: value.text, truncated: false, originalBytes };
  const cut = cutUtf8(value.text, maxOutputBytes);
  const notice = `[Output truncated because it exceeded ${formatLimit(maxOutputBytes)}. Original size: ${originalBytes} bytes]`;
  return { text: `${cut}\n\n${notice}`, truncated: true, originalBytes };
}

function formatLimit(bytes: number): string {
  return bytes % 1000 === 0 ? `${bytes / 1000}KB` : `${bytes} bytes`;
}
