import { ToolHostError } from "../errors.js";
import type { ResultValue } from "../isolation/wire/messages.js";
import type { ToolSchema } from "../registry/schemas.js";
import { type ValidateFunction, compileSchema, loadValidator } from "../validation/ajv.js";
import { problemsOf } from "../validation/bounded-check.js";

/** Output validators per `outputSchema` object: each lives exactly as long as its tool version. */
const validators = new WeakMap<object, ValidateFunction>();

/**
 * The structured form of a successful result: the object the tool returned, parsed on the host from the
 * JSON the sandbox sent (never an object the sandbox built), and, when the action declares an
 * `output_schema`, checked against it before the result leaves the host. Without a schema, a result that
 * is not an object (text, a list, nothing) or that was cut for size has no structured form. With one,
 * each of those is an `ExecutionError`, as is a result that does not match.
 */
export function structuredResult(schema: ToolSchema, value: ResultValue): Record<string, unknown> | undefined {
  const outputSchema = schema.outputSchema;
  const parsed = value.kind === "json" && !value.truncated ? objectFromJson(value.text) : undefined;
  if (!outputSchema) return parsed;
  const fix = "return an object that matches the action's output_schema, or change output_schema";
  if (value.kind === "json" && value.truncated) {
    throw new ToolHostError(
      "ExecutionError",
      `the result of ${schema.name} is larger than the host accepts (${value.bytes} bytes), so it cannot be checked against its output_schema`,
      "return a smaller result",
    );
  }
  if (!parsed) {
    const what = value.kind === "none" ? "nothing" : value.kind === "text" ? "text" : "JSON that is not an object";
    throw new ToolHostError("ExecutionError", `${schema.name} returned ${what}, but its output_schema asks for an object`, fix);
  }
  let validate = validators.get(outputSchema);
  if (!validate) {
    validate = compiledOutputValidator(schema, outputSchema);
    validators.set(outputSchema, validate);
  }
  // The result's JSON text is what the tool sent (parsed above): its length bounds the check.
  const problems = problemsOf(validate, outputSchema, parsed, value.kind === "json" ? value.text.length : 0);
  if (problems.length > 0) {
    throw new ToolHostError("ExecutionError", `the result of ${schema.name} does not match its output_schema: ${problems.join("; ")}`, fix);
  }
  return parsed;
}

/** The plain object `text` holds as JSON, else undefined (a list, a scalar, not JSON). */
export function objectFromJson(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The validator generated with the tool's description (registry/schema-compile.ts), else one compiled here. */
function compiledOutputValidator(schema: ToolSchema, outputSchema: object): ValidateFunction {
  if (schema.outputValidatorSource !== undefined) {
    try {
      return loadValidator(schema.outputValidatorSource);
    } catch {
      // compiled afresh below
    }
  }
  return compileSchema(outputSchema);
}
