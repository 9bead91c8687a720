import type { CodeKeywordDefinition, KeywordCxt, KeywordErrorDefinition, _ as Tag, str as StrTag } from "ajv";
import { canonicalJson } from "../canonical-json.js";

/**
 * `uniqueItems` in linear time. ajv's own keyword compares every pair of items that are not all of one
 * scalar type (fast-deep-equal, quadratic): a tool whose schema says `uniqueItems: true` on an array of
 * objects let one caller's 30,000-item call hold the host's event loop, which validates arguments for
 * every Anima, for 15 s (another Anima's one-line call waited as long; an MCP `ping` 18 s).
 *
 * Here each item is written once as canonical JSON (canonical-json.ts: keys sorted at every level) and
 * looked up in a Map, so that two items are duplicates exactly when fast-deep-equal says so for JSON
 * values (objects with the same members in any order, arrays item by item, `0` and `-0`, but `1` and
 * `"1"` differ). Arguments are JSON (execution/arguments.ts copies them through JSON), so no value has a
 * member JSON cannot write. The cost is the size of the array's text plus a sort of each object's keys.
 *
 * The error is ajv's own: keyword `uniqueItems`, params `{i, j}` (two indices of equal items, i < j),
 * message "must NOT have duplicate items (items ## j and i are identical)".
 */

/** How a generated standalone validator (ajv.ts `validatorSource`) obtains `duplicatePair`. */
export const UNIQUE_ITEMS_MODULE = "animaworks:unique-items";

/**
 * The first pair of equal items, scanning from the end as ajv does for scalar items: `[i, j]`, i < j, j
 * the last index of an item that also appears at i (the nearest such i); undefined when all differ.
 */
export function duplicatePair(items: readonly unknown[]): [number, number] | undefined {
  const seen = new Map<string, number>();
  for (let index = items.length - 1; index >= 0; index--) {
    const key = canonicalJson(items[index]);
    const later = seen.get(key);
    if (later !== undefined) return [index, later];
    seen.set(key, index);
  }
  return undefined;
}

/** The keyword definition, given ajv's code tags (ajv is loaded lazily: ajv.ts). */
export function uniqueItemsKeyword(tags: { _: typeof Tag; str: typeof StrTag }): CodeKeywordDefinition {
  const { _, str } = tags;
  const error: KeywordErrorDefinition = {
    message: ({ params: { i, j } }) => str`must NOT have duplicate items (items ## ${j} and ${i} are identical)`,
    params: ({ params: { i, j } }) => _`{i: ${i}, j: ${j}}`,
  };
  return {
    keyword: "uniqueItems",
    type: "array",
    schemaType: "boolean",
    error,
    code(cxt: KeywordCxt) {
      const { gen, data } = cxt;
      // The schema value is checked to be a boolean (schemaType); false asks for nothing.
      if ((cxt.schema as boolean) !== true) return;
      const find = gen.scopeValue("func", { ref: duplicatePair, code: _`require(${UNIQUE_ITEMS_MODULE}).duplicatePair` });
      const pair = gen.const("pair", _`${find}(${data})`);
      cxt.setParams({ i: _`${pair}[0]`, j: _`${pair}[1]` });
      cxt.fail(_`${pair} !== undefined`);
    },
  };
}
