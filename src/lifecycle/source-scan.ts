import { type Token, lex } from "./lexer.js";

/**
 * What the validator (and share's single-file rule) needs to know about a tool's source, read from its
 * tokens: imports, exported names, the schema list when it is written as a literal, and fetch calls.
 * Everything here is a best effort over text; the real load (bundle + describe in a sandbox) is the
 * authority, and the validator runs it too when it is given a loader.
 */
export interface ImportUse {
  /** The module specifier, or undefined when it is computed at run time (`import(name)`). */
  specifier: string | undefined;
  kind: "import" | "export-from" | "dynamic-import" | "require";
  line: number;
}

export interface SourceScan {
  tokens: Token[];
  unterminated?: { what: string; line: number };
  imports: ImportUse[];
  /** Names the module exports (ES `export`, `exports.x =`, keys of `module.exports = {…}`). */
  exports: Set<string>;
  /** True when exports are assigned in a way the scan cannot list (`module.exports = build()`). */
  exportsUnknown: boolean;
  /** The array `get_tool_schemas()` returns, when it is a literal; `dynamic` when it is computed; absent when no such function was found. */
  schemas: { kind: "literal"; value: unknown[]; line: number } | { kind: "dynamic"; line: number } | undefined;
  /** `fetch(` calls and whether a `timeoutMs` option was seen (undefined: options built elsewhere). */
  fetchCalls: Array<{ line: number; hasTimeout: boolean | undefined }>;
}

export const SCHEMA_FUNCTIONS = new Set(["get_tool_schemas", "getToolSchemas"]);

export function scanSource(source: string): SourceScan {
  const { tokens, unterminated } = lex(source);
  const exportsInfo = findExports(tokens);
  return {
    tokens,
    ...(unterminated ? { unterminated } : {}),
    imports: findImports(tokens),
    exports: exportsInfo.names,
    exportsUnknown: exportsInfo.unknown,
    schemas: findSchemaLiteral(tokens),
    fetchCalls: findFetchCalls(tokens),
  };
}

/** True for `./x`, `../x`, `.` and `..`: a file beside the tool (the only imports besides the tool API). */
export function isRelativeSpecifier(specifier: string): boolean {
  return specifier === "." || specifier === ".." || specifier.startsWith("./") || specifier.startsWith("../");
}

const is = (token: Token | undefined, value: string): boolean => token !== undefined && (token.kind === "punct" || token.kind === "name") && token.value === value;
const isStringish = (token: Token | undefined): boolean => token !== undefined && (token.kind === "string" || (token.kind === "template" && !token.dynamic));
/** `a.import`, `a?.require`: a property, not the keyword or the global. */
const isProperty = (tokens: Token[], index: number): boolean => is(tokens[index - 1], ".") || is(tokens[index - 1], "?.");

function findImports(tokens: Token[]): ImportUse[] {
  const found: ImportUse[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as Token;
    if (token.kind !== "name" || isProperty(tokens, i)) continue;
    if (token.value === "import" || token.value === "require") {
      if (is(tokens[i + 1], "(")) {
        // import("x") / require("x"): a literal specifier is followed by `)` or `,` (import options).
        const argument = tokens[i + 2];
        const literal = isStringish(argument) && (is(tokens[i + 3], ")") || is(tokens[i + 3], ","));
        found.push({ specifier: literal ? (argument as Token).value : undefined, kind: token.value === "import" ? "dynamic-import" : "require", line: token.line });
        continue;
      }
      if (token.value === "require") continue;
      if (is(tokens[i + 1], ".")) continue; // import.meta
      if (is(tokens[i + 1], "type") && !is(tokens[i + 2], ",") && !is(tokens[i + 2], "from")) continue; // `import type …` is erased
      if (isStringish(tokens[i + 1])) {
        found.push({ specifier: (tokens[i + 1] as Token).value, kind: "import", line: token.line });
        continue;
      }
      const from = fromClause(tokens, i + 1);
      if (from) found.push({ specifier: from.value, kind: "import", line: token.line });
    } else if (token.value === "export") {
      if (is(tokens[i + 1], "type")) continue;
      if (!is(tokens[i + 1], "{") && !is(tokens[i + 1], "*")) continue;
      const from = fromClause(tokens, i + 1);
      if (from) found.push({ specifier: from.value, kind: "export-from", line: token.line });
    }
  }
  return found;
}

const STATEMENT_WORDS = new Set(["export", "import", "function", "const", "let", "var", "class", "return", "if", "async"]);

/**
 * The `from "x"` of an import/export clause starting at `start` (`a, { b as c } from`, `* as ns from`,
 * `{ a } from`). Stops at anything a clause cannot contain, so `export { a }` without `from` never
 * borrows the specifier of a later statement.
 */
function fromClause(tokens: Token[], start: number): Token | undefined {
  let depth = 0;
  for (let j = start; j < tokens.length; j++) {
    const t = tokens[j] as Token;
    if (is(t, "{")) depth++;
    else if (is(t, "}")) depth--;
    else if (depth > 0) continue;
    else if (is(t, "from") && isStringish(tokens[j + 1])) return tokens[j + 1];
    else if (t.kind === "name" ? STATEMENT_WORDS.has(t.value) : !is(t, ",") && !is(t, "*")) return undefined;
  }
  return undefined;
}

function findExports(tokens: Token[]): { names: Set<string>; unknown: boolean } {
  const names = new Set<string>();
  let unknown = false;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as Token;
    if (token.kind !== "name" || isProperty(tokens, i)) continue;
    if (token.value === "export") {
      let j = i + 1;
      if (is(tokens[j], "default")) {
        names.add("default");
        continue;
      }
      if (is(tokens[j], "declare")) j++;
      if (is(tokens[j], "async")) j++;
      if (is(tokens[j], "function") || is(tokens[j], "class") || is(tokens[j], "const") || is(tokens[j], "let") || is(tokens[j], "var")) {
        j++;
        if (is(tokens[j], "*")) j++;
        if (tokens[j]?.kind === "name") names.add((tokens[j] as Token).value);
      } else if (is(tokens[j], "{")) {
        // export { a, b as c, type T }: the exported name is the last name of each entry.
        for (j++; j < tokens.length && !is(tokens[j], "}"); j++) {
          if (tokens[j]?.kind !== "name" || is(tokens[j], "as") || is(tokens[j], "type")) continue;
          if (is(tokens[j + 1], "as")) continue;
          names.add((tokens[j] as Token).value);
        }
      }
    } else if (token.value === "exports" && is(tokens[i + 1], ".") && tokens[i + 2]?.kind === "name" && is(tokens[i + 3], "=")) {
      names.add((tokens[i + 2] as Token).value);
    } else if (token.value === "module" && is(tokens[i + 1], ".") && is(tokens[i + 2], "exports")) {
      if (is(tokens[i + 3], ".") && tokens[i + 4]?.kind === "name" && is(tokens[i + 5], "=")) names.add((tokens[i + 4] as Token).value);
      else if (is(tokens[i + 3], "=") && is(tokens[i + 4], "{")) for (const key of objectKeys(tokens, i + 4)) names.add(key);
      else if (is(tokens[i + 3], "=")) unknown = true;
    }
  }
  return { names, unknown };
}

/** Top-level keys of the object literal opening at `open`: `a: …`, `a,` (shorthand), `a() {…}`, `async a() {…}`, `"a": …`. */
function objectKeys(tokens: Token[], open: number): string[] {
  const keys: string[] = [];
  let atKey = true;
  for (let j = open + 1, depth = 1; j < tokens.length && depth > 0; j++) {
    const t = tokens[j] as Token;
    if (is(t, "{") || is(t, "(") || is(t, "[")) depth++;
    else if (is(t, "}") || is(t, ")") || is(t, "]")) depth--;
    else if (depth !== 1) continue;
    else if (is(t, ",")) atKey = true;
    else if (atKey) {
      // `async a() {}`, `get a() {}`: the modifier is not the key.
      if ((is(t, "async") || is(t, "get") || is(t, "set")) && tokens[j + 1]?.kind === "name") continue;
      const next = tokens[j + 1];
      if ((t.kind === "name" || t.kind === "string") && (is(next, ":") || is(next, "(") || is(next, ",") || is(next, "}"))) keys.push(t.value);
      atKey = false;
    }
  }
  return keys;
}

/** Finds `get_tool_schemas`' definition and, when what it returns is a literal, that value. */
function findSchemaLiteral(tokens: Token[]): SourceScan["schemas"] {
  let definitionLine: number | undefined;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as Token;
    if (token.kind !== "name" || !SCHEMA_FUNCTIONS.has(token.value)) continue;
    const definition = is(tokens[i - 1], "function") || is(tokens[i + 1], "=") || is(tokens[i + 1], ":") ||
      (is(tokens[i + 1], "(") && (is(tokens[i - 1], "{") || is(tokens[i - 1], ",") || is(tokens[i - 1], "async")));
    if (!definition) continue;
    definitionLine ??= token.line;
    const returned = returnedExpression(tokens, i + 1);
    if (returned === undefined) continue;
    const value = parseLiteral(tokens, resolveIdentifier(tokens, returned));
    if (value.ok && Array.isArray(value.value) && endsExpression(tokens, value.next)) return { kind: "literal", value: value.value, line: token.line };
    return { kind: "dynamic", line: token.line };
  }
  return definitionLine === undefined ? undefined : { kind: "dynamic", line: definitionLine };
}

/** Index of the first token of the expression a function (starting after its name) returns. */
function returnedExpression(tokens: Token[], start: number): number | undefined {
  let j = start;
  if (is(tokens[j], "=") || is(tokens[j], ":")) j++;
  if (is(tokens[j], "async")) j++;
  if (is(tokens[j], "function")) j++;
  if (tokens[j]?.kind === "name" && is(tokens[j + 1], "(")) j++;
  if (is(tokens[j], "(")) j = skipBalanced(tokens, j);
  else if (tokens[j]?.kind === "name") j++; // x => …
  // Optional return type: skip to the body (`{` after a type, or `=>`), minding `<…>` and brackets.
  if (is(tokens[j], ":")) {
    let angle = 0;
    for (j++; j < tokens.length; j++) {
      const t = tokens[j] as Token;
      if (is(t, "<")) angle++;
      else if (is(t, ">")) angle--;
      else if (is(t, "(") || is(t, "[")) j = skipBalanced(tokens, j) - 1;
      else if (angle === 0 && (is(t, "=>") || is(t, "{"))) break;
    }
  }
  if (is(tokens[j], "=>")) {
    j++;
    while (is(tokens[j], "(")) j++;
    if (!is(tokens[j], "{")) return j;
  }
  if (!is(tokens[j], "{")) return undefined;
  // The first `return` directly in the body (not in a nested function or block).
  let depth = 0;
  for (; j < tokens.length; j++) {
    const t = tokens[j] as Token;
    if (is(t, "{")) depth++;
    else if (is(t, "}")) {
      depth--;
      if (depth === 0) return undefined;
    } else if (depth === 1 && is(t, "return")) return j + 1;
  }
  return undefined;
}

/** `return SCHEMAS` → the initialiser of `const SCHEMAS = …` (when there is one). */
function resolveIdentifier(tokens: Token[], index: number): number {
  const token = tokens[index];
  if (token?.kind !== "name" || !endsExpression(tokens, index + 1)) return index;
  return constInitializer(tokens, token.value) ?? index;
}

/** Index of the first token after `=` in `const NAME = …` / `const NAME: Type = …`. Only `const`: it cannot be reassigned. */
function constInitializer(tokens: Token[], name: string): number | undefined {
  for (let i = 0; i < tokens.length; i++) {
    if (!is(tokens[i], "const") || !is(tokens[i + 1], name)) continue;
    for (let j = i + 2; j < tokens.length && j < i + 200; j++) {
      if (is(tokens[j], "=")) return j + 1;
      if (is(tokens[j], ";")) break;
    }
  }
  return undefined;
}

/**
 * True when the expression ends right before `index`: `[…].map(f)` is not the literal `[…]`. A name on a
 * later line ends it too (automatic semicolon insertion); `as`/`satisfies` only add a type.
 */
function endsExpression(tokens: Token[], index: number): boolean {
  const next = tokens[index];
  if (next === undefined || is(next, ";") || is(next, "}") || is(next, ")") || is(next, ",") || is(next, "]")) return true;
  if (is(next, "as") || is(next, "satisfies")) return true;
  return next.kind === "name" && next.line > (tokens[index - 1]?.line ?? 0);
}

/** Index just after the bracket that closes the one at `open`. */
function skipBalanced(tokens: Token[], open: number): number {
  let depth = 0;
  for (let j = open; j < tokens.length; j++) {
    const t = tokens[j] as Token;
    if (is(t, "(") || is(t, "[") || is(t, "{")) depth++;
    else if (is(t, ")") || is(t, "]") || is(t, "}")) {
      depth--;
      if (depth === 0) return j + 1;
    }
  }
  return tokens.length;
}

type Parsed = { ok: true; value: unknown; next: number } | { ok: false };

/** How deep `const` references inside a literal are followed (`properties: { text: textParameter }`). */
const MAX_REFERENCE_DEPTH = 8;

/**
 * Parses a JSON-like literal (also unquoted keys, single quotes, trailing commas, `as const`, and names
 * of other `const` literals in the file).
 */
export function parseLiteral(tokens: Token[], start: number, depth = 0): Parsed {
  const t = tokens[start];
  if (t === undefined) return { ok: false };
  if (t.kind === "name" && !["true", "false", "null"].includes(t.value)) {
    const at = depth < MAX_REFERENCE_DEPTH && endsExpression(tokens, start + 1) ? constInitializer(tokens, t.value) : undefined;
    const referenced = at === undefined ? undefined : parseLiteral(tokens, at, depth + 1);
    return referenced?.ok && endsExpression(tokens, referenced.next) ? { ok: true, value: referenced.value, next: start + 1 } : { ok: false };
  }
  let result: Parsed;
  if (isStringish(t)) result = { ok: true, value: t.value, next: start + 1 };
  else if (t.kind === "number") result = numberAt(t.value, start + 1, 1);
  else if (is(t, "-") && tokens[start + 1]?.kind === "number") result = numberAt((tokens[start + 1] as Token).value, start + 2, -1);
  else if (is(t, "true") || is(t, "false")) result = { ok: true, value: t.value === "true", next: start + 1 };
  else if (is(t, "null")) result = { ok: true, value: null, next: start + 1 };
  else if (is(t, "[")) result = parseArray(tokens, start + 1, depth);
  else if (is(t, "{")) result = parseObject(tokens, start + 1, depth);
  else if (is(t, "(")) {
    const inner = parseLiteral(tokens, start + 1, depth);
    result = inner.ok && is(tokens[inner.next], ")") ? { ...inner, next: inner.next + 1 } : { ok: false };
  } else return { ok: false };
  if (result.ok && is(tokens[result.next], "as") && is(tokens[result.next + 1], "const")) result.next += 2;
  return result;
}

function numberAt(text: string, next: number, sign: number): Parsed {
  const value = Number(text.replaceAll("_", ""));
  return Number.isFinite(value) ? { ok: true, value: sign * value, next } : { ok: false };
}

function parseArray(tokens: Token[], start: number, depth: number): Parsed {
  const items: unknown[] = [];
  let j = start;
  while (!is(tokens[j], "]")) {
    const item = parseLiteral(tokens, j, depth);
    if (!item.ok) return item;
    items.push(item.value);
    j = item.next;
    if (is(tokens[j], ",")) j++;
    else if (!is(tokens[j], "]")) return { ok: false };
  }
  return { ok: true, value: items, next: j + 1 };
}

function parseObject(tokens: Token[], start: number, depth: number): Parsed {
  const object: Record<string, unknown> = {};
  let j = start;
  while (!is(tokens[j], "}")) {
    const key = tokens[j];
    if (key === undefined || !(key.kind === "name" || isStringish(key) || key.kind === "number") || !is(tokens[j + 1], ":")) return { ok: false };
    const value = parseLiteral(tokens, j + 2, depth);
    if (!value.ok) return value;
    Object.defineProperty(object, key.value, { value: value.value, enumerable: true, writable: true, configurable: true });
    j = value.next;
    if (is(tokens[j], ",")) j++;
    else if (!is(tokens[j], "}")) return { ok: false };
  }
  return { ok: true, value: object, next: j + 1 };
}

function findFetchCalls(tokens: Token[]): SourceScan["fetchCalls"] {
  const calls: SourceScan["fetchCalls"] = [];
  const timeoutNamedAnywhere = tokens.some((t) => t.value === "timeoutMs" && (t.kind === "name" || t.kind === "string"));
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as Token;
    if (token.kind !== "name" || token.value !== "fetch" || !is(tokens[i + 1], "(") || is(tokens[i - 1], "function")) continue;
    const end = skipBalanced(tokens, i + 1);
    if (is(tokens[end], "{")) continue; // a method definition `fetch(url) { … }`, not a call
    const inside = tokens.slice(i + 2, end - 1);
    if (inside.some((t) => t.value === "timeoutMs" && (t.kind === "name" || t.kind === "string"))) {
      calls.push({ line: token.line, hasTimeout: true });
      continue;
    }
    // Options passed as a variable or spread: they may carry a timeout set elsewhere in the file.
    const topLevelComma = topLevelIndex(inside, ",");
    const second = topLevelComma === -1 ? undefined : inside[topLevelComma + 1];
    const optionsElsewhere = second !== undefined && !is(second, "{");
    calls.push({ line: token.line, hasTimeout: optionsElsewhere && timeoutNamedAnywhere ? undefined : false });
  }
  return calls;
}

function topLevelIndex(tokens: Token[], value: string): number {
  let depth = 0;
  for (let j = 0; j < tokens.length; j++) {
    const t = tokens[j] as Token;
    if (is(t, "(") || is(t, "[") || is(t, "{")) depth++;
    else if (is(t, ")") || is(t, "]") || is(t, "}")) depth--;
    else if (depth === 0 && is(t, value)) return j;
  }
  return -1;
}
