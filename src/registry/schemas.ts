import { schemaProblems } from "../validation/ajv.js";

/** A schema after normalisation (reference 3.1): `parameters` holds `input_schema` if given. */
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
}

export type JsonSchemaObject = { type: "object"; properties?: Record<string, JsonSchemaProperty>; required?: string[] } & Record<string, unknown>;
export type JsonSchemaProperty = Record<string, unknown>;

export interface ProfileEntry {
  expected_seconds?: number;
  background_eligible?: boolean;
  timeout_seconds?: number;
  gated?: boolean;
  /** Background jobs: runs in all (1 to `MAX_RETRY_ATTEMPTS`) and seconds before the first retry. */
  retry?: { attempts: number; backoff?: number };
}

/** Most runs a profile's `retry.attempts` may ask for. */
export const MAX_RETRY_ATTEMPTS = 10;
/** Longest `retry.backoff`, in seconds. */
export const MAX_RETRY_BACKOFF_SECONDS = 3_600;

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
 * Normalises and checks what a module's `get_tool_schemas()` returned. Every problem is listed, each
 * phrased so that the author knows what to change.
 */
export function checkToolSchemas(toolName: string, raw: unknown, rawProfile: unknown): SchemaCheck {
  const problems: string[] = [];
  if (raw === null || raw === undefined) {
    return { ok: false, problems: ["the module does not export get_tool_schemas() (alias getToolSchemas)"] };
  }
  if (!Array.isArray(raw)) return { ok: false, problems: ["get_tool_schemas() must return an array of schemas"] };
  if (raw.length === 0) return { ok: false, problems: ["get_tool_schemas() returned no schemas"] };
  if (raw.length > SCHEMA_LIMITS.maxSchemas) {
    return { ok: false, problems: [`get_tool_schemas() returned ${raw.length} schemas; at most ${SCHEMA_LIMITS.maxSchemas} are allowed`] };
  }
  const schemas: ToolSchema[] = [];
  const seen = new Set<string>();
  raw.forEach((entry, index) => {
    const where = `schema #${index + 1}`;
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
      problems.push(`${where} must be an object with name, description and input_schema`);
      return;
    }
    const record = entry as Record<string, unknown>;
    const name = record["name"];
    if (typeof name !== "string" || !SCHEMA_NAME_PATTERN.test(name)) {
      problems.push(`${where} needs a "name" of 1-64 letters, digits, "_" or "-" (got ${JSON.stringify(name) ?? "nothing"})`);
      return;
    }
    const prefix = `${toolName}_`;
    if (!name.startsWith(prefix) || name.length === prefix.length) {
      problems.push(`schema "${name}" must be named ${toolName}_<action> (the file is ${toolName}; e.g. ${toolName}_query)`);
      return;
    }
    if (seen.has(name)) {
      problems.push(`schema "${name}" is declared twice`);
      return;
    }
    seen.add(name);
    const description = record["description"] ?? "";
    if (typeof description !== "string") {
      problems.push(`schema "${name}": "description" must be a string`);
      return;
    }
    if (description.length > SCHEMA_LIMITS.maxDescriptionChars) {
      problems.push(`schema "${name}": description is longer than ${SCHEMA_LIMITS.maxDescriptionChars} characters`);
      return;
    }
    const params = normaliseParameters(record["input_schema"] ?? record["parameters"]);
    const paramProblem = checkParameters(params);
    if (paramProblem) {
      problems.push(`schema "${name}": ${paramProblem}`);
      return;
    }
    const rawOutput = record["output_schema"] ?? record["outputSchema"];
    if (rawOutput !== undefined && rawOutput !== null) {
      const outputProblem = checkSchemaObject(rawOutput, "output_schema", "results checked against it reach MCP clients as structuredContent, which is an object");
      if (outputProblem) {
        problems.push(`schema "${name}": ${outputProblem}`);
        return;
      }
    }
    schemas.push({
      name,
      action: name.slice(prefix.length),
      description,
      parameters: params as JsonSchemaObject,
      ...(rawOutput !== undefined && rawOutput !== null ? { outputSchema: rawOutput as JsonSchemaObject } : {}),
    });
  });
  const profile = checkProfile(rawProfile, problems);
  return problems.length > 0 ? { ok: false, problems } : { ok: true, schemas, profile };
}

/**
 * Missing parameters mean "no arguments" (reference 3.1 normalises them to `{}`). Arguments are always an
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

function checkParameters(params: unknown): string | undefined {
  return checkSchemaObject(params, "input_schema", "arguments are always an object");
}

/** Checks a schema a tool declares (`input_schema`, `output_schema`): bounded, standalone, of an object. */
function checkSchemaObject(schema: unknown, label: string, whyObject: string): string | undefined {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    return `${label} must be a JSON Schema object`;
  }
  const size = Buffer.byteLength(JSON.stringify(schema));
  if (size > SCHEMA_LIMITS.maxSchemaJsonBytes) {
    return `${label} is ${size} bytes; at most ${SCHEMA_LIMITS.maxSchemaJsonBytes} are allowed`;
  }
  if (depthOf(schema) > SCHEMA_LIMITS.maxDepth) return `${label} is nested deeper than ${SCHEMA_LIMITS.maxDepth} levels`;
  const record = schema as Record<string, unknown>;
  if (record["type"] !== "object") return `${label} must have "type": "object" (${whyObject})`;
  const reference = findNonLocalReference(schema, "", label);
  if (reference) return reference;
  const problems = schemaProblems(schema);
  return problems.length > 0 ? `${label} is not valid JSON Schema: ${problems.join("; ")}` : undefined;
}

/** Keywords whose value is a schema, a map of schemas or a list of schemas (draft-07 plus `$defs`). */
const SUBSCHEMA = ["additionalItems", "additionalProperties", "contains", "propertyNames", "not", "if", "then", "else", "items"];
const SUBSCHEMA_MAPS = ["properties", "patternProperties", "definitions", "$defs", "dependencies"];
const SUBSCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "items"];

/**
 * All tools share one validator instance. `$id` and anchors register names in it, and a non-local
 * `$ref` resolves against what other schemas registered, so one tool's schema could change how
 * another's is read. Tool schemas therefore use only local references (`#/definitions/…`).
 */
function findNonLocalReference(schema: unknown, path: string, label: string): string | undefined {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return undefined;
  const node = schema as Record<string, unknown>;
  const where = path === "" ? "" : ` (at ${path})`;
  for (const keyword of ["$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"]) {
    if (keyword in node) return `${label} may not use "${keyword}"${where}; tool schemas stand alone, use local references such as "#/definitions/x"`;
  }
  const ref = node["$ref"];
  if (ref !== undefined && (typeof ref !== "string" || !ref.startsWith("#"))) {
    return `${label} may only use local references ("$ref": "#/definitions/…"), not ${JSON.stringify(ref)}${where}`;
  }
  const children: Array<[unknown, string]> = [];
  for (const keyword of SUBSCHEMA) if (keyword in node) children.push([node[keyword], `${path}${path ? "." : ""}${keyword}`]);
  for (const keyword of SUBSCHEMA_MAPS) {
    const map = node[keyword];
    if (typeof map !== "object" || map === null) continue;
    for (const [key, child] of Object.entries(map)) children.push([child, `${path}${path ? "." : ""}${keyword}.${key}`]);
  }
  for (const keyword of SUBSCHEMA_LISTS) {
    const list = node[keyword];
    if (Array.isArray(list)) list.forEach((child, index) => children.push([child, `${path}${path ? "." : ""}${keyword}.${index}`]));
  }
  for (const [child, childPath] of children) {
    const found = findNonLocalReference(child, childPath, label);
    if (found) return found;
  }
  return undefined;
}

function depthOf(value: unknown, depth = 0): number {
  if (typeof value !== "object" || value === null) return depth;
  if (depth > SCHEMA_LIMITS.maxDepth) return depth;
  let max = depth + 1;
  for (const child of Object.values(value)) max = Math.max(max, depthOf(child, depth + 1));
  return max;
}

function checkProfile(raw: unknown, problems: string[]): Record<string, ProfileEntry> {
  if (raw === null || raw === undefined) return {};
  if (typeof raw !== "object" || Array.isArray(raw)) {
    problems.push("EXECUTION_PROFILE must be an object mapping action names to settings");
    return {};
  }
  const profile: Record<string, ProfileEntry> = {};
  for (const [action, value] of Object.entries(raw)) {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      problems.push(`EXECUTION_PROFILE.${action} must be an object`);
      continue;
    }
    const entry = value as Record<string, unknown>;
    const out: ProfileEntry = {};
    for (const key of ["expected_seconds", "timeout_seconds"] as const) {
      const v = entry[key];
      if (v === undefined || v === null) continue;
      if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) problems.push(`EXECUTION_PROFILE.${action}.${key} must be a positive number of seconds`);
      else out[key] = v;
    }
    for (const key of ["background_eligible", "gated"] as const) {
      const v = entry[key];
      if (v === undefined || v === null) continue;
      if (typeof v !== "boolean") problems.push(`EXECUTION_PROFILE.${action}.${key} must be true or false`);
      else out[key] = v;
    }
    const retry = checkRetry(entry["retry"], `EXECUTION_PROFILE.${action}.retry`, problems);
    if (retry) out.retry = retry;
    profile[action] = out;
  }
  return profile;
}

function checkRetry(raw: unknown, where: string, problems: string[]): ProfileEntry["retry"] {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== "object" || Array.isArray(raw)) {
    problems.push(`${where} must be an object like { attempts: 3, backoff: 5 }`);
    return undefined;
  }
  const { attempts, backoff } = raw as Record<string, unknown>;
  let ok = true;
  if (typeof attempts !== "number" || !Number.isInteger(attempts) || attempts < 1 || attempts > MAX_RETRY_ATTEMPTS) {
    problems.push(`${where}.attempts must be a whole number of runs from 1 to ${MAX_RETRY_ATTEMPTS}`);
    ok = false;
  }
  if (backoff !== undefined && (typeof backoff !== "number" || !Number.isFinite(backoff) || backoff < 0 || backoff > MAX_RETRY_BACKOFF_SECONDS)) {
    problems.push(`${where}.backoff must be a number of seconds from 0 to ${MAX_RETRY_BACKOFF_SECONDS}`);
    ok = false;
  }
  if (!ok) return undefined;
  return { attempts: attempts as number, ...(backoff !== undefined ? { backoff: backoff as number } : {}) };
}

/** The profile entry for an action; keys may spell the action with hyphens (`draft-update`). */
export function profileFor(profile: Record<string, ProfileEntry>, action: string): ProfileEntry | undefined {
  return profile[action] ?? profile[action.replaceAll("_", "-")] ?? profile[action.replaceAll("-", "_")];
}
