/*
 * Host capabilities as the tool sees them: `fs`, `fetch`, `getCredential`, and for background jobs
 * `progress` and `isCancelled`, from `@animaworks/tool`.
 * Part of the prelude (joined into its scope by src/isolation/isolate/prelude-source.ts; see prelude.ts).
 *
 * Invariants:
 *  - A capability call leaves the isolate as (id, name, JSON text of plain arguments) through one host
 *    callback; the answer comes back as JSON text. No object crosses the boundary either way. The names,
 *    their positional arguments and their answers are the contract's (`CapabilityCalls` in
 *    src/contract/isolate.ts). A long text answer comes as plain string pieces first (`receiveText`).
 *  - The host decides who the call acts for (the Anima of the call), never anything said here.
 *  - Errors the host reports become `CapabilityError`s whose `type` the host chose. Only errors created
 *    here carry that type out of the call (a tool cannot forge a `SandboxViolation`), and the type they
 *    carry is the one recorded when they were created (`hostTypes`), never their `type` or `name`
 *    property, which the tool can rewrite: a real denial re-labelled `MemoryLimit` is the tool's own error.
 *    Only types a capability can answer with are recorded as such; outcomes the host decides from what it
 *    measured (a memory limit, a deadline, a crash) never come from here.
 *  - Calls are bounded in number in flight; answers arriving after the call ended are dropped.
 */

interface CapabilityApi {
  api: Record<string, unknown>;
  /** The host's answers to capability calls: JSON text of `[[id, reply], …]`. */
  settleMany(batchJson: string): void;
  /** The next piece of call `id`'s text, ahead of its `pieced` answer. */
  receiveText(id: number, piece: string): void;
  /** The host-chosen error type of an error this module created, else undefined. */
  errorTypeOf(error: unknown): string | undefined;
  endCall(): void;
}

// eslint-disable-next-line @typescript-eslint/no-unused-vars
function installCapabilities(
  bridge: Pick<GuestBridge, "capability">,
  toolErrorCtor: new (message?: string) => Error,
  toolConfigErrorCtor: new (message?: string) => Error,
): CapabilityApi {
  const jsonStringify = JSON.stringify;
  const jsonParse = JSON.parse;
  const freeze = Object.freeze;
  const reflectApply = Reflect.apply;
  const mapCtor = Map;
  const weakMapCtor = WeakMap;
  const uint8ArrayCtor = Uint8Array;
  const promiseCtor = Promise;
  const weakMapGet = WeakMap.prototype.get;
  const weakMapSet = WeakMap.prototype.set;
  const isArray = Array.isArray;
  /**
   * The types a capability answers with (src/capabilities: refusals, failures, a fetch's own timeout). A
   * null-prototype table, read before any tool code runs could patch anything it consults.
   */
  const CAPABILITY_ERROR_TYPES: Readonly<Record<string, true>> = freeze(
    Object.assign(Object.create(null) as Record<string, true>, {
      InvalidArguments: true,
      NotFound: true,
      PermissionDenied: true,
      SandboxViolation: true,
      ToolConfigError: true,
      ExecutionError: true,
      Timeout: true,
      Busy: true,
    }),
  );
  // Also enforced by the host, on its own count (call-ledger.ts); this early refusal only saves a round trip.
  const MAX_IN_FLIGHT = MAX_CAPABILITIES_IN_FLIGHT;

  type Pending = { resolve(value: unknown): void; reject(error: unknown): void; decode(value: unknown): unknown };
  const pending = new mapCtor<number, Pending>();
  /** Pieces of texts received ahead of their answers, joined as they come (V8 makes that a rope, not a copy). */
  const texts = new mapCtor<number, string>();
  let nextId = 1;
  /** The host's type of each error this module created, recorded at creation (see the invariants). */
  const hostTypes = new weakMapCtor<object, string>();

  class CapabilityError extends toolErrorCtor {
    readonly type: string;
    constructor(type: string, message: string) {
      super(message);
      this.name = type;
      this.type = type;
    }
  }

  function call<N extends CapabilityName>(name: N, args: CapabilityArgs<N>, decode: (value: CapabilityAnswerValue<N>) => unknown = (v) => v): Promise<unknown> {
    if (pending.size >= MAX_IN_FLIGHT) {
      return promiseCtor.reject(new CapabilityError("SandboxViolation", `too many capability calls in flight (limit ${MAX_IN_FLIGHT})`));
    }
    let argsJson: string;
    try {
      argsJson = jsonStringify(args);
    } catch {
      return promiseCtor.reject(new CapabilityError("InvalidArguments", `${name}: arguments must be plain strings, numbers and objects`));
    }
    const id = nextId++;
    return new promiseCtor((resolve, reject) => {
      pending.set(id, { resolve, reject, decode });
      bridge.capability(id, name, argsJson);
    });
  }

  /** A `CapabilityAnswer` as JSON gives it: checked field by field before use. */
  type Reply = { ok: boolean; value?: unknown; pieced?: unknown; error?: { type?: unknown; message?: unknown } };

  /** One host entry delivers every answer that was ready, so a flood of calls costs few entries. */
  function settleMany(batchJson: string): void {
    let batch: unknown;
    try {
      batch = jsonParse(batchJson);
    } catch {
      return;
    }
    if (!isArray(batch)) return;
    for (let i = 0; i < batch.length; i++) {
      const item = batch[i] as unknown;
      if (isArray(item) && typeof item[0] === "number" && typeof item[1] === "object" && item[1] !== null) settle(item[0], item[1] as Reply);
    }
  }

  function receiveText(id: number, piece: string): void {
    if (typeof id !== "number" || typeof piece !== "string" || !pending.has(id)) return;
    texts.set(id, (texts.get(id) ?? "") + piece);
  }

  function settle(id: number, reply: Reply): void {
    const waiting = pending.get(id);
    const text = texts.get(id) ?? "";
    texts.delete(id);
    if (!waiting) return;
    pending.delete(id);
    if (reply.ok) {
      try {
        waiting.resolve(waiting.decode(reply.pieced === true ? text : reply.value));
      } catch (error) {
        waiting.reject(error);
      }
      return;
    }
    const claimed = typeof reply.error?.type === "string" ? reply.error.type : "ExecutionError";
    const type = CAPABILITY_ERROR_TYPES[claimed] === true ? claimed : "ExecutionError";
    const message = typeof reply.error?.message === "string" ? reply.error.message : "the capability failed";
    const error = type === "ToolConfigError" ? new toolConfigErrorCtor(message) : new CapabilityError(type, message);
    reflectApply(weakMapSet, hostTypes, [error, type]);
    waiting.reject(error);
  }

  function errorTypeOf(error: unknown): string | undefined {
    if (typeof error !== "object" || error === null) return undefined;
    return reflectApply(weakMapGet, hostTypes, [error]) as string | undefined;
  }

  // ---- base64, for bytes (no atob/btoa in a bare isolate) -------------------------------------------
  // Both directions work a piece at a time into flat strings and buffers: built a character at a time, a
  // few MB of bytes became millions of string pieces (tens of bytes each) and a 4 MB write met a 128 MB
  // memory limit. What a conversion holds is now about its input and its output.
  const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const fromCharCode = String.fromCharCode;
  const charCodeAt = String.prototype.charCodeAt;
  /** Bytes encoded per piece (a multiple of 3, so that only the last piece is padded). */
  const ENCODE_PIECE_BYTES = 3 * 2048;
  const ALPHABET_CODES = new uint8ArrayCtor(64);
  /** Each character code's digit, 255 for a character outside the alphabet. */
  const DIGITS = new uint8ArrayCtor(128).fill(255);
  for (let i = 0; i < 64; i++) {
    ALPHABET_CODES[i] = reflectApply(charCodeAt, ALPHABET, [i]);
    DIGITS[ALPHABET_CODES[i] as number] = i;
  }
  const PAD = 61; // "="
  function toBase64(bytes: Uint8Array): string {
    const length = bytes.length;
    const codes = new uint8ArrayCtor((ENCODE_PIECE_BYTES / 3) * 4);
    let out = "";
    for (let start = 0; start < length; start += ENCODE_PIECE_BYTES) {
      const end = start + ENCODE_PIECE_BYTES < length ? start + ENCODE_PIECE_BYTES : length;
      let n = 0;
      for (let i = start; i < end; i += 3) {
        const a = bytes[i] as number;
        const b = i + 1 < end ? (bytes[i + 1] as number) : 0;
        const c = i + 2 < end ? (bytes[i + 2] as number) : 0;
        codes[n++] = ALPHABET_CODES[a >> 2] as number;
        codes[n++] = ALPHABET_CODES[((a & 3) << 4) | (b >> 4)] as number;
        codes[n++] = i + 1 < end ? (ALPHABET_CODES[((b & 15) << 2) | (c >> 6)] as number) : PAD;
        codes[n++] = i + 2 < end ? (ALPHABET_CODES[c & 63] as number) : PAD;
      }
      out += reflectApply(fromCharCode, undefined, n === codes.length ? codes : new uint8ArrayCtor(codes.buffer, 0, n)) as string;
    }
    return out;
  }
  function fromBase64(text: unknown): Uint8Array {
    if (typeof text !== "string") throw new CapabilityError("ExecutionError", "expected base64 text from the host");
    let end = text.length;
    while (end > 0 && reflectApply(charCodeAt, text, [end - 1]) === PAD) end--;
    const bytes = new uint8ArrayCtor(Math.floor((end * 3) / 4));
    let bits = 0;
    let value = 0;
    let index = 0;
    for (let i = 0; i < end; i++) {
      const code = reflectApply(charCodeAt, text, [i]);
      const digit = code < 128 ? (DIGITS[code] as number) : 255;
      if (digit === 255) throw new CapabilityError("ExecutionError", "invalid base64 from the host");
      value = ((value << 6) | digit) & 0xffffff;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        bytes[index++] = (value >> bits) & 255;
      }
    }
    return bytes;
  }
  function payload(data: unknown): [string, FileEncoding] {
    if (typeof data === "string") return [data, "utf8"];
    if (data instanceof uint8ArrayCtor) return [toBase64(data), "base64"];
    throw new CapabilityError("InvalidArguments", "data must be a string or a Uint8Array");
  }

  // ---- fs -------------------------------------------------------------------------------------------
  type ReadOptions = string | { encoding?: string | null } | undefined;
  function wantsBytes(options: ReadOptions): boolean {
    const encoding = typeof options === "string" ? options : options?.encoding;
    return encoding === null || encoding === "bytes" || encoding === "binary" || encoding === "buffer";
  }
  const fs = freeze({
    readFile: (path: unknown, options?: ReadOptions) =>
      wantsBytes(options) ? call("fs.readFile", [path, "base64"], fromBase64) : call("fs.readFile", [path, "utf8"]),
    writeFile: (path: unknown, data: unknown) => call("fs.writeFile", [path, ...payload(data)]).then(() => undefined),
    appendFile: (path: unknown, data: unknown) => call("fs.appendFile", [path, ...payload(data)]).then(() => undefined),
    readdir: (path: unknown = ".") => call("fs.readdir", [path]),
    stat: (path: unknown) => call("fs.stat", [path]),
    exists: (path: unknown) => call("fs.exists", [path]),
    mkdir: (path: unknown, options?: { recursive?: boolean }) => call("fs.mkdir", [path, options?.recursive !== false]).then(() => undefined),
    rm: (path: unknown, options?: { recursive?: boolean }) => call("fs.rm", [path, options?.recursive === true]).then(() => undefined),
    rename: (from: unknown, to: unknown) => call("fs.rename", [from, to]).then(() => undefined),
  });

  // ---- fetch ----------------------------------------------------------------------------------------
  /** The options a tool passes (animaworks-tool.d.ts); what crosses is the contract's `FetchInit`. */
  interface ToolFetchInit {
    method?: string;
    headers?: Record<string, string>;
    body?: string | Uint8Array;
    timeoutMs?: number;
    responseType?: "text" | "json" | "bytes";
  }
  function fetch(url: unknown, init: ToolFetchInit = {}): Promise<unknown> {
    const responseType = init.responseType ?? "text";
    const plainInit: FetchInit = { method: init.method, headers: init.headers, timeoutMs: init.timeoutMs, responseType };
    if (init.body !== undefined) {
      const [body, encoding] = payload(init.body);
      plainInit.body = body;
      plainInit.bodyEncoding = encoding;
    }
    return call("fetch", [url, plainInit], (response) => {
      const body = responseType === "bytes" ? fromBase64(response.body) : responseType === "json" ? (jsonParse(response.body) as unknown) : response.body;
      return freeze({ ...response, ok: response.status >= 200 && response.status < 300, body });
    });
  }

  // ---- credentials ----------------------------------------------------------------------------------
  interface CredentialOptions {
    keyName?: string;
    key_name?: string;
    envVar?: string;
    env_var?: string;
  }
  /** `getCredential(name, tool, { keyName, envVar })`, or AnimaWorks' positional (name, tool, keyName, envVar). */
  function getCredential(credentialName: unknown, toolName: unknown, options?: CredentialOptions | string, envVar?: string): Promise<unknown> {
    const opts: CredentialOptions = typeof options === "string" ? { keyName: options, envVar } : (options ?? {});
    return call("credential.get", [
      { credentialName, toolName, keyName: opts.keyName ?? opts.key_name ?? "api_key", envVar: opts.envVar ?? opts.env_var ?? null },
    ]);
  }

  // ---- background jobs -----------------------------------------------------------------------------
  /** Reports how far a background job is (0 to 1); does nothing in a direct call. */
  function progress(fraction: unknown, message?: unknown): Promise<void> {
    return call("job.progress", [fraction, message === undefined ? "" : message]).then(() => undefined);
  }
  /**
   * True once the job running this call was cancelled (or timed out, or its worker is stopping). A plain
   * boolean, so that `if (isCancelled())` means what it says (a Promise, as it once was, is always
   * truthy: tools written that way stopped every job at its first step); `await isCancelled()` works as
   * before. The answer is the host's last word: each check asks the host again in the background (one
   * question in flight at a time), and the answer lands when the tool next awaits anything, so a loop
   * that checks between awaited steps sees a cancel within one step.
   */
  let cancelled = false;
  let asking = false;
  /** Which call an answer belongs to: one that lands after its call ended says nothing of the next. */
  let callGeneration = 0;
  function isCancelled(): boolean {
    if (!cancelled && !asking) {
      asking = true;
      void askCancelled();
    }
    return cancelled;
  }
  async function askCancelled(): Promise<void> {
    const asked = callGeneration;
    try {
      if ((await call("job.cancelled", [])) === true && asked === callGeneration) cancelled = true;
    } catch {
      // refused (too many calls in flight) or the call is ending: the next check asks again
    } finally {
      if (asked === callGeneration) asking = false;
    }
  }

  function endCall(): void {
    pending.clear();
    texts.clear();
    // The isolate may serve another call (a warm pool): it starts not cancelled, with nothing asked.
    cancelled = false;
    asking = false;
    callGeneration++;
  }

  return {
    api: { fs, fetch, getCredential, get_credential: getCredential, progress, isCancelled, CapabilityError },
    settleMany,
    receiveText,
    errorTypeOf,
    endCall,
  };
}
