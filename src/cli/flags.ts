import { ToolHostError } from "../errors.js";

/**
 * Turns `animaworks-tool <tool> <action> …` argv into an arguments object, typed by the action's JSON
 * Schema (docs/design.md §4): `--limit 10` / `--limit=10`, snake_case or kebab-case names, booleans as
 * `--flag` / `--no-flag`, arrays by repeating a flag or as JSON, objects as JSON, required scalar
 * parameters positionally in `required` order.
 */
export interface ParameterSchema {
  properties?: Record<string, Record<string, unknown>>;
  required?: string[];
}

/**
 * `<action> [flags…]` after a tool's name: the action is the first token that is not an option, its flags
 * are the other tokens, in order (`--limit 5 search q` is action `search` with `--limit 5 q`).
 */
export function splitAction(argv: readonly string[]): { action: string | undefined; flags: string[] } {
  const index = argv.findIndex((token) => !token.startsWith("-"));
  if (index < 0) return { action: undefined, flags: [...argv] };
  return { action: argv[index], flags: [...argv.slice(0, index), ...argv.slice(index + 1)] };
}

export function flagName(param: string): string {
  return `--${param.replaceAll("_", "-")}`;
}

const SCALAR_TYPES = new Set(["string", "integer", "number", "boolean"]);

/**
 * Required parameters of a scalar type (string, integer, number, boolean), in `required` order: these
 * may be given positionally (`unit_convert length 5 --from km`), typed like their flags.
 */
export function positionalParameters(schema: ParameterSchema): string[] {
  const properties = schema.properties ?? {};
  return (schema.required ?? []).filter((name) => {
    const types = typesOf(properties[name]);
    return types.length > 0 && types.every((type) => SCALAR_TYPES.has(type));
  });
}

export function typesOf(prop: Record<string, unknown> | undefined): string[] {
  if (!prop) return [];
  const type = prop["type"];
  if (Array.isArray(type)) return type.filter((t): t is string => typeof t === "string");
  if (typeof type === "string") return [type];
  if (Array.isArray(prop["enum"])) return ["string"];
  return [];
}

export function parseToolFlags(schema: ParameterSchema, argv: string[]): Record<string, unknown> {
  const properties = schema.properties ?? {};
  const byFlag = new Map<string, string>();
  for (const name of Object.keys(properties)) {
    byFlag.set(name, name);
    byFlag.set(name.replaceAll("_", "-"), name);
  }
  const args: Record<string, unknown> = {};
  const positionals: string[] = [];
  const problems: string[] = [];
  let flagsEnded = false;

  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] as string;
    if (flagsEnded || !token.startsWith("--") || token === "--") {
      if (token === "--" && !flagsEnded) flagsEnded = true;
      else positionals.push(token);
      continue;
    }
    const eq = token.indexOf("=");
    const rawName = eq >= 0 ? token.slice(2, eq) : token.slice(2);
    let inlineValue = eq >= 0 ? token.slice(eq + 1) : undefined;
    let name = byFlag.get(rawName);
    let negated = false;
    if (!name && rawName.startsWith("no-") && inlineValue === undefined) {
      const base = byFlag.get(rawName.slice(3));
      if (base && typesOf(properties[base]).includes("boolean")) {
        name = base;
        negated = true;
      }
    }
    if (!name) {
      problems.push(`unknown option --${rawName}`);
      if (inlineValue === undefined && i + 1 < argv.length && !(argv[i + 1] as string).startsWith("--")) i++;
      continue;
    }
    const types = typesOf(properties[name]);
    if (types.includes("boolean") && inlineValue === undefined) {
      const next = argv[i + 1];
      if (!negated && (next === "true" || next === "false") && types.length === 1) {
        inlineValue = next;
        i++;
      } else {
        args[name] = !negated;
        continue;
      }
    }
    if (inlineValue === undefined) {
      const next = argv[i + 1];
      if (next === undefined) {
        problems.push(`option ${flagName(name)} needs a value`);
        continue;
      }
      inlineValue = next;
      i++;
    }
    const converted = convert(name, properties[name], inlineValue);
    if (!converted.ok) {
      problems.push(converted.problem);
      continue;
    }
    if (types.includes("array") && !Array.isArray(converted.value) && Array.isArray(args[name])) {
      (args[name] as unknown[]).push(converted.value);
    } else if (types.includes("array") && !Array.isArray(converted.value)) {
      args[name] = [converted.value];
    } else {
      args[name] = converted.value;
    }
  }

  const positionalNames = positionalParameters(schema).filter((name) => !(name in args));
  positionals.forEach((value, index) => {
    const name = positionalNames[index];
    if (!name) return void problems.push(`unexpected argument "${value}"`);
    const converted = convert(name, properties[name], value);
    if (converted.ok) args[name] = converted.value;
    else problems.push(`${converted.problem} (given in place of ${flagName(name)})`);
  });
  if (problems.length > 0) {
    const known = Object.keys(properties).map(flagName).join(", ");
    throw new ToolHostError("InvalidArguments", problems.join("; "), known ? `options: ${known}` : "this action takes no options");
  }
  return args;
}

type Converted = { ok: true; value: unknown } | { ok: false; problem: string };

function convert(name: string, prop: Record<string, unknown> | undefined, raw: string): Converted {
  const types = typesOf(prop);
  if (types.length === 0) return { ok: true, value: parseJsonOr(raw) };
  for (const type of types) {
    const value = convertAs(type, prop, raw);
    if (value !== NO_MATCH) return { ok: true, value };
  }
  return { ok: false, problem: `${flagName(name)} expects ${types.join(" or ")}, got "${raw}"` };
}

const NO_MATCH = Symbol("no match");

function convertAs(type: string, prop: Record<string, unknown> | undefined, raw: string): unknown {
  switch (type) {
    case "string":
      return raw;
    case "integer":
      return /^[-+]?\d+$/.test(raw.trim()) ? Number(raw) : NO_MATCH;
    case "number": {
      const value = Number(raw);
      return raw.trim() !== "" && Number.isFinite(value) ? value : NO_MATCH;
    }
    case "boolean":
      return raw === "true" ? true : raw === "false" ? false : NO_MATCH;
    case "null":
      return raw === "null" ? null : NO_MATCH;
    case "object": {
      const value = parseJsonOr(raw, NO_MATCH);
      return typeof value === "object" && value !== null && !Array.isArray(value) ? value : NO_MATCH;
    }
    case "array": {
      const trimmed = raw.trim();
      if (trimmed.startsWith("[")) {
        const value = parseJsonOr(trimmed, NO_MATCH);
        if (Array.isArray(value)) return value;
      }
      // One element of a repeated flag, typed by `items`.
      const items = prop?.["items"];
      const itemTypes = typesOf(typeof items === "object" && items !== null ? (items as Record<string, unknown>) : undefined);
      if (itemTypes.length === 0) return raw;
      for (const itemType of itemTypes) {
        const value = convertAs(itemType, items as Record<string, unknown>, raw);
        if (value !== NO_MATCH) return value;
      }
      return NO_MATCH;
    }
    default:
      return NO_MATCH;
  }
}

function parseJsonOr(raw: string, fallback: unknown = raw): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return fallback;
  }
}
