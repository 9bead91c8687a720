import { type ValidateFunction, compileSchema, describeValidationErrors, getFirstErrorAjv } from "./ajv.js";

/**
 * A value checked against a schema, at a cost bounded by the value: every problem listed for a value of
 * at most `ALL_ERRORS_MAX_JSON_CHARS` characters of JSON, the first one only for a larger value (an
 * argument or result of up to 64 MiB, each wrong item of which was one error object and one line:
 * all_errors_flood). Either way at most `MAX_PROBLEM_LINES` lines, the rest counted.
 */

/** Values with more characters of JSON than this are checked to their first problem only. */
export const ALL_ERRORS_MAX_JSON_CHARS = 64 * 1024;
/** Problems a refusal lists at most; one more line counts the rest. */
export const MAX_PROBLEM_LINES = 20;

/** Validators that stop at the first error, per schema object (each lives as long as its tool version), or why there is none. */
const firstErrorValidators = new WeakMap<object, ValidateFunction | string>();

/**
 * What is wrong with `value` under `schema`, one line per problem (empty: valid). `validate` is the
 * schema's validator that collects every error; `jsonChars` the length of `value` as JSON.
 */
export function problemsOf(validate: ValidateFunction, schema: object, value: unknown, jsonChars: number, maxNameChars?: number): string[] {
  if (jsonChars <= ALL_ERRORS_MAX_JSON_CHARS) {
    if (validate(value)) return [];
    const lines = describeValidationErrors(validate.errors, maxNameChars);
    if (lines.length <= MAX_PROBLEM_LINES) return lines;
    return [...lines.slice(0, MAX_PROBLEM_LINES), `and ${lines.length - MAX_PROBLEM_LINES} more problems`];
  }
  const first = firstErrorValidator(schema, jsonChars);
  if (typeof first === "string") return [first];
  return first(value) ? [] : describeValidationErrors(first.errors, maxNameChars).slice(0, 1);
}

function firstErrorValidator(schema: object, jsonChars: number): ValidateFunction | string {
  let first = firstErrorValidators.get(schema);
  if (first === undefined) {
    try {
      first = compileSchema(schema, getFirstErrorAjv());
    } catch {
      // ajv nests a first-error validator's checks: a schema of thousands of parts overflows the stack.
      first = "has too many parts to be checked one problem at a time";
    }
    firstErrorValidators.set(schema, first);
  }
  if (typeof first !== "string") return first;
  return `the value (${jsonChars} characters of JSON) is larger than ${ALL_ERRORS_MAX_JSON_CHARS} characters, and its schema ${first}: send a smaller one`;
}
