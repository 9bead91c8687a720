import { ToolHostError } from "../errors.js";
import type { ToolSchema } from "../registry/schemas.js";
import { type ValidateFunction, compileSchema, loadValidator } from "../validation/ajv.js";
import { problemsOf } from "../validation/bounded-check.js";

/**
 * Compiled validators, by the schema's parameters object, compiled on first use of each action. A loaded
 * tool keeps its schema objects, so a validator lives exactly as long as the tool version it belongs to
 * and can never be applied to another schema.
 */
const validators = new WeakMap<object, ValidateFunction>();

/** Caller-chosen names quoted in messages are cut to this length (a message must stay readable). */
const MAX_QUOTED_NAME_CHARS = 64;

/**
 * Checks call arguments against the action's schema before any tool code runs. Returns a copy without
 * `anima_dir` (the host injects that itself; callers can never choose it). Validators are cached per
 * schema object (see `validators`).
 */
export function checkArguments(schema: ToolSchema, args: unknown): Record<string, unknown> {
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    throw new ToolHostError("InvalidArguments", `arguments for ${schema.name} must be a JSON object`);
  }
  // A JSON copy: the tool receives exactly what a JSON caller (CLI, MCP) could have sent, and nothing
  // the caller keeps a reference to.
  let copy: Record<string, unknown>;
  let json: string;
  try {
    json = JSON.stringify(args);
    copy = JSON.parse(json) as Record<string, unknown>;
  } catch (error) {
    throw new ToolHostError(
      "InvalidArguments",
      `arguments for ${schema.name} must be plain JSON: ${error instanceof Error ? error.message : String(error)}`,
      "use strings, numbers, booleans, null, arrays and objects only (no BigInt, no cycles)",
    );
  }
  delete copy["anima_dir"];
  let validate = validators.get(schema.parameters);
  if (!validate) {
    validate = schema.validatorSource ? loadCached(schema) : compileSchema(schema.parameters);
    validators.set(schema.parameters, validate);
  }
  const problems = problemsOf(validate, schema.parameters, copy, json.length, MAX_QUOTED_NAME_CHARS);
  if (problems.length > 0) {
    throw new ToolHostError("InvalidArguments", `invalid arguments for ${schema.name}: ${problems.join("; ")}`, describeExpected(schema));
  }
  return copy;
}

/** The generated validator from the tool's cached description; compiles afresh if it cannot be used. */
function loadCached(schema: ToolSchema): ValidateFunction {
  try {
    return loadValidator(schema.validatorSource as string);
  } catch {
    return compileSchema(schema.parameters);
  }
}

/** `expects: query (string, required), limit (integer)` — enough for an LLM to fix its call. */
export function describeExpected(schema: ToolSchema): string {
  const properties = schema.parameters.properties ?? {};
  const required = new Set(schema.parameters.required ?? []);
  const parts = Object.entries(properties).map(([name, prop]) => {
    const type = Array.isArray(prop["type"])
      ? (prop["type"] as string[]).join("|")
      : Array.isArray(prop["enum"])
        ? `one of ${(prop["enum"] as unknown[]).map((value) => JSON.stringify(value)).join("|")}`
        : typeof prop["type"] === "string"
          ? prop["type"]
          : "any";
    return `${name} (${type}${required.has(name) ? ", required" : ""})`;
  });
  return parts.length > 0 ? `expects: ${parts.join(", ")}` : "this action takes no arguments";
}
