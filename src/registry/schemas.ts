import { isKnownKeyword, schemaProblems, schemaProblemsAt, unknownKeywordProblem } from "../validation/ajv.js";
import { type ProfileEntry, checkProfile } from "./profile.js";
import { MAX_SCHEMA_FAN_OUT, schemaFanOut } from "../validation/schema-fan-out.js";

/** A schema after normalisation (docs/animaworks-reference.md §3.1): `parameters` holds `input_schema` if given. */
export interface ToolSchema {
  name: string;
  /** The part after `{tool}_`. */
  action: string;
  description: string;
  parameters: JsonSchemaObject;
  /** ajv's standalone code for `parameters` (validation/ajv.ts), when the description was cached. */
  validatorSource?: string;
  /**
   * What a result of the action must match (`output_schema`), checked by the host before the result
   * leaves; MCP clients see it as the tool's `outputSchema` and get the result as `structuredContent`.
   */
  outputSchema?: JsonSchemaObject;
  /** ajv's standalone code for `outputSchema`, when the description was cached. */
  outputValidatorSource?: string;
}

export type JsonSchemaObject = { type: "object"; properties?: Record<string, JsonSchemaProperty>; required?: string[] } & Record<string, unknown>;
export type JsonSchemaProperty = Record<string, unknown>;

/** Bounds on what a tool may declare. Schemas are untrusted input, compiled on the host. */
export const SCHEMA_LIMITS = {
  maxSchemas: 64,
  maxSchemaJsonBytes: 64 * 1024,
  maxDepth: 24,
  maxDescriptionChars: 4_096,
} as const;

export const SCHEMA_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export type SchemaCheck = { ok: true; schemas: ToolSchema[]; profile: Record<string, ProfileEntry> } | { ok: false; problems: string[] };

/**
 * One problem of a tool's declaration and where it is: `path` leads, through keys and indexes, from
 * the list get_tool_schemas() returned (`in: "schemas"`) or from EXECUTION_PROFILE (`in: "profile"`) to
 * the part at fault, as far as the problem has one (the validator turns it into a line of the source).
 */
export interface SchemaIssue {
  message: string;
  in: "schemas" | "profile";
  path: Array<string | number>;
}

/**
 * Normalises and checks what a module's `get_tool_schemas()` returned. Every schema's problem is listed,
 * each phrased so that the author knows what to change; per schema, the first rule it breaks.
 */
export function checkToolSchemas(toolName: string, raw: unknown, rawProfile: unknown): SchemaCheck {
  const { issues, schemas, profile } = inspectSchemas(toolName, raw, rawProfile, "first");
  return issues.length > 0 ? { ok: false, problems: issues.map((issue) => issue.message) } : { ok: true, schemas, profile };
}

/**
 * Every problem checkToolSchemas would see and the ones it stops short of (a schema's further rules
 * once one fails, each invalid part of an input_schema, every `required` name missing from its
 * `properties`, every unknown keyword), each with where it is. For the validator, which should show an
 * author everything at once; loading stays with checkToolSchemas.
 */
export function schemaIssues(toolName: string, raw: unknown, rawProfile: unknown): SchemaIssue[] {
  return inspectSchemas(toolName, raw, rawProfile, "all").issues;
}

/** `first`: a schema's checks stop at the first rule it breaks (the load's message); `all`: they go on. */
type Mode = "first" | "all";
type Path = Array<string | number>;
type Located = { message: string; path: Path };

function inspectSchemas(
  toolName: string,
  raw: unknown,
  rawProfile: unknown,
  mode: Mode,
): { issues: SchemaIssue[]; schemas: ToolSchema[]; profile: Record<string, ProfileEntry> } {
  const issues: SchemaIssue[] = [];
  const listIssue = (message: string) => ({ issues: [{ message, in: "schemas" as const, path: [] }], schemas: [], profile: {} });
  if (raw === null || raw === undefined) return listIssue("the module does not export get_tool_schemas() (alias getToolSchemas)");
  if (!Array.isArray(raw)) return listIssue("get_tool_schemas() must return an array of schemas");
  if (raw.length === 0) return listIssue("get_tool_schemas() returned no schemas");
  if (raw.length > SCHEMA_LIMITS.maxSchemas)
    return listIssue(`get_tool_schemas() returned ${raw.length} schemas; at most ${SCHEMA_LIMITS.maxSchemas} are allowed`);
  const schemas: ToolSchema[] = [];
  const seen = new Set<string>();
  raw.forEach((entry, index) => {
    const found: Located[] = [];
    const schema = inspectSchema(toolName, entry, index, seen, mode, found);
    for (const { message, path } of found) issues.push({ message, in: "schemas", path: [index, ...path] });
    if (schema && found.length === 0) schemas.push(schema);
  });
  const profile = checkProfile(rawProfile, (message, path) => issues.push({ message, in: "profile", path }));
  return { issues, schemas, profile };
}

/** Checks one entry of the list; its problems go to `found` (paths from the entry). */
function inspectSchema(toolName: string, entry: unknown, index: number, seen: Set<string>, mode: Mode, found: Located[]): ToolSchema | undefined {
  const where = `schema #${index + 1}`;
  /** True when the checks of this schema end here. */
  const fail = (message: string, path: Path): boolean => {
    found.push({ message, path });
    return mode === "first";
  };
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
    fail(`${where} must be an object with name, description and input_schema`, []);
    return undefined;
  }
  const record = entry as Record<string, unknown>;
  const name = record["name"];
  const prefix = `${toolName}_`;
  let label = where;
  if (typeof name !== "string" || !SCHEMA_NAME_PATTERN.test(name)) {
    if (fail(`${where} needs a "name" of 1-64 letters, digits, "_" or "-" (got ${JSON.stringify(name) ?? "nothing"})`, ["name"])) return undefined;
  } else {
    label = `schema "${name}"`;
    if (!name.startsWith(prefix) || name.length === prefix.length) {
      if (fail(`schema "${name}" must be named ${toolName}_<action> (the file is ${toolName}; e.g. ${toolName}_query)`, ["name"])) return undefined;
    } else if (seen.has(name)) {
      if (fail(`schema "${name}" is declared twice`, ["name"])) return undefined;
    } else {
      seen.add(name);
    }
  }
  const description = record["description"] ?? "";
  if (typeof description !== "string") {
    if (fail(`${label}: "description" must be a string`, ["description"])) return undefined;
  } else if (description.length > SCHEMA_LIMITS.maxDescriptionChars) {
    if (fail(`${label}: description is longer than ${SCHEMA_LIMITS.maxDescriptionChars} characters`, ["description"])) return undefined;
  }
  const paramsKey = record["input_schema"] !== undefined && record["input_schema"] !== null ? "input_schema" : "parameters";
  const params = normaliseParameters(record[paramsKey]);
  const paramProblems = schemaObjectProblems(params, "input_schema", "arguments are always an object", mode);
  for (const problem of paramProblems) found.push({ message: `${label}: ${problem.message}`, path: [paramsKey, ...problem.path] });
  if (paramProblems.length > 0 && mode === "first") return undefined;
  const outputKey = record["output_schema"] !== undefined && record["output_schema"] !== null ? "output_schema" : "outputSchema";
  const rawOutput = record[outputKey];
  if (rawOutput !== undefined && rawOutput !== null) {
    const outputProblems = schemaObjectProblems(
      rawOutput,
      "output_schema",
      "results checked against it reach MCP clients as structuredContent, which is an object",
      mode,
    );
    for (const problem of outputProblems) found.push({ message: `${label}: ${problem.message}`, path: [outputKey, ...problem.path] });
  }
  if (found.length > 0 || typeof name !== "string" || typeof description !== "string") return undefined;
  return {
    name,
    action: name.slice(prefix.length),
    description,
    parameters: params as JsonSchemaObject,
    ...(rawOutput !== undefined && rawOutput !== null ? { outputSchema: rawOutput as JsonSchemaObject } : {}),
  };
}

/**
 * Missing parameters mean "no arguments" (docs/animaworks-reference.md §3.1 normalises them to `{}`). Arguments are always an
 * object, so an object schema that leaves out `type` (`{}` or `{ properties: … }`, as hand-written and
 * Python-ported schemas often do) gets `"type": "object"`; any other `type` is refused below.
 */
function normaliseParameters(params: unknown): unknown {
  if (params === undefined || params === null) return { type: "object", properties: {} };
  if (typeof params !== "object" || Array.isArray(params)) return params;
  const record = params as Record<string, unknown>;
  if (Object.keys(record).length === 0) return { type: "object", properties: {} };
  return "type" in record ? record : { type: "object", ...record };
}

/**
 * Checks a schema a tool declares (`input_schema`, `output_schema`): bounded, standalone, of an object.
 * `first`: the first problem (ajv's all in one); `all`: each problem on its own, with its path.
 */
function schemaObjectProblems(schema: unknown, label: string, whyObject: string, mode: Mode): Located[] {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    return [{ message: `${label} must be a JSON Schema object`, path: [] }];
  }
  const size = Buffer.byteLength(JSON.stringify(schema));
  if (size > SCHEMA_LIMITS.maxSchemaJsonBytes) {
    return [{ message: `${label} is ${size} bytes; at most ${SCHEMA_LIMITS.maxSchemaJsonBytes} are allowed`, path: [] }];
  }
  if (depthOf(schema) > SCHEMA_LIMITS.maxDepth) return [{ message: `${label} is nested deeper than ${SCHEMA_LIMITS.maxDepth} levels`, path: [] }];
  if (schemaFanOut(schema) > MAX_SCHEMA_FAN_OUT) {
    const what = `applies its parts more than ${MAX_SCHEMA_FAN_OUT} times to one path of a value (anyOf, oneOf, allOf and $ref inside each other multiply)`;
    return [{ message: `${label} ${what}: flatten it`, path: [] }];
  }
  const problems: Located[] = [];
  const record = schema as Record<string, unknown>;
  if (record["type"] !== "object") {
    problems.push({ message: `${label} must have "type": "object" (${whyObject})`, path: ["type"] });
    if (mode === "first") return problems;
  }
  const references: Located[] = [];
  findNonLocalReferences(schema, [], label, references);
  if (references.length > 0) return [...problems, ...(mode === "first" ? references.slice(0, 1) : references)];
  if (mode === "first") {
    const found = schemaProblems(schema);
    return found.length > 0 ? [{ message: `${label} is not valid JSON Schema: ${found.join("; ")}`, path: [] }] : [];
  }
  return [...problems, ...everyJsonSchemaProblem(schema as Record<string, unknown>, label)];
}

/**
 * ajv lists every meta-schema error but stops compiling at the first strict-mode error, and compiles
 * nothing while the meta-schema fails. So the two strict-mode mistakes authors make most are found here
 * first, everywhere: `required` names missing from their `properties`, and unknown keywords (notes such
 * as `hint`); then ajv checks the schema without them and reports the rest.
 */
function everyJsonSchemaProblem(schema: Record<string, unknown>, label: string): Located[] {
  const invalid = (message: string, path: Path): Located => ({ message: `${label} is not valid JSON Schema: ${message}`, path });
  const problems: Located[] = [];
  const copy = structuredClone(schema);
  for (const node of schemaNodes(copy, [])) {
    const required = node.value["required"];
    if (!Array.isArray(required)) continue;
    const defined = definedProperties(node.value);
    const kept = required.filter((key, i) => {
      if (typeof key !== "string" || defined.has(key)) return true;
      const where = node.path.length === 0 ? "" : `at "${node.path.join(".")}": `;
      problems.push(
        invalid(`${where}required property "${key}" is not in "properties" (a required parameter must be declared there)`, [...node.path, "required", i]),
      );
      return false;
    });
    node.value["required"] = kept;
  }
  // Definitions are compiled only where referenced, so ajv alone judges their keywords.
  for (const node of schemaNodes(copy, [], ["definitions", "$defs"])) {
    for (const key of Object.keys(node.value)) {
      if (isKnownKeyword(key)) continue;
      problems.push(invalid(unknownKeywordProblem(key), [...node.path, key]));
      delete node.value[key];
    }
  }
  for (const problem of schemaProblemsAt(copy)) problems.push(invalid(problem.message, problem.pointer === undefined ? [] : pointerPath(problem.pointer)));
  return problems;
}

/**
 * Property names a schema object declares for its own data: its `properties` and those of the branches
 * applied to the same data. ajv accepts a `required` name declared in any of these (when it has seen
 * that branch first), so this errs towards "declared": a name ajv still refuses comes from its compile.
 */
function definedProperties(node: Record<string, unknown>, into = new Set<string>()): Set<string> {
  const properties = node["properties"];
  if (typeof properties === "object" && properties !== null && !Array.isArray(properties)) for (const key of Object.keys(properties)) into.add(key);
  const branches: unknown[] = [node["not"], node["if"], node["then"], node["else"]];
  for (const keyword of ["allOf", "anyOf", "oneOf"]) if (Array.isArray(node[keyword])) branches.push(...(node[keyword] as unknown[]));
  const dependencies = node["dependencies"];
  if (typeof dependencies === "object" && dependencies !== null) branches.push(...Object.values(dependencies as Record<string, unknown>));
  for (const branch of branches) {
    if (typeof branch === "object" && branch !== null && !Array.isArray(branch)) definedProperties(branch as Record<string, unknown>, into);
  }
  return into;
}

/** The schema objects in a schema (itself, its properties, items, branches…), with their paths; not under `skip` keywords. */
function schemaNodes(schema: unknown, path: Path, skip: string[] = []): Array<{ value: Record<string, unknown>; path: Path }> {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return [];
  const node = schema as Record<string, unknown>;
  const nodes = [{ value: node, path }];
  for (const [child, childPath] of subschemas(node, path)) {
    if (!skip.includes(String(childPath[path.length]))) nodes.push(...schemaNodes(child, childPath, skip));
  }
  return nodes;
}

function pointerPath(pointer: string): Path {
  return pointer === ""
    ? []
    : pointer
        .slice(1)
        .split("/")
        .map((part) => part.replaceAll("~1", "/").replaceAll("~0", "~"));
}

/** Keywords whose value is a schema, a map of schemas or a list of schemas (draft-07 plus `$defs`). */
const SUBSCHEMA = ["additionalItems", "additionalProperties", "contains", "propertyNames", "not", "if", "then", "else", "items"];
const SUBSCHEMA_MAPS = ["properties", "patternProperties", "definitions", "$defs", "dependencies"];
const SUBSCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "items"];

/**
 * All tools share one validator instance. `$id` and anchors register names in it, and a non-local
 * `$ref` resolves against what other schemas registered, so one tool's schema could change how
 * another's is read. Tool schemas therefore use only local references (`#/definitions/…`). Every such
 * use goes to `found`, in the order a reader meets them.
 */
function findNonLocalReferences(schema: unknown, path: Path, label: string, found: Located[]): void {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return;
  const node = schema as Record<string, unknown>;
  const where = path.length === 0 ? "" : ` (at ${path.join(".")})`;
  for (const keyword of ["$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"]) {
    if (keyword in node)
      found.push({
        message: `${label} may not use "${keyword}"${where}; tool schemas stand alone, use local references such as "#/definitions/x"`,
        path: [...path, keyword],
      });
  }
  const ref = node["$ref"];
  if (ref !== undefined && (typeof ref !== "string" || !ref.startsWith("#"))) {
    found.push({ message: `${label} may only use local references ("$ref": "#/definitions/…"), not ${JSON.stringify(ref)}${where}`, path: [...path, "$ref"] });
  }
  for (const [child, childPath] of subschemas(node, path)) findNonLocalReferences(child, childPath, label, found);
}

/** The subschemas directly under a schema object, with their paths. */
function subschemas(node: Record<string, unknown>, path: Path): Array<[unknown, Path]> {
  const children: Array<[unknown, Path]> = [];
  for (const keyword of SUBSCHEMA) if (keyword in node) children.push([node[keyword], [...path, keyword]]);
  for (const keyword of SUBSCHEMA_MAPS) {
    const map = node[keyword];
    if (typeof map !== "object" || map === null) continue;
    for (const [key, child] of Object.entries(map)) children.push([child, [...path, keyword, key]]);
  }
  for (const keyword of SUBSCHEMA_LISTS) {
    const list = node[keyword];
    if (Array.isArray(list)) list.forEach((child, index) => children.push([child, [...path, keyword, index]]));
  }
  return children;
}

function depthOf(value: unknown, depth = 0): number {
  if (typeof value !== "object" || value === null) return depth;
  if (depth > SCHEMA_LIMITS.maxDepth) return depth;
  let max = depth + 1;
  for (const child of Object.values(value)) max = Math.max(max, depthOf(child, depth + 1));
  return max;
}
