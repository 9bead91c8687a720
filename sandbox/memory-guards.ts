/*
 * Memory outside the V8 heap. Runs inside the isolate as part of the prelude: the host concatenates this
 * file and prelude.ts into one function scope (src/isolation/isolate/prelude-source.ts), so nothing declared
 * here becomes a global the tool could see.
 *
 * isolated-vm limits the V8 heap and the ArrayBuffers its allocator hands out. Three things escape it
 * (and one engine bug, a split too big to hold, is refused below):
 *  - Resizable ArrayBuffers (`maxByteLength`) take their memory from V8's page allocator: 1 GiB from a
 *    32 MB isolate. ArrayBuffer therefore never receives that option.
 *  - Intl objects hold ICU memory isolated-vm does not count (~30 KB per DateTimeFormat, thousands per
 *    second). They are budgeted per isolate; an isolate that used its budget is retired after the call.
 *  - A tool that catches "Array buffer allocation failed" and retries makes every retry run full GCs,
 *    during which isolated-vm's timeout cannot interrupt it (the isolate's thread is then lost). The
 *    first failure stops the call as MemoryLimit instead, and later buffer allocations fail at once.
 *    Only a failure no tool code could have thrown counts (`engineOnly`): a tool's own RangeError with
 *    that message, thrown from a length's `valueOf`, an iterator or a Proxy `new.target` inside the
 *    constructor, would otherwise stop its call as MemoryLimit and recycle its isolate at will. Lengths
 *    are therefore coerced before the constructor runs, and a constructor whose arguments or `new.target`
 *    can run tool code does not count its failures (the deadline remains the backstop there).
 *    A buffer the engine allocates without calling a constructor (e.g. `slice` on a typed array whose
 *    `constructor` was deleted) is not seen here: the host's deadline and, in process mode, the
 *    process boundary are the backstop for that.
 */

interface MemoryGuards {
  /** A buffer allocation failed for lack of memory during this isolate's life. */
  exceeded(): boolean;
  /** This isolate has used a budget, or its module's own check (`retireWhen`) says so: it must not serve another call. */
  retire(): boolean;
  /**
   * A check the registered module adds (the Python runtime's: an interpreter whose memory grew well past its
   * boot is not kept warm, since WebAssembly memory never shrinks). A check that throws retires the isolate.
   */
  retireWhen(check: unknown): void;
}

const MAX_INTL_OBJECTS = 500;
/** Most pieces a split may give: half of V8's array length limit (2^27), far beyond what a heap limit allows. */
const MAX_SPLIT_PIECES = 2 ** 26;
const SPLIT_TOO_BIG = "Invalid array length: the split would give too many pieces";
const ALLOCATION_FAILED = "Array buffer allocation failed";

// eslint-disable-next-line @typescript-eslint/no-unused-vars
function installMemoryGuards(global: Record<string, unknown>, isInstance: (value: unknown, ctor: unknown) => boolean, onExceeded: () => void): MemoryGuards {
  // Captured before any tool code runs (see prelude.ts).
  const reflectApply = Reflect.apply;
  const reflectConstruct = Reflect.construct;
  const reflectOwnKeys = Reflect.ownKeys;
  const defineProperty = Object.defineProperty;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const getPrototypeOf = Object.getPrototypeOf;
  const setPrototypeOf = Object.setPrototypeOf;
  const rangeErrorCtor = RangeError;

  let memoryExceeded = false;
  let retireAfterCall = false;
  let moduleCheck: unknown;
  let intlObjects = 0;

  function bufferGuard(args: unknown[]): unknown[] {
    if (memoryExceeded) throw new rangeErrorCtor(ALLOCATION_FAILED);
    return args;
  }
  function intlGuard(args: unknown[]): unknown[] {
    if (++intlObjects >= MAX_INTL_OBJECTS) retireAfterCall = true;
    if (intlObjects > MAX_INTL_OBJECTS) {
      throw new rangeErrorCtor(`too many Intl objects in this sandbox (limit ${MAX_INTL_OBJECTS}); create formatters once and reuse them`);
    }
    return args;
  }
  /** Called only for a failure no tool code could have thrown (see `guardConstructor`). */
  function noteAllocationFailure(error: unknown): void {
    if (memoryExceeded || !isInstance(error, rangeErrorCtor)) return;
    if (getOwnPropertyDescriptor(error, "message")?.value !== ALLOCATION_FAILED) return;
    memoryExceeded = true;
    retireAfterCall = true;
    onExceeded();
  }

  /**
   * Replaces `owner[name]` by a constructor that runs `guard` on the arguments first, and makes it the
   * `constructor` of the prototype, so that `instance.constructor` does not lead back to the original.
   * `instanceof`, subclassing, statics and species keep working. `engineOnly` says whether the native
   * constructor, given `checked` arguments, runs no tool code: only then is its allocation failure the
   * engine's, and noted. A `new.target` other than the wrapper (a subclass, a Proxy) is read by the
   * constructor and may run tool code: its failures are never noted.
   */
  function guardConstructor(
    owner: Record<string, unknown>,
    name: string,
    guard: (args: unknown[]) => unknown[],
    engineOnly: (checked: unknown[]) => boolean = () => false,
  ): void {
    const native = owner[name] as (new (...args: unknown[]) => unknown) | undefined;
    if (typeof native !== "function") return;
    const wrapper = function (this: unknown, ...args: unknown[]): unknown {
      const checked = guard(args);
      const target = new.target;
      const counts = (target === undefined || target === wrapper) && engineOnly(checked);
      try {
        // Intl constructors may be called without `new`; buffers and typed arrays then throw as usual.
        return target === undefined ? reflectApply(native, this, checked) : reflectConstruct(native, checked, target);
      } catch (error) {
        if (counts) noteAllocationFailure(error);
        throw error;
      }
    };
    for (const key of reflectOwnKeys(native)) {
      if (key !== "prototype") defineProperty(wrapper, key, getOwnPropertyDescriptor(native, key)!);
    }
    defineProperty(wrapper, "prototype", { value: native.prototype, writable: false, enumerable: false, configurable: false });
    setPrototypeOf(wrapper, getPrototypeOf(native) as object | null);
    defineProperty(native.prototype, "constructor", { value: wrapper, writable: true, enumerable: false, configurable: true });
    defineProperty(owner, name, { value: wrapper, writable: true, enumerable: false, configurable: true });
  }

  guardConstructor(
    global,
    "ArrayBuffer",
    (args) => {
      const options = args[1];
      if (typeof options === "object" && options !== null && (options as { maxByteLength?: unknown }).maxByteLength !== undefined) {
        throw new rangeErrorCtor("resizable ArrayBuffers are not available in the sandbox");
      }
      // The length as a number here, outside the constructor: its `valueOf` is tool code. Unary plus is
      // the constructor's own ToNumber (a BigInt throws the same TypeError).
      const length = args[0];
      return bufferGuard([length === undefined ? undefined : +(length as number)]);
    },
    () => true,
  );
  // A typed array's constructor runs no tool code for a primitive length or a typed array to copy (its
  // brand is checked through the native getter, which runs nothing of a Proxy); for anything else (an
  // iterable, an array-like, a buffer with offsets) it may.
  const typedArrayLength = getOwnPropertyDescriptor(getPrototypeOf(Uint8Array.prototype) as object, "length")!.get!;
  const isTypedArray = (value: unknown): boolean => {
    try {
      reflectApply(typedArrayLength, value, []);
      return true;
    } catch {
      return false;
    }
  };
  const typedArrayEngineOnly = (checked: unknown[]): boolean => {
    const source = checked[0];
    return (typeof source !== "object" && typeof source !== "function") || source === null || isTypedArray(source);
  };
  // `ArrayBuffer.prototype.resize` is removed by the prelude (removeUnreviewedGlobals), for every context.
  for (const name of TYPED_ARRAY_GLOBALS) guardConstructor(global, name, bufferGuard, typedArrayEngineOnly);

  const intl = global["Intl"] as Record<string, unknown> | undefined;
  if (intl) {
    for (const name of TOOL_INTL_CONSTRUCTORS) guardConstructor(intl, name, intlGuard);
    // Each Segments object holds its own ICU break iterator: it counts like a constructor call.
    const segmenterProto = (intl["Segmenter"] as { prototype?: Record<string, unknown> } | undefined)?.prototype;
    const segment = segmenterProto?.["segment"];
    if (segmenterProto && typeof segment === "function") {
      defineProperty(segmenterProto, "segment", {
        value: function segment_(this: unknown, ...args: unknown[]): unknown {
          return reflectApply(segment as (...a: unknown[]) => unknown, this, intlGuard(args));
        },
        writable: true,
        enumerable: false,
        configurable: true,
      });
    }
  }

  // V8 aborts the whole process, instead of throwing, when a split would give more pieces than an array
  // can hold (crbug.com/1201626): `s.split("")` of a 2^27-character string built by doubling (a rope,
  // nearly free to make) ends the host, or the one-shot CLI, with a fatal error. Splits that could come
  // near that are counted first and refused with the RangeError V8 should have thrown.
  const stringProto = (global["String"] as { prototype: Record<string, unknown> }).prototype;
  const split = stringProto["split"] as (this: unknown, ...args: unknown[]) => unknown;
  const indexOf = stringProto["indexOf"] as (this: string, search: string, from: number) => number;
  const splitSymbol = Symbol.split;
  // A method (not a function expression): named "split", length 2 and not a constructor, like the original.
  const guarded = {
    split(this: unknown, separator: unknown, limit: unknown): unknown {
      // Fast path: a string too short to give that many pieces, whatever the separator.
      if (typeof this === "string" && this.length < MAX_SPLIT_PIECES) return reflectApply(split, this, [separator, limit]);
      // The standard's steps (String.prototype.split), with the piece count checked before the split.
      if (this === undefined || this === null) return reflectApply(split, this, [separator, limit]);
      if (separator !== undefined && separator !== null) {
        const custom = (separator as Record<symbol, unknown>)[splitSymbol];
        if (custom !== undefined && custom !== null) return reflectApply(custom as (...a: unknown[]) => unknown, separator, [this, limit]);
      }
      const text = `${this as string}`;
      const max = limit === undefined ? 2 ** 32 - 1 : (limit as number) >>> 0;
      const by = `${separator as string}`;
      if (separator !== undefined && text.length >= MAX_SPLIT_PIECES && max >= MAX_SPLIT_PIECES) {
        if (by === "") throw new rangeErrorCtor(SPLIT_TOO_BIG);
        let pieces = 1;
        for (let at = reflectApply(indexOf, text, [by, 0]); at >= 0; at = reflectApply(indexOf, text, [by, at + by.length])) {
          if (++pieces >= MAX_SPLIT_PIECES) throw new rangeErrorCtor(SPLIT_TOO_BIG);
        }
      }
      return reflectApply(split, text, [separator === undefined ? undefined : by, max]);
    },
  };
  defineProperty(stringProto, "split", { value: guarded.split, writable: true, enumerable: false, configurable: true });

  return {
    exceeded: () => memoryExceeded,
    retire(): boolean {
      if (retireAfterCall || typeof moduleCheck !== "function") return retireAfterCall;
      try {
        return reflectApply(moduleCheck, undefined, []) === true;
      } catch {
        return true;
      }
    },
    retireWhen(check: unknown): void {
      moduleCheck = check;
    },
  };
}
