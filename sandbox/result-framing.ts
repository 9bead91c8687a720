/*
 * How a tool's result becomes the envelope the host receives: text or JSON, its size in UTF-8 bytes and
 * the cut at the call's limit, and failures framed with their message cut as the host cuts it.
 * Part of the prelude (joined into its scope by src/isolation/isolate/prelude-source.ts; see prelude.ts).
 *
 * Invariants:
 *  - The intrinsics used here are captured when the prelude installs (before any tool code runs), so a
 *    tool that patches `JSON`, `String.prototype` or `Reflect` cannot change how its own result is framed.
 *    `JSON.stringify` is the bounded one of json-guard.ts, handed in by the prelude.
 *  - Only JSON-able values leave: a function, symbol or BigInt inside a result is an `ExecutionError`
 *    naming where it is, never silently dropped.
 */

interface ResultFraming {
  /** The envelope of a tool's result, cut to `maxBytes` (the host makes the exact byte cut). */
  frameResult(value: unknown, maxBytes: number): CallEnvelope;
  /** A failure envelope, its message cut at `MAX_TOOL_MESSAGE_CHARS` with a note of how much was cut. */
  failure(errorType: string, message: string): FailureEnvelope;
  /** A `JSON.stringify` replacer that throws, naming the key, on what JSON cannot carry. */
  strictReplacer(this: unknown, key: string, value: unknown): unknown;
  /** What went wrong in `JSON.stringify`, in the tool author's terms. */
  describeJsonError(error: unknown): string;
}

// eslint-disable-next-line @typescript-eslint/no-unused-vars
function installResultFraming(safeString: (value: unknown) => string, jsonStringify: Stringify): ResultFraming {
  const reflectApply = Reflect.apply;
  const stringCtor = String;
  const charCodeAt = String.prototype.charCodeAt;
  const stringSlice = String.prototype.slice;

  function utf8Length(text: string): number {
    let bytes = 0;
    for (let i = 0; i < text.length; i++) {
      const code = reflectApply(charCodeAt, text, [i]);
      if (code < 0x80) bytes += 1;
      else if (code < 0x800) bytes += 2;
      else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
        bytes += 4;
        i++;
      } else bytes += 3;
    }
    return bytes;
  }

  function textEnvelope(kind: "text" | "json", text: string, maxBytes: number): CallEnvelope {
    const bytes = utf8Length(text);
    if (bytes <= maxBytes) return { ok: true, kind, text, bytes, truncated: false };
    // Cut by characters first (each is ≥ 1 byte); the host makes the exact byte cut.
    return { ok: true, kind, text: reflectApply(stringSlice, text, [0, maxBytes]), bytes, truncated: true };
  }

  function strictReplacer(this: unknown, key: string, value: unknown): unknown {
    const type = typeof value;
    if (type === "function") throw new TypeError(`the value at "${key}" is a function, which JSON cannot carry`);
    if (type === "symbol") throw new TypeError(`the value at "${key}" is a symbol, which JSON cannot carry`);
    if (type === "bigint") throw new TypeError(`the value at "${key}" is a BigInt; return it as a string or number`);
    return value;
  }

  function frameResult(value: unknown, maxBytes: number): CallEnvelope {
    if (value === undefined || value === null) return { ok: true, kind: "none" };
    const type = typeof value;
    if (type === "string") return textEnvelope("text", value as string, maxBytes);
    if (type === "number" || type === "boolean" || type === "bigint") return textEnvelope("text", stringCtor(value), maxBytes);
    if (type === "function" || type === "symbol") {
      return failure("ExecutionError", `the tool returned a ${type}; return a string, a number, or a JSON object`);
    }
    let text: string | undefined;
    try {
      text = jsonStringify(value, strictReplacer, 2);
    } catch (error) {
      return failure("ExecutionError", `the tool's result could not be turned into JSON: ${describeJsonError(error)}`);
    }
    if (typeof text !== "string") return { ok: true, kind: "none" };
    return textEnvelope("json", text, maxBytes);
  }

  function describeJsonError(error: unknown): string {
    const text = safeString(error);
    if (/circular/i.test(text)) return "it contains a cycle (an object that refers to itself)";
    if (/BigInt/i.test(text)) return `${text}; return it as a string or number`;
    return text;
  }

  // The host cuts messages the same way (envelope.ts boundToolMessage: the note included, the message
  // fits the limit, so the host's cut keeps this note); cutting here keeps the envelope small.
  function failure(errorType: string, message: string): FailureEnvelope {
    if (message.length > MAX_TOOL_MESSAGE_CHARS) {
      const kept = MAX_TOOL_MESSAGE_CHARS - `… [cut: ${message.length} more characters]`.length;
      message = `${reflectApply(stringSlice, message, [0, kept])}… [cut: ${message.length - kept} more characters]`;
    }
    return { ok: false, errorType, message };
  }

  return { frameResult, failure, strictReplacer, describeJsonError };
}
