/**
 * How many times a schema's parts may be applied along one path of a value, worst case: a bound that a
 * tool's schema must keep. JSON Schema's applicators (`anyOf`, `oneOf`, `allOf`, `not`, `if`/`then`/
 * `else`, `dependencies`, `$ref`) apply several schemas to one value, and each of those applies its own
 * parts to the value's children: nested, they multiply. A 1.9 KB schema of six definitions, each an
 * `anyOf` of ten `$ref`s to the one before, held the host 1.4 s on the argument `{"a":1}` (1.1 M errors),
 * and each level more multiplied that by ten (schema_fan_out).
 *
 * The count per path: a schema is 1, plus what its applicators apply to the same value (summed), plus
 * the most any one of its child keywords (`properties`, `items`…) applies along a path below. A `$ref`
 * back into a schema being counted is a cycle: through a child keyword it is a recursive structure (one
 * level more per level of the value: counted once), through applicators alone it never ends (infinite).
 */

/** Applications along one path of a value a tool's schema may cause at most. */
export const MAX_SCHEMA_FAN_OUT = 10_000;

const SAME_VALUE_LISTS = ["allOf", "anyOf", "oneOf"] as const;
const SAME_VALUE_ONE = ["not", "if", "then", "else"] as const;
const CHILD_ONE = ["items", "additionalItems", "contains", "additionalProperties", "propertyNames"] as const;
const CHILD_MAPS = ["properties", "patternProperties"] as const;

/** The fan-out of `root` (past `MAX_SCHEMA_FAN_OUT`, that bound plus one: counting stops there). */
export function schemaFanOut(root: unknown): number {
  // Each schema object is counted once (linear in the schema); a count that cut a cycle short is kept
  // as it is (a recursive structure's per-level count).
  const memo = new Map<unknown, number>();
  /** The schemas being counted, with how many child keywords lay above each when it was entered. */
  const counting = new Map<unknown, number>();
  let childDepth = 0;
  const over = MAX_SCHEMA_FAN_OUT + 1;
  const cap = (n: number): number => Math.min(n, over);

  const resolve = (ref: string): unknown => {
    if (ref === "#") return root;
    if (!ref.startsWith("#/")) return undefined; // non-local references are refused elsewhere (schemas.ts)
    let at: unknown = root;
    for (const raw of ref.slice(2).split("/")) {
      let part: string;
      try {
        part = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
      } catch {
        return undefined;
      }
      if (typeof at !== "object" || at === null || !Object.hasOwn(at, part)) return undefined;
      at = (at as Record<string, unknown>)[part];
    }
    return at;
  };

  const count = (schema: unknown): number => {
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return 1;
    const known = memo.get(schema);
    if (known !== undefined) return known;
    const entered = counting.get(schema);
    // Met again with a child keyword between: a recursive structure; with none: it applies itself forever.
    if (entered !== undefined) return childDepth > entered ? 1 : over;
    counting.set(schema, childDepth);
    const s = schema as Record<string, unknown>;
    let same = 1;
    const sameOf = (sub: unknown): void => void (same = cap(same + count(sub)));
    if (typeof s["$ref"] === "string") sameOf(resolve(s["$ref"]));
    for (const key of SAME_VALUE_LISTS) if (Array.isArray(s[key])) for (const sub of s[key] as unknown[]) sameOf(sub);
    for (const key of SAME_VALUE_ONE) if (key in s) sameOf(s[key]);
    if (typeof s["dependencies"] === "object" && s["dependencies"] !== null) for (const sub of Object.values(s["dependencies"])) sameOf(sub);
    let below = 0;
    const childOf = (sub: unknown): void => {
      childDepth++;
      below = Math.max(below, count(sub));
      childDepth--;
    };
    for (const key of CHILD_ONE) if (key in s) (Array.isArray(s[key]) ? (s[key] as unknown[]) : [s[key]]).forEach(childOf);
    for (const key of CHILD_MAPS) if (typeof s[key] === "object" && s[key] !== null) Object.values(s[key]).forEach(childOf);
    counting.delete(schema);
    const total = cap(same + below);
    memo.set(schema, total);
    return total;
  };
  return count(root);
}
