import type { ResultValue } from "./messages.js";

/**
 * A call's result as the host may believe it: measured on its own text, whatever the sender says of it.
 * The prelude (sandbox/result-framing.ts) sends a result whose text is at most `maxResultBytes`
 * characters; its `bytes` is the text's UTF-8 length and `truncated` false when that length is within
 * `maxResultBytes`, else the text is cut to `maxResultBytes` characters (then up to 3 bytes each), `bytes`
 * is the length before the cut and `truncated` true. So, on the host's own measure:
 *  - a text longer than `maxResultBytes` characters, or one marked as not cut whose UTF-8 length is over
 *    `maxResultBytes`, is what no honest sender makes (`broken`);
 *  - a cut text over `maxResultBytes` bytes is cut here to `maxResultBytes` bytes, on a character boundary
 *    (the exact byte cut the prelude leaves to the host);
 *  - `truncated` is believed only when true (a sender that says so loses its own structured form and gets
 *    a notice; that harms no one else), and `bytes` only as the original size of a cut text, between the
 *    length that arrived and `MAX_ORIGINAL_RESULT_BYTES`: a forged 1e308 or a negative size never reaches
 *    a caller's notice.
 * Kept where the sandbox process reads its isolate's envelope (isolate/envelope.ts) and again where the
 * host reads the process's answer (pool/child-handle.ts): a result larger than the call's limit never
 * reaches the host's parse of structured results (execution/result-check.ts) nor a caller.
 */

/**
 * The UTF-8 length of V8's longest string (2^29 − 24 UTF-16 units, each at most 3 bytes), bytes: no
 * result a tool built can have been larger before its cut.
 */
export const MAX_ORIGINAL_RESULT_BYTES = 3 * (2 ** 29 - 24);

export type BoundedResult = { value: ResultValue; broken?: undefined } | { broken: string };

/** `value` as the host may believe it under the call's `maxResultBytes`, or what no honest sender does (see above). */
export function boundedResult(value: ResultValue, maxResultBytes: number): BoundedResult {
  if (value.kind === "none") return { value };
  const { text } = value;
  if (text.length > maxResultBytes) return { broken: `a result of ${text.length} characters, over the call's ${maxResultBytes}-byte limit` };
  const measuredBytes = Buffer.byteLength(text);
  if (!value.truncated) {
    if (measuredBytes > maxResultBytes)
      return { broken: `a result of ${measuredBytes} bytes it said was not cut, over the call's ${maxResultBytes}-byte limit` };
    return { value: { kind: value.kind, text, bytes: measuredBytes, truncated: false } };
  }
  const claimed = Number.isSafeInteger(value.bytes) ? value.bytes : 0;
  const bytes = Math.min(Math.max(claimed, measuredBytes), MAX_ORIGINAL_RESULT_BYTES);
  return { value: { kind: value.kind, text: measuredBytes > maxResultBytes ? cutUtf8(text, maxResultBytes) : text, bytes, truncated: true } };
}

/** The longest prefix of `text` whose UTF-8 encoding fits in `maxBytes`, never splitting a character. */
export function cutUtf8(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return text;
  let end = maxBytes;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--; // back up to the start of a character
  return bytes.subarray(0, end).toString("utf8");
}
