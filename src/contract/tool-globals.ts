/**
 * What a tool's global may hold: the allow-list the prelude keeps at bind (sandbox/prelude.ts
 * `removeUnreviewedGlobals`), the globals V8 provides that it removes (each with why), and the globals
 * the host itself has V8 install for the prelude's use alone. Part of the host ↔ isolate contract
 * (src/contract/isolate.ts), and inlined into the prelude script like it, under the same rules: types and
 * plain constants only, no functions, classes or imports (src/isolation/isolate/prelude-source.ts).
 */

/** The typed-array constructors a tool's global holds, each guarded by the prelude (sandbox/memory-guards.ts). */
export const TYPED_ARRAY_GLOBALS = [
  "Int8Array",
  "Uint8Array",
  "Uint8ClampedArray",
  "Int16Array",
  "Uint16Array",
  "Int32Array",
  "Uint32Array",
  "Float16Array",
  "Float32Array",
  "Float64Array",
  "BigInt64Array",
  "BigUint64Array",
] as const;

/**
 * Every name a tool's global may hold once its context is bound: the ECMAScript globals this host has
 * reviewed, then what the prelude adds. When the host binds a context, the prelude deletes every other
 * own key of the global (sandbox/prelude.ts `removeUnreviewedGlobals`), so a global that a newer V8 adds
 * never reaches tools unreviewed; test/isolation/isolate/tool-globals.test.ts fails until each global of a fresh
 * context is named here or in `REMOVED_GLOBALS`.
 */
export const TOOL_GLOBALS = [
  // ECMAScript values and functions
  "globalThis",
  "Infinity",
  "NaN",
  "undefined",
  "eval",
  "isFinite",
  "isNaN",
  "parseFloat",
  "parseInt",
  "decodeURI",
  "decodeURIComponent",
  "encodeURI",
  "encodeURIComponent",
  "escape",
  "unescape",
  // fundamental objects, numbers, text, collections (on the V8 heap, counted by its limit)
  "Object",
  "Function",
  "Boolean",
  "Symbol",
  "Number",
  "BigInt",
  "Math",
  "Date",
  "String",
  "RegExp",
  "JSON",
  "Array",
  "Map",
  "Set",
  "WeakMap",
  "WeakSet",
  "Promise",
  "Proxy",
  "Reflect",
  // iterator helpers (V8 12+) and explicit resource management (V8 14): plain objects and functions
  "Iterator",
  "DisposableStack",
  "AsyncDisposableStack",
  "Error",
  "AggregateError",
  "EvalError",
  "RangeError",
  "ReferenceError",
  "SyntaxError",
  "TypeError",
  "URIError",
  "SuppressedError",
  // buffers: isolated-vm's allocator counts them; each constructor is guarded (sandbox/memory-guards.ts)
  "ArrayBuffer",
  "DataView",
  ...TYPED_ARRAY_GLOBALS,
  // ICU memory outside the heap limit, budgeted per isolate (sandbox/memory-guards.ts)
  "Intl",
  // the prelude's: the sandbox API (console replaced by the call's log) and the bundle's registration hooks
  "console",
  "setTimeout",
  "clearTimeout",
  "__animaworksTool",
  "__awRegister",
] as const;

/**
 * The name under which V8 installs its garbage-collection function in every context of a sandbox process
 * (`--expose-gc-as`, src/isolation/isolate/v8-flags.ts). The prelude takes it at bind, before it is
 * removed, to compact an idle isolate's heap when the host asks (`GuestEntry.compact`): V8 shrinks a heap
 * by itself only from tasks it runs while the isolate is entered, and an isolate idle in the warm pool
 * never is. Absent where the process started without the flag (a one-shot CLI call): nothing is compacted.
 * V8 installs it as a non-configurable property of the global, which no code can delete: a bound context
 * keeps the key with the value `undefined`, read-only (a tool's global so holds the name, never the function).
 */
export const COLLECT_GARBAGE_GLOBAL = "__awCollectGarbage";

/**
 * Globals V8 provides that a tool's global never holds, each with why. Reviewed on purpose: a name in
 * neither list fails test/isolation/isolate/tool-globals.test.ts (and is deleted at bind all the same).
 */
export const REMOVED_GLOBALS = {
  WebAssembly: "its memory is outside isolated-vm's limit, and its async compile never settles in an isolate",
  SharedArrayBuffer: "shared memory outside the heap limit, and a clock for timing attacks",
  Atomics: "Atomics.wait blocks the isolate's thread outside the call's timeout",
  FinalizationRegistry: "its callbacks run after the call ended, as the GC decides",
  WeakRef: "makes GC timing observable across calls",
  Temporal: "its objects hold time-zone and calendar data outside the V8 heap, which no budget counts yet",
  [COLLECT_GARBAGE_GLOBAL]: "the host's: a tool calling it could spend its call, and its CPU share, in full collections",
} as const;

/** The constructors of `Intl` a tool may use, each budgeted by the prelude (sandbox/memory-guards.ts). */
export const TOOL_INTL_CONSTRUCTORS = [
  "Collator",
  "DateTimeFormat",
  "DisplayNames",
  "DurationFormat",
  "ListFormat",
  "Locale",
  "NumberFormat",
  "PluralRules",
  "RelativeTimeFormat",
  "Segmenter",
] as const;

/** Members of `Intl` a tool may use (its constructors are `TOOL_INTL_CONSTRUCTORS`). Others are deleted at bind. */
export const TOOL_INTL_MEMBERS = ["getCanonicalLocales", "supportedValuesOf", ...TOOL_INTL_CONSTRUCTORS] as const;

/** Members of `Intl` V8 provides that tools never get, each with why. */
export const REMOVED_INTL_MEMBERS = {
  v8BreakIterator: "V8's non-standard ICU break iterator: ICU memory that the Intl budget did not count (use Intl.Segmenter)",
} as const;

/**
 * Globals a Python tool's context keeps through the bind for Pyodide's boot only (sandbox/python-runtime.ts deletes them before tool code
 * runs): CPython is a WebAssembly module (its memory growth capped there, the process's memory cap behind it), and Pyodide's one
 * FinalizationRegistry frees Python objects as V8's GC decides — a Python finaliser may so run outside a call, with no capability, timer or log.
 */
export const PYTHON_BOOT_GLOBALS = ["WebAssembly", "FinalizationRegistry"] as const;
