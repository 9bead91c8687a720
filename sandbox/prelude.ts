/*
 * The prelude: runs inside every isolate before the tool bundle. It builds the `@animaworks/tool` module,
 * removes globals that would escape the memory limit or the timeout, and returns the entry points the
 * host calls. What crosses between it and the host (the bridge, the entry object, the envelopes, the
 * capabilities) is declared once, in src/contract/isolate.ts.
 *
 * Invariants:
 *  - The host's bridge (isolated-vm callbacks) reaches the prelude only through `BIND_GLOBAL`, bound
 *    once per context; until then the prelude holds functions forwarding to it (`exposeBinder`). They
 *    live in closures and are never put on the global, so tool code can never reach a host reference.
 *  - The entry points the host calls (`GuestEntry`) go to the host once, as a reference, through
 *    `BIND_GLOBAL`, which deletes itself before any tool code runs: they are never left on the global or
 *    anywhere else tool code can reach, so a tool cannot re-enter its own call with other limits, fire
 *    timers or forge capability answers. The host enforces every limit again on its side in any case
 *    (call-ledger.ts).
 *  - Intrinsics the prelude relies on are captured before any tool code runs, so a tool that patches
 *    `JSON`, `Array.prototype` or `Promise` cannot change how its own result is framed. It could still
 *    corrupt its own prelude's output; the host therefore re-validates everything it receives as text.
 *  - Results leave the isolate only as one string (a JSON envelope), built here under the call's deadline.
 *    Envelopes are null-prototype objects and results are awaited (never `.then`ed), so neither
 *    `Object.prototype.toJSON` nor a patched `Promise` species can replace the envelope.
 *  - Memory that isolated-vm's limit does not see is refused or budgeted here (see "memory outside the
 *    V8 heap" below); the host's process boundary and deadlines remain the backstop.
 */

/**
 * Called once, by `exposeBinder`, with the functions that forward to the host's bridge. A function
 * declaration of the script's own wrapper scope, never a global.
 */
function installPrelude(global: Record<string, unknown>, host: GuestBridge): Omit<GuestEntry, "compact"> {
  // Captured intrinsics (see invariants above).
  const jsonStringify = JSON.stringify;
  const jsonParse = JSON.parse;
  const defineProperty = Object.defineProperty;
  const freeze = Object.freeze;
  const objectKeys = Object.keys;
  const reflectApply = Reflect.apply;
  const objectCreate = Object.create;
  const objectAssign = Object.assign;
  const promiseCtor = Promise;
  const speciesSymbol = Symbol.species;
  // instanceof without consulting a (patchable) Symbol.hasInstance: OrdinaryHasInstance.
  const ordinaryHasInstance = Function.prototype[Symbol.hasInstance];
  const stringCtor = String;
  const errorCtor = Error;
  const mapCtor = Map;
  const rangeErrorCtor = RangeError;
  const mapGet = Map.prototype.get;
  const mapSet = Map.prototype.set;
  const mapDelete = Map.prototype.delete;
  const mapClear = Map.prototype.clear;
  const mapSize = Object.getOwnPropertyDescriptor(Map.prototype, "size")!.get!;
  const stringSlice = String.prototype.slice;
  const arrayJoin = Array.prototype.join;
  const arrayMap = Array.prototype.map;

  function isInstance(value: unknown, ctor: unknown): boolean {
    try {
      return reflectApply(ordinaryHasInstance, ctor, [value]);
    } catch {
      return false;
    }
  }

  // Off-heap memory the isolate's limit does not see (memory-guards.ts).
  const memory = installMemoryGuards(global, isInstance, () => host.stop("MemoryLimit"));
  // Indented JSON bounded (json-guard.ts), for tools and for the result framing below.
  const boundedStringify = installJsonGuard(global);

  function safeString(value: unknown): string {
    try {
      if (typeof value === "string") return value;
      if (isInstance(value, errorCtor)) {
        const name = reflectApply(errorGetName, value as Error, []);
        const message = reflectApply(errorGetMessage, value as Error, []);
        return message ? `${name}: ${message}` : name;
      }
      if (typeof value === "object" && value !== null) return jsonStringify(value) ?? stringCtor(value);
      return stringCtor(value);
    } catch {
      return "[unprintable value]";
    }
  }
  function errorGetName(this: Error): string {
    const n = this.name;
    return typeof n === "string" ? n : "Error";
  }
  function errorGetMessage(this: Error): string {
    const m = this.message;
    return typeof m === "string" ? m : stringCtor(m);
  }

  // ---- errors (tool-errors.ts) ---------------------------------------------------------------------
  const errorClasses = installToolErrors();
  const { ToolError, ToolConfigError, InvalidInput } = errorClasses;

  // ---- logger --------------------------------------------------------------------------------------
  function formatLogArgs(args: unknown[]): string {
    return reflectApply(arrayJoin, reflectApply(arrayMap, args, [safeString]), [" "]);
  }
  // Bounded here, inside the isolate, so that a logging loop cannot flood the host's event loop.
  let logLinesLeft = 0;
  let logMaxChars = 0;
  function makeLogMethod(level: LogLevel) {
    return function log(...args: unknown[]): void {
      if (logLinesLeft <= 0) return;
      logLinesLeft--;
      const line = formatLogArgs(args);
      host.log(level, line.length > logMaxChars ? `${reflectApply(stringSlice, line, [0, logMaxChars])}\u2026 [cut]` : line);
      if (logLinesLeft === 0) host.log("warn", "log limit reached for this call; further lines are dropped");
    };
  }
  const logger = freeze({
    name: "animaworks.tools",
    debug: makeLogMethod("debug"),
    info: makeLogMethod("info"),
    warn: makeLogMethod("warn"),
    warning: makeLogMethod("warn"),
    error: makeLogMethod("error"),
    exception: makeLogMethod("error"),
  });
  const console = freeze({
    log: logger.info,
    info: logger.info,
    debug: logger.debug,
    warn: logger.warn,
    error: logger.error,
  });

  // ---- timers (owned by the current call; the host clears them when the call ends) -----------------
  interface Timer {
    callback: (...args: unknown[]) => unknown;
    args: unknown[];
  }
  const timers = new mapCtor<number, Timer>();
  let nextTimerId = 1;
  const MAX_PENDING_TIMERS = MAX_TIMERS_PER_CALL;
  function setTimeout(callback: (...args: unknown[]) => unknown, delayMs?: number, ...args: unknown[]): number {
    if (typeof callback !== "function") throw new TypeError("setTimeout needs a function as its first argument");
    if (reflectApply(mapSize, timers, []) >= MAX_PENDING_TIMERS) throw new rangeErrorCtor(`too many pending timers (limit ${MAX_PENDING_TIMERS})`);
    // As in Node: a delay that is not a number in [1, 2^31-1] ms becomes 1 ms ("10" is 10 ms).
    let delay = (delayMs as number) * 1;
    if (!(delay >= 1 && delay <= MAX_TIMER_DELAY_MS)) delay = 1;
    const id = nextTimerId++;
    reflectApply(mapSet, timers, [id, { callback, args }]);
    host.setTimer(id, delay);
    return id;
  }
  function clearTimeout(id: unknown): void {
    if (typeof id === "number" && reflectApply(mapDelete, timers, [id])) host.clearTimer(id);
  }
  function sleep(delayMs: number): Promise<void> {
    return new promiseCtor<void>((resolve) => setTimeout(() => resolve(), delayMs));
  }
  function fireTimer(id: number): void {
    const timer = reflectApply(mapGet, timers, [id]) as Timer | undefined;
    if (!timer) return;
    reflectApply(mapDelete, timers, [id]);
    try {
      reflectApply(timer.callback, undefined, timer.args);
    } catch (error) {
      host.log("error", `Uncaught error in a setTimeout callback: ${safeString(error)}`);
    }
  }

  // ---- the @animaworks/tool module -----------------------------------------------------------------
  const capabilities = installCapabilities(host, ToolError, ToolConfigError);
  const { fs, fetch, getCredential, get_credential, progress, isCancelled, CapabilityError } = capabilities.api;
  // Exactly the contract's `TOOL_API_EXPORTS`, which the bundler lets tools import: a name missing here
  // or added here without the list fails the type check.
  const toolApi = freeze({
    logger,
    setTimeout,
    clearTimeout,
    sleep,
    ToolError,
    ToolConfigError,
    InvalidInput,
    fs,
    fetch,
    getCredential,
    get_credential,
    progress,
    isCancelled,
    CapabilityError,
  } satisfies Record<ToolApiExport, unknown>);

  const hidden = { enumerable: false, writable: false, configurable: false } as const;
  defineProperty(global, "__animaworksTool", { ...hidden, value: toolApi });
  defineProperty(global, "console", { value: console, enumerable: false, writable: true, configurable: true });
  defineProperty(global, "setTimeout", { value: setTimeout, enumerable: false, writable: true, configurable: true });
  defineProperty(global, "clearTimeout", { value: clearTimeout, enumerable: false, writable: true, configurable: true });

  // ---- module registration -------------------------------------------------------------------------
  let toolModule: Record<string, unknown> | undefined;
  defineProperty(global, "__awRegister", {
    ...hidden,
    value(moduleExports: unknown, retireWhen?: unknown) {
      if (toolModule !== undefined) throw new errorCtor("tool module registered twice");
      toolModule =
        (typeof moduleExports === "object" || typeof moduleExports === "function") && moduleExports !== null ? (moduleExports as Record<string, unknown>) : {};
      memory.retireWhen(retireWhen);
    },
  });

  function exportOf(...names: string[]): unknown {
    for (const name of names) {
      const value = toolModule?.[name];
      if (value !== undefined) return value;
    }
    return undefined;
  }

  // ---- result framing (result-framing.ts) -----------------------------------------------------------
  const { frameResult, failure, withStack, strictReplacer, describeJsonError } = installResultFraming(safeString, boundedStringify);

  const errorEnvelope = installErrorFraming({
    classes: errorClasses,
    hostTypeOf: capabilities.errorTypeOf,
    isInstance,
    safeString,
    errorName: (error) => reflectApply(errorGetName, error, []),
    errorMessage: (error) => reflectApply(errorGetMessage, error, []),
    failure,
  });

  /** The envelope as JSON. Copied onto a null-prototype object: an inherited toJSON must not apply. */
  function encode(envelope: CallEnvelope): string {
    const plain = objectAssign(objectCreate(null), envelope) as CallEnvelope;
    if (memory.exceeded()) return jsonStringify(objectAssign(objectCreate(null), failure("MemoryLimit", "buffer allocation failed"), { recycle: true }));
    if (memory.retire()) plain.recycle = true;
    return jsonStringify(plain);
  }

  /**
   * The promise handed to the host. Its own `constructor` names the real Promise as species, so that
   * isolated-vm's `then` on it cannot be steered into tool code by a patched `Promise.prototype`.
   */
  function sealed(promise: Promise<string>): Promise<string> {
    // defineProperty returns the promise itself, which is returned below: nothing floats.
    // eslint-disable-next-line @typescript-eslint/no-floating-promises
    defineProperty(promise, "constructor", { value: freeze(objectAssign(objectCreate(null), { [speciesSymbol]: promiseCtor })) });
    return promise;
  }

  // ---- describe: what the module exports and which schemas it declares ----------------------------
  function described(exports: Record<string, string>, schemas: unknown, profile: unknown): DescribeEnvelope {
    return { ok: true, exports, schemas, profile };
  }
  async function describeModule(): Promise<string> {
    const exportsInfo = objectCreate(null) as Record<string, string>;
    try {
      for (const name of objectKeys(toolModule ?? {})) exportsInfo[name] = typeof toolModule?.[name];
    } catch (error) {
      return encode(failure("LoadError", `reading the module's exports failed: ${safeString(error)}`));
    }
    const getSchemas = exportOf("get_tool_schemas", "getToolSchemas");
    if (typeof getSchemas !== "function") return jsonStringify(described(exportsInfo, null, null));
    let schemas: unknown;
    try {
      schemas = await reflectApply(getSchemas, toolModule, []);
    } catch (error) {
      return encode(failure("LoadError", `get_tool_schemas() threw: ${safeString(error)}`));
    }
    const profile = exportOf("EXECUTION_PROFILE");
    try {
      return jsonStringify(
        described(
          exportsInfo,
          jsonParse(jsonStringify(schemas, strictReplacer) ?? "null"),
          profile === undefined ? null : jsonParse(jsonStringify(profile, strictReplacer) ?? "null"),
        ),
      );
    } catch (error) {
      return encode(failure("LoadError", `get_tool_schemas() returned something that is not plain JSON: ${describeJsonError(error)}`));
    }
  }

  // ---- call -----------------------------------------------------------------------------------------
  function invoke(entry: CallEntryKind, schemaName: string, payloadJson: string): unknown {
    const payload = jsonParse(payloadJson) as unknown;
    if (entry === "cli") {
      const cliMain = exportOf("cli_main", "cliMain");
      if (typeof cliMain !== "function") throw new ToolError("this tool has no cli_main");
      // The Anima's folder comes second, as dispatch's args carry anima_dir (Python's cli_main sees it as ANIMAWORKS_ANIMA_DIR).
      return reflectApply(cliMain, toolModule, [(payload as CliPayload).argv, (payload as CliPayload).anima_dir]);
    }
    const dispatch = exportOf("dispatch");
    if (typeof dispatch === "function") return reflectApply(dispatch, toolModule, [schemaName, payload]);
    const named = exportOf(schemaName);
    if (typeof named === "function") return reflectApply(named, toolModule, [payload]);
    throw new ToolError(`no handler for '${schemaName}': export dispatch(name, args) or a function named ${schemaName}`);
  }

  /** Runs the call and frames its outcome. `await` (unlike `.then`) never consults a patched species. */
  async function settle(entry: CallEntryKind, schemaName: string, payloadJson: string, maxBytes: number): Promise<string> {
    let envelope: CallEnvelope;
    try {
      envelope = frameResult(await invoke(entry, schemaName, payloadJson), maxBytes);
    } catch (error) {
      envelope = withStack(errorEnvelope(error), error, ToolError);
    }
    // The call ends here, inside the isolate: a timer the host fired just before it heard of the
    // result must find nothing to run (it would otherwise spin in the next call's time).
    endCall();
    return encode(envelope);
  }

  function callTool(
    entry: CallEntryKind,
    schemaName: string,
    payloadJson: string,
    maxBytes: number,
    maxLogLines: number,
    maxLogChars: number,
  ): Promise<string> {
    logLinesLeft = maxLogLines;
    logMaxChars = maxLogChars;
    return sealed(settle(entry, schemaName, payloadJson, maxBytes));
  }

  function endCall(): void {
    reflectApply(mapClear, timers, []);
    capabilities.endCall();
    logLinesLeft = 0;
  }

  const entry: Omit<GuestEntry, "compact"> = {
    describe: () => sealed(describeModule()),
    call: callTool,
    fireTimer,
    settleCapabilities: capabilities.settleMany,
    receiveText: capabilities.receiveText,
  };
  return entry;
}

/**
 * Called once, at the end of the prelude script (prelude-source.ts): installs the prelude and leaves one
 * global function, `BIND_GLOBAL(bridge)`, which the host calls once per context before any tool code
 * runs. It deletes itself, removes every global a tool may not hold (`removeUnreviewedGlobals`),
 * connects the prelude to the host's bridge and returns the entry object. So the same script runs in each
 * new context or is baked into a V8 startup snapshot (which cannot hold host callbacks), and a context
 * made from the snapshot only binds.
 *
 * The forwarding functions take their arguments by name, never by spread: a spread would iterate
 * through `Array.prototype[Symbol.iterator]`, which tool code may have replaced by then.
 */
// eslint-disable-next-line @typescript-eslint/no-unused-vars
function exposeBinder(global: Record<string, unknown>): void {
  const defineProperty = Object.defineProperty;
  const errorCtor = Error;
  const freeze = Object.freeze;
  const late: { bridge: GuestBridge | undefined; collect: (() => void) | undefined } = { bridge: undefined, collect: undefined };
  const host: GuestBridge = {
    log: (level, message) => late.bridge!.log(level, message),
    setTimer: (id, delayMs) => late.bridge!.setTimer(id, delayMs),
    clearTimer: (id) => late.bridge!.clearTimer(id),
    stop: (reason) => late.bridge!.stop(reason),
    capability: (id, name, argsJson) => late.bridge!.capability(id, name, argsJson),
  };
  const entry: GuestEntry = freeze({
    ...installPrelude(global, host),
    compact: (): boolean => {
      if (late.collect === undefined) return false;
      late.collect();
      return true;
    },
  });
  defineProperty(global, BIND_GLOBAL, {
    configurable: true,
    value: function (bridge: GuestBridge, flavour: unknown): GuestEntry {
      delete global[BIND_GLOBAL];
      if (late.bridge !== undefined) throw new errorCtor("already bound");
      const contextFlavour = flavour === "python" ? "python" : "tool";
      late.collect = collectorOf(global, contextFlavour);
      removeUnreviewedGlobals(global, contextFlavour);
      late.bridge = bridge;
      return entry;
    },
  });
}
