import { createRequire } from "node:module";
import type { Ajv as AjvType, ErrorObject, ValidateFunction } from "ajv";
import type { RE2JS as RE2JSType } from "re2js";
import { UNIQUE_ITEMS_MODULE, duplicatePair, uniqueItemsKeyword } from "./unique-items.js";
import { FORMATS_MODULE, toolFormats } from "./formats.js";
import { ENUM_MODULE, enumKeyword, inEnum } from "./enum-set.js";

/**
 * One ajv instance per process, created on first use (importing and configuring ajv costs more than a
 * whole cached tool call, so a CLI run that validates nothing never pays for it).
 *
 * Tool schemas are untrusted input, and so is what they check (a caller's arguments, a tool's result, up
 * to 64 MiB), on the host's thread:
 *  - `pattern` and `patternProperties` run on RE2 (linear time, no catastrophic backtracking),
 *    `uniqueItems` on a canonical key per item (linear time: unique-items.ts), `enum` by a lookup of one
 *    (enum-set.ts), `format: "url"` on a linear check (formats.ts), and remote `$ref`s cannot be loaded;
 *  - every error is collected only for values of at most 64 KiB of JSON; a larger one is checked to its
 *    first error (bounded-check.ts): with every error collected, an array of millions of wrong items
 *    made as many error objects and lines (8 MB of arguments: 2.1 GB; 60 MB ended the daemon:
 *    all_errors_flood). The validators that stop at the first error are compiled only for such a value:
 *    ajv nests their code one level per check, which compiles slowly and overflows the stack on wide
 *    schemas;
 *  - a `$ref` is a call to the definition's own function, never a copy of it (`inlineRefs: false`):
 *    inlined, a 37 KB schema naming a 200-property definition 800 times generated code past the heap
 *    and ended the daemon at load (ref_inline_bomb).
 */
const require = createRequire(import.meta.url);

let ajv: AjvType | undefined;
let firstErrorAjv: AjvType | undefined;

/** The instance for tool schemas and the validators kept with their descriptions: every error collected. */
export function getAjv(): AjvType {
  ajv ??= makeAjv(true);
  return ajv;
}

/** An instance whose validators stop at the first error (bounded-check.ts); none of its code is kept. */
export function getFirstErrorAjv(): AjvType {
  firstErrorAjv ??= makeAjv(false);
  return firstErrorAjv;
}

function makeAjv(allErrors: boolean): AjvType {
  const ajvModule = require("ajv") as typeof import("ajv");
  const { Ajv } = ajvModule;
  const addFormats = (require("ajv-formats") as { default: (instance: AjvType) => void }).default;
  const re2Engine = (pattern: string, flags: string) => compileRe2(pattern, flags);
  // How generated standalone code (see `validatorSource`) obtains the engine: through `standaloneRequire`.
  re2Engine.code = 'require("animaworks:re2")';
  const ajv = new Ajv({
    strict: true,
    allErrors,
    inlineRefs: false,
    allowUnionTypes: true,
    validateSchema: true,
    addUsedSchema: false,
    unicodeRegExp: true,
    // Generated validators take the formats from this host's set (`standaloneRequire`), not ajv-formats'.
    code: { regExp: re2Engine, source: allErrors, optimize: allErrors, formats: ajvModule._`require(${FORMATS_MODULE})` },
    loadSchema: undefined,
    // A schema that fails to compile is reported by what throws; ajv's logger would print its generated code.
    logger: false,
  });
  addFormats(ajv);
  // ajv-formats' formats stand but `url`, which is this host's own (formats.ts).
  ajv.addFormat("url", toolFormats()["url"] as Parameters<AjvType["addFormat"]>[1]);
  // ajv's own compares items pairwise (quadratic): replaced, the meta-schema's uses included.
  ajv.removeKeyword("uniqueItems");
  ajv.addKeyword(uniqueItemsKeyword(ajvModule));
  // ajv's own compares a value with each allowed one (value × list): replaced by a lookup (enum-set.ts).
  ajv.removeKeyword("enum");
  ajv.addKeyword(enumKeyword(ajvModule));
  return ajv;
}

export type { ErrorObject, ValidateFunction };

/**
 * Standalone validators: the JavaScript ajv generated for a schema, kept with a tool's cached description
 * so that a new process (a one-shot CLI call) validates without loading and configuring ajv at all.
 * The code is generated here from checked schemas and stored in the host's own cache directory.
 */
export function validatorSource(validate: ValidateFunction): string {
  const standaloneCode = (require("ajv/dist/standalone") as { default: (ajv: AjvType, v: ValidateFunction) => string }).default;
  return standaloneCode(getAjv(), validate);
}

export function loadValidator(source: string): ValidateFunction {
  const module = { exports: {} as { default?: ValidateFunction } };
  // The cached validator is code ajv generated for a schema (the cache is the host's own; README: who can
  // write the data dir can change what runs). It runs in the host, never with a tool's input as code.
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  (new Function("require", "module", "exports", source) as (...args: unknown[]) => void)(standaloneRequire, module, module.exports);
  const validate = (module.exports.default ?? module.exports) as ValidateFunction;
  if (typeof validate !== "function") throw new Error("cached validator is malformed");
  return validate;
}

/** A pattern compiled by RE2 (linear time), in the shape ajv expects of a RegExp engine. */
function compileRe2(pattern: string, flags: string): { test(input: string): boolean; toString(): string } {
  const { RE2JS } = require("re2js") as { RE2JS: typeof RE2JSType };
  const compiled = RE2JS.compile(pattern, flags.includes("i") ? RE2JS.CASE_INSENSITIVE : 0);
  return {
    test: (input: string) => compiled.matcher(input).find(),
    // ajv shares compiled patterns across every schema of the instance, keyed by `toString()` (a
    // RegExp prints as /source/flags). Without a key of its own, every pattern would print as
    // "[object Object]" and all schemas would be checked against the first pattern ever compiled.
    toString: () => JSON.stringify([pattern, flags]),
  };
}

/** The only modules generated validators may load: ajv's runtime helpers, this host's formats, RE2, the uniqueItems and enum checks. */
function standaloneRequire(id: string): unknown {
  if (id === "animaworks:re2") return compileRe2;
  if (id === UNIQUE_ITEMS_MODULE) return { duplicatePair };
  if (id === ENUM_MODULE) return { inEnum };
  if (id === FORMATS_MODULE) return toolFormats();
  if (/^ajv\/dist\/runtime\/[a-z0-9]+$/.test(id)) return require(id);
  throw new Error(`a cached validator asked for "${id}"`);
}

/**
 * Compiles a schema; throws an Error whose message says what is wrong with it.
 *
 * ajv keeps every compiled schema object in an internal cache for the life of the instance. Tool
 * schemas arrive as fresh objects on every load, so in a long-running host that cache would only grow;
 * the compiled function does not need it (callers keep the function), so the entry is dropped at once.
 * Tool schemas carry no `$id` (registry/schemas.ts refuses it), so removal touches nothing but that entry.
 */
export function compileSchema(schema: object, ajvInstance: AjvType = getAjv()): ValidateFunction {
  try {
    return ajvInstance.compile(schema);
  } finally {
    // With a root `$id`, removal would also drop whatever is registered under that id; keep those.
    if (!("$id" in schema)) ajvInstance.removeSchema(schema);
  }
}

/**
 * Everything wrong with a schema, each line saying where and what to change; empty when it compiles.
 * Meta-schema errors are reported per location (ajv's raw text repeats one mistake three ways), then
 * strict-mode and compile errors (unknown keywords, `required` names missing from `properties`, patterns
 * RE2 cannot run).
 */
export function schemaProblems(schema: object): string[] {
  return schemaProblemsAt(schema).map((problem) => problem.message);
}

/** A problem of a schema and, when ajv says, the JSON Pointer (into the schema) of the part at fault. */
export interface SchemaProblem {
  message: string;
  pointer?: string;
}

/**
 * schemaProblems with where each problem is, for the validator to point at the line. Only the first
 * compile error is known: ajv stops compiling there.
 */
export function schemaProblemsAt(schema: object): SchemaProblem[] {
  const ajvInstance = getAjv();
  let valid: boolean;
  try {
    valid = ajvInstance.validateSchema(schema) as boolean;
  } catch (error) {
    return [compileProblem(error)];
  }
  if (!valid) return describeSchemaErrors(ajvInstance.errors, schema);
  try {
    compileSchema(schema);
  } catch (error) {
    return [compileProblem(error)];
  }
  return [];
}

function describeSchemaErrors(errors: ErrorObject[] | null | undefined, schema: object): SchemaProblem[] {
  const byPath = new Map<string, ErrorObject[]>();
  for (const error of errors ?? []) byPath.set(error.instancePath, [...(byPath.get(error.instancePath) ?? []), error]);
  const problems: SchemaProblem[] = [];
  for (const [pointer, group] of byPath) {
    // anyOf/oneOf only say "must match a schema in anyOf"; the branch errors beside them say why.
    const enumError = group.find((error) => error.keyword === "enum");
    const error = enumError ?? group.find((e) => e.keyword !== "anyOf" && e.keyword !== "oneOf") ?? group[0]!;
    const where = pointer === "" ? "at the top level" : `at "${pointerToPath(pointer)}"`;
    const got = JSON.stringify(valueAt(schema, pointer));
    const what = enumError
      ? `must be one of ${(enumError.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(", ")}`
      : (error.message ?? "is invalid");
    problems.push({ message: `${where}: ${what}${got === undefined || got.length > 80 ? "" : ` (got ${got})`}`, pointer });
  }
  return problems;
}

/** Whether `key` is a keyword ajv knows: in strict mode, any other key of a schema object is refused. */
export function isKnownKeyword(key: string): boolean {
  return getAjv().RULES.keywords[key] === true;
}

/** What compiling says of an unknown keyword, for each one a caller finds without compiling. */
export function unknownKeywordProblem(key: string): string {
  return explainCompileError(new Error(`strict mode: unknown keyword: "${key}"`));
}

/**
 * Strict-mode errors end in `at "#/properties/n" (strictRequired)`: that is where the problem is (a
 * URI fragment, so its characters are percent-encoded).
 */
function compileProblem(error: unknown): SchemaProblem {
  const message = explainCompileError(error);
  const at = / at "#(\/[^"]*)?" \(strict\w*\)/.exec(error instanceof Error ? error.message : String(error));
  if (!at) return { message };
  try {
    return { message, pointer: decodeURIComponent(at[1] ?? "") };
  } catch {
    return { message };
  }
}

function explainCompileError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  if (/regexp|regular expression/i.test(message)) {
    return `${message} (patterns run on the RE2 engine: look-arounds and back-references are not supported)`;
  }
  if (/unknown keyword/.test(message)) {
    return `${message} (custom keywords are not allowed; put notes for the model in "description")`;
  }
  if (/no schema with key or ref/.test(message)) {
    return `${message} (leave out "$schema"; tool schemas are read as JSON Schema draft-07)`;
  }
  return message;
}

function pointerToPath(pointer: string): string {
  return pointer
    .slice(1)
    .split("/")
    .map((part) => part.replaceAll("~1", "/").replaceAll("~0", "~"))
    .join(".");
}

function valueAt(root: unknown, pointer: string): unknown {
  let value = root;
  for (const part of pointer === "" ? [] : pointer.slice(1).split("/")) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<string, unknown>)[part.replaceAll("~1", "/").replaceAll("~0", "~")];
  }
  return value;
}

/**
 * Human (and LLM) readable lines for validation errors: `"limit" must be integer`. Paths and property
 * names come from the caller's arguments; each is cut to `maxNameChars` so that a hostile key cannot
 * blow up the message, and an enum's allowed values to `MAX_ALLOWED_CHARS`. At most `maxLines` distinct
 * lines are made (the errors after them are not read).
 */
export function describeValidationErrors(errors: ErrorObject[] | null | undefined, maxNameChars = 64, maxLines = Number.POSITIVE_INFINITY): string[] {
  if (!errors) return [];
  const lines = new Set<string>();
  // Each enum's allowed values, written once (thousands of errors may name one list of thousands).
  const allowed = new Map<unknown, string>();
  const allowedText = (values: unknown): string => {
    let text = allowed.get(values);
    if (text === undefined) allowed.set(values, (text = cut(JSON.stringify(values), MAX_ALLOWED_CHARS)));
    return text;
  };
  const joinPath = (path: string, name: string) => cut(path ? `${path}.${name}` : name, maxNameChars);
  const label = (path: string) => (path ? `"${cut(path, maxNameChars)}"` : "the arguments");
  for (const error of errors) {
    if (lines.size >= maxLines) break;
    const path = error.instancePath ? pointerToPath(error.instancePath) : "";
    const params = error.params as Record<string, unknown>;
    switch (error.keyword) {
      case "required":
        lines.add(`missing required parameter "${joinPath(path, String(params["missingProperty"]))}"`);
        break;
      case "additionalProperties":
        lines.add(`unknown parameter "${joinPath(path, String(params["additionalProperty"]))}"`);
        break;
      case "enum":
        lines.add(`${label(path)} must be one of ${allowedText(params["allowedValues"])}`);
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

/** Characters of an enum's allowed values a line quotes at most. */
const MAX_ALLOWED_CHARS = 200;

function cut(text: string, maxChars: number): string {
  return text.length <= maxChars ? text : `${text.slice(0, maxChars)}…`;
}
