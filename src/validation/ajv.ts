import { createRequire } from "node:module";
import type { Ajv as AjvType, ErrorObject, ValidateFunction } from "ajv";
import type { RE2JS as RE2JSType } from "re2js";

/**
 * One ajv instance per process, created on first use (importing and configuring ajv costs more than a
 * whole cached tool call, so a CLI run that validates nothing never pays for it).
 *
 * Tool schemas are untrusted input: `pattern` and `patternProperties` run on RE2 (linear time, no
 * catastrophic backtracking), and remote `$ref`s cannot be loaded.
 */
const require = createRequire(import.meta.url);

let ajv: AjvType | undefined;

export function getAjv(): AjvType {
  if (ajv) return ajv;
  const { Ajv } = require("ajv") as { Ajv: typeof AjvType };
  const addFormats = (require("ajv-formats") as { default: (instance: AjvType) => void }).default;
  const { RE2JS } = require("re2js") as { RE2JS: typeof RE2JSType };
  const re2Engine = (pattern: string, flags: string) => {
    const compiled = RE2JS.compile(pattern, flags.includes("i") ? RE2JS.CASE_INSENSITIVE : 0);
    return { test: (input: string) => compiled.matcher(input).find() };
  };
  re2Engine.code = "re2";
  ajv = new Ajv({
    strict: true,
    allErrors: true,
    allowUnionTypes: true,
    validateSchema: true,
    addUsedSchema: false,
    unicodeRegExp: true,
    code: { regExp: re2Engine as never },
    loadSchema: undefined,
  });
  addFormats(ajv);
  return ajv;
}

export type { ErrorObject, ValidateFunction };

/** Compiles a schema; throws an Error whose message says what is wrong with it. */
export function compileSchema(schema: object): ValidateFunction {
  return getAjv().compile(schema);
}

/** Human (and LLM) readable lines for validation errors: `limit: must be integer`. */
export function describeValidationErrors(errors: ErrorObject[] | null | undefined): string[] {
  if (!errors) return [];
  const lines = new Set<string>();
  for (const error of errors) {
    const path = error.instancePath ? error.instancePath.slice(1).replaceAll("/", ".") : "";
    const params = error.params as Record<string, unknown>;
    switch (error.keyword) {
      case "required":
        lines.add(`missing required parameter "${joinPath(path, String(params["missingProperty"]))}"`);
        break;
      case "additionalProperties":
        lines.add(`unknown parameter "${joinPath(path, String(params["additionalProperty"]))}"`);
        break;
      case "enum":
        lines.add(`${label(path)} must be one of ${JSON.stringify(params["allowedValues"])}`);
        break;
      case "type":
        lines.add(`${label(path)} must be ${String(params["type"]).replaceAll(",", " or ")}`);
        break;
      default:
        lines.add(`${label(path)} ${error.message ?? "is invalid"}`);
    }
  }
  return [...lines];
}

function joinPath(path: string, name: string): string {
  return path ? `${path}.${name}` : name;
}

function label(path: string): string {
  return path ? `"${path}"` : "the arguments";
}
