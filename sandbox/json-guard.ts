/*
 * `JSON.stringify` with an indent, bounded. Part of the prelude (joined into its scope by
 * src/isolation/isolate/prelude-source.ts; see prelude.ts), installed with the memory guards.
 *
 * V8 14 builds indented JSON without overflowing its stack however deep the value is, and without
 * isolated-vm's memory limit stopping it: `JSON.stringify(node, null, 2)` of a value whose `toJSON`
 * returns ever deeper objects grew a 32 MB isolate's process by 600 MB until the call's timeout, and
 * 20,000 nested arrays took it to V8's longest string (≈ 512 MB) before it failed. Compact JSON still
 * overflows the stack early. So an indented stringify is done in two steps here:
 *  1. V8's compact stringify of the value with the caller's replacer: `toJSON` and the replacer run
 *     once, as in V8's own; a deep value ends as a stack overflow (`RangeError`), as without an indent.
 *  2. The length the indented text would have is counted from the compact text (its depth is bounded
 *     now); beyond `MAX_INDENTED_CHARS` it is a `RangeError`, else V8 indents the parsed compact text,
 *     which holds nothing but plain data.
 * The result is the same text V8 gives (same key order, numbers and escapes).
 */

/** Longest indented JSON text a tool can make, in characters (64 Mi: far beyond any result the host takes). */
const MAX_INDENTED_CHARS = 2 ** 26;

type Stringify = (value: unknown, replacer?: unknown, space?: unknown) => string | undefined;

// eslint-disable-next-line @typescript-eslint/no-unused-vars
function installJsonGuard(global: Record<string, unknown>): Stringify {
  // Captured before any tool code runs (see prelude.ts).
  const json = global["JSON"] as { stringify: Stringify; parse: (text: string) => unknown };
  const stringify = json.stringify;
  const parse = json.parse;
  const reflectApply = Reflect.apply;
  const defineProperty = Object.defineProperty;
  const charCodeAt = String.prototype.charCodeAt;
  const stringSlice = String.prototype.slice;
  const numberCtor = Number;
  const stringCtor = String;
  const mathMin = Math.min;
  const mathFloor = Math.floor;
  const rangeErrorCtor = RangeError;
  const ordinaryHasInstance = Function.prototype[Symbol.hasInstance];
  const isA = (value: unknown, ctor: unknown) => reflectApply(ordinaryHasInstance, ctor, [value]);

  /** The gap the standard derives from `space` (SerializeJSONProperty's caller, steps 5–8). */
  function gapOf(space: unknown): string {
    if (typeof space === "object" && space !== null) {
      if (isA(space, numberCtor)) space = numberCtor(space);
      else if (isA(space, stringCtor)) space = stringCtor(space);
    }
    if (typeof space === "number") {
      const count = mathMin(10, space === space ? mathFloor(space) : 0);
      let gap = "";
      for (let i = 0; i < count; i++) gap += " ";
      return gap;
    }
    if (typeof space === "string") return reflectApply(stringSlice, space, [0, 10]);
    return "";
  }

  /** Characters indenting adds to compact JSON text with `gapLength`: newlines, indents, ": " spaces. */
  function indentedExtra(text: string, gapLength: number): number {
    let depth = 0;
    let extra = 0;
    for (let i = 0; i < text.length; i++) {
      const code = reflectApply(charCodeAt, text, [i]);
      if (code === 0x22) {
        // a string: skip to its closing quote (compact JSON escapes every quote and backslash inside)
        for (i++; i < text.length; i++) {
          const inner = reflectApply(charCodeAt, text, [i]);
          if (inner === 0x5c) i++;
          else if (inner === 0x22) break;
        }
      } else if (code === 0x5b || code === 0x7b) {
        const next = reflectApply(charCodeAt, text, [i + 1]);
        if (next === 0x5d || next === 0x7d)
          i++; // [] and {} stay as they are
        else extra += 1 + gapLength * ++depth;
      } else if (code === 0x2c) extra += 1 + gapLength * depth;
      else if (code === 0x3a) extra += 1;
      else if (code === 0x5d || code === 0x7d) extra += 1 + gapLength * --depth;
    }
    return extra;
  }

  // A method, so that it is named "stringify", has length 3 and is not a constructor, like V8's.
  const guarded = {
    stringify(value: unknown, replacer?: unknown, space?: unknown): string | undefined {
      const gap = gapOf(space);
      if (gap === "") return stringify(value, replacer);
      const compact = stringify(value, replacer);
      if (compact === undefined) return undefined;
      if (compact.length + indentedExtra(compact, gap.length) > MAX_INDENTED_CHARS) {
        throw new rangeErrorCtor(`Invalid string length: indented JSON longer than ${MAX_INDENTED_CHARS} characters`);
      }
      return stringify(parse(compact), null, gap);
    },
  };
  defineProperty(json, "stringify", { value: guarded.stringify, writable: true, enumerable: false, configurable: true });
  return guarded.stringify;
}
