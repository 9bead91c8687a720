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
  /**
   * `envelope`, with the `stack` of `thrown` when it is an `ExecutionError` and the value has a string
   * stack (cut at `MAX_TOOL_STACK_CHARS`), so that the host can name the tool's lines. Not for a
   * `toolError` (the `ToolError` class) nor an `Error` thrown as it is: those fail the call with exactly
   * the tool's message. Whatever the tool wrote into a stack is sent as it is: the host reads only
   * positions in the tool's own bundle out of it.
   */
  withStack(envelope: CallEnvelope, thrown: unknown, toolError: unknown): CallEnvelope;
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
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const errorCtor = Error;
  const getPrototypeOf = Object.getPrototypeOf;
  const functionPrototype = Function.prototype;
  const objectPrototype = Object.prototype;
  const errorPrototype = Error.prototype;
  // instanceof without consulting a (patchable) Symbol.hasInstance: OrdinaryHasInstance.
  const ordinaryHasInstance = Function.prototype[Symbol.hasInstance];
  // V8 gives each error an own `stack` accessor pair whose getter formats the stack on first use.
  const nativeStackGetter = getOwnPropertyDescriptor(new errorCtor(), "stack")?.get;

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
      const kept = MAX_TOOL_MESSAGE_CHARS - `\u2026 [cut: ${message.length} more characters]`.length;
      message = `${reflectApply(stringSlice, message, [0, kept])}\u2026 [cut: ${message.length - kept} more characters]`;
    }
    return { ok: false, errorType, message };
  }

  function withStack(envelope: CallEnvelope, thrown: unknown, toolError: unknown): CallEnvelope {
    if (envelope.ok || envelope.errorType !== "ExecutionError" || (typeof thrown !== "object" && typeof thrown !== "function") || thrown === null) {
      return envelope;
    }
    try {
      if (reflectApply(ordinaryHasInstance, toolError, [thrown]) || getPrototypeOf(thrown) === errorPrototype) return envelope;
      const stack = stackOf(thrown);
      if (typeof stack === "string") envelope.stack = reflectApply(stringSlice, stack, [0, MAX_TOOL_STACK_CHARS]);
    } catch {
      // no stack: the failure is reported without the tool's lines
    }
    return envelope;
  }

  /**
   * The stack text of `thrown`, without running a function of the tool's: a string the tool stored, or
   * V8's own formatting (its `stack` accessor) when the tool installed no `Error.prepareStackTrace`
   * (which V8 would call, and which may never return). A getter of the tool's is never called.
   */
  function stackOf(thrown: object): unknown {
    const own = getOwnPropertyDescriptor(thrown, "stack");
    if (own === undefined) return undefined;
    if (!("get" in own)) return own.value;
    if (own.get === undefined || own.get !== nativeStackGetter || !defaultFormatting()) return undefined;
    return reflectApply(nativeStackGetter, thrown, []);
  }

  /**
   * True when V8 would format a stack itself: `Error.prepareStackTrace`, which it reads with an ordinary
   * property lookup (getters and prototypes included), is nowhere on `Error`'s prototype chain, and that
   * chain is still the intrinsics' own (no object of the tool's, no proxy, is asked anything).
   */
  function defaultFormatting(): boolean {
    let holder: object | null = errorCtor;
    for (const intrinsic of [errorCtor, functionPrototype, objectPrototype]) {
      if (holder !== intrinsic) return false;
      const formatter = getOwnPropertyDescriptor(holder, "prepareStackTrace");
      if (formatter !== undefined && (!("value" in formatter) || formatter.value !== undefined)) return false;
      holder = getPrototypeOf(holder) as object | null;
    }
    return holder === null;
  }

  return { frameResult, failure, withStack, strictReplacer, describeJsonError };
}
