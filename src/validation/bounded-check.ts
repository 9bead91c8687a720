import { type ValidateFunction, compileSchema, describeValidationErrors, getFirstErrorAjv } from "./ajv.js";

/**
 * A value checked against a schema with the errors it makes bounded by the value: every problem listed
 * for a value of at most `ALL_ERRORS_MAX_JSON_CHARS` characters of JSON, the first one only for a larger
 * value (an argument or result of up to 64 MiB, each wrong item of which was one error object and one
 * line: all_errors_flood). Either way at most `MAX_PROBLEM_LINES` lines, then the count of errors. What
 * the check itself costs still grows with the value's size times the schema's (README: security).
 */

/** Values with more characters of JSON than this are checked to their first problem only. */
export const ALL_ERRORS_MAX_JSON_CHARS = 64 * 1024;
/** Problems a refusal lists at most; one more line counts the rest. */
export const MAX_PROBLEM_LINES = 20;

/**
 * A value with at most this many JSON values (objects, arrays, scalars) is checked with every error
 * collected whatever its size, where no first-error validator can run (below): its errors are bounded by
 * its values.
 */
export const FALLBACK_MAX_JSON_VALUES = 10_000;

/** Validators that stop at the first error, per schema object (each lives as long as its tool version), or none. */
const firstErrorValidators = new WeakMap<object, ValidateFunction | null>();

/**
 * What is wrong with `value` under `schema`, one line per problem (empty: valid). `validate` is the
 * schema's validator that collects every error; `jsonChars` the length of `value` as JSON.
 */
export function problemsOf(validate: ValidateFunction, schema: object, value: unknown, jsonChars: number, maxNameChars?: number): string[] {
  if (jsonChars <= ALL_ERRORS_MAX_JSON_CHARS) return allProblems(validate, value, maxNameChars);
  const first = firstErrorValidator(schema);
  if (first) {
    try {
      return first(value) ? [] : describeValidationErrors(first.errors, maxNameChars, 1);
    } catch (error) {
      // Built, it may still overflow the stack when it runs (its checks nest one level per part).
      if (!(error instanceof RangeError)) throw error;
    }
  }
  // A schema too wide for a first-error validator (thousands of parts): a value of few parts, such as one
  // long string, is checked as a small one is; one of many could make as many errors, and is refused.
  if (valuesAtMost(value, FALLBACK_MAX_JSON_VALUES)) return allProblems(validate, value, maxNameChars);
  return [
    `the value (${jsonChars} characters of JSON, more than ${FALLBACK_MAX_JSON_VALUES} parts) is too large to be checked against a schema of this many parts: send a smaller one`,
  ];
}

function allProblems(validate: ValidateFunction, value: unknown, maxNameChars: number | undefined): string[] {
  if (validate(value)) return [];
  const lines = describeValidationErrors(validate.errors, maxNameChars, MAX_PROBLEM_LINES + 1);
  if (lines.length <= MAX_PROBLEM_LINES) return lines;
  return [...lines.slice(0, MAX_PROBLEM_LINES), `and more problems (${validate.errors?.length ?? 0} errors in all)`];
}

function firstErrorValidator(schema: object): ValidateFunction | null {
  let first = firstErrorValidators.get(schema);
  if (first === undefined) {
    try {
      first = compileSchema(schema, getFirstErrorAjv());
    } catch {
      // ajv nests a first-error validator's checks: a schema of thousands of parts overflows the stack.
      first = null;
    }
    firstErrorValidators.set(schema, first);
  }
  return first;
}

/** Whether `value` holds at most `max` JSON values, counted until it is known (never the whole of a large value). */
function valuesAtMost(value: unknown, max: number): boolean {
  let count = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    count++;
    if (typeof next !== "object" || next === null) continue;
    const parts = Array.isArray(next) ? next : Object.values(next);
    // Every value found counts, seen or waiting: past `max`, nothing more is looked at.
    if (count + pending.length + parts.length > max) return false;
    for (const part of parts) pending.push(part);
  }
  return true;
}
