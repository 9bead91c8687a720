import type { CodeKeywordDefinition, KeywordCxt, KeywordErrorDefinition, _ as Tag, str as StrTag } from "ajv";
import { canonicalJson } from "../canonical-json.js";

/**
 * `enum` in time linear in the value. ajv's own compares a value with every allowed one in turn: a tool
 * whose schema allows 5,000 names for each of 30,000 items (a 60 KB argument) held the host's thread
 * ≈ 0.5 s per call, and a 7 MB argument 44 s (enum_scan). Here the allowed values of each `enum` are
 * written once as canonical JSON into a Set (kept per list, as long as the schema lives), and a value is
 * looked up by its own canonical JSON: equal exactly when fast-deep-equal says so for JSON values, as in
 * unique-items.ts. The error is ajv's own: keyword `enum`, params `{allowedValues}`, message "must be
 * equal to one of the allowed values".
 */

/** How a generated standalone validator (ajv.ts `validatorSource`) obtains `inEnum`. */
export const ENUM_MODULE = "animaworks:enum";

const keysOf = new WeakMap<readonly unknown[], Set<string>>();

/** Whether `value` equals one of `allowed` (JSON equality). */
export function inEnum(allowed: readonly unknown[], value: unknown): boolean {
  let keys = keysOf.get(allowed);
  if (!keys) {
    keys = new Set(allowed.map((item) => canonicalJson(item)));
    keysOf.set(allowed, keys);
  }
  return keys.has(canonicalJson(value));
}

/** The keyword definition, given ajv's code tags (ajv is loaded lazily: ajv.ts). */
export function enumKeyword(tags: { _: typeof Tag; str: typeof StrTag }): CodeKeywordDefinition {
  const { _ } = tags;
  const error: KeywordErrorDefinition = {
    message: "must be equal to one of the allowed values",
    params: ({ schemaCode }) => _`{allowedValues: ${schemaCode}}`,
  };
  return {
    keyword: "enum",
    schemaType: "array",
    error,
    code(cxt: KeywordCxt) {
      const { gen, data, schemaCode } = cxt;
      const check = gen.scopeValue("func", { ref: inEnum, code: _`require(${ENUM_MODULE}).inEnum` });
      cxt.fail(_`!${check}(${schemaCode}, ${data})`);
    },
  };
}
