import { ToolHostError } from "../errors.js";
import type { ToolSchema } from "../registry/schemas.js";
import { type ValidateFunction, compileSchema, describeValidationErrors } from "../validation/ajv.js";

/** Compiled validators by bundle hash and schema name; compiled on first use of each action. */
const validators = new Map<string, ValidateFunction>();
const MAX_CACHED_VALIDATORS = 2_000;

/**
 * Checks call arguments against the action's schema before any tool code runs. Returns a copy without
 * `anima_dir` (the host injects that itself; callers can never choose it).
 */
export function checkArguments(bundleHash: string, schema: ToolSchema, args: unknown): Record<string, unknown> {
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    throw new ToolHostError("InvalidArguments", `arguments for ${schema.name} must be a JSON object`);
  }
  const copy: Record<string, unknown> = JSON.parse(JSON.stringify(args)) as Record<string, unknown>;
  delete copy["anima_dir"];
  const key = `${bundleHash}\0${schema.name}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = compileSchema(schema.parameters);
    if (validators.size >= MAX_CACHED_VALIDATORS) validators.delete(validators.keys().next().value as string);
    validators.set(key, validate);
  }
  if (!validate(copy)) {
    const problems = describeValidationErrors(validate.errors);
    throw new ToolHostError(
      "InvalidArguments",
      `invalid arguments for ${schema.name}: ${problems.join("; ")}`,
      describeExpected(schema),
    );
  }
  return copy;
}

/** `expects: query (string, required), limit (integer)` — enough for an LLM to fix its call. */
export function describeExpected(schema: ToolSchema): string {
  const properties = schema.parameters.properties ?? {};
  const required = new Set(schema.parameters.required ?? []);
  const parts = Object.entries(properties).map(([name, prop]) => {
    const type = Array.isArray(prop["type"]) ? (prop["type"] as string[]).join("|") : String(prop["type"] ?? "any");
    return `${name} (${type}${required.has(name) ? ", required" : ""})`;
  });
  return parts.length > 0 ? `expects: ${parts.join(", ")}` : "this action takes no arguments";
}
