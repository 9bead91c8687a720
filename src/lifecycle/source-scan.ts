import { type Token, lex } from "./lexer.js";
import { type LiteralLocations, constInitializer, endsExpression, is, isStringish, parseLiteral, skipBalanced } from "./literal.js";

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
  /** Where each exported name was first written as exported. */
  exportTokens: Map<string, Token>;
  /** True when exports are assigned in a way the scan cannot list (`module.exports = build()`). */
  exportsUnknown: boolean;
  /**
   * The array `get_tool_schemas()` returns, when it is a literal (with where each part of it is
   * written); `dynamic` when it is computed; absent when no such function was found. `line`: the
   * function's.
   */
  schemas: { kind: "literal"; value: unknown[]; line: number; locations: LiteralLocations } | { kind: "dynamic"; line: number } | undefined;
  /** The exported `EXECUTION_PROFILE`, when it is a `const` literal; `dynamic` when it is exported otherwise; absent when it is not exported. */
  profile: { kind: "literal"; value: unknown; locations: LiteralLocations } | { kind: "dynamic" } | undefined;
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
    exports: new Set(exportsInfo.names.keys()),
    exportTokens: exportsInfo.names,
    exportsUnknown: exportsInfo.unknown,
    schemas: findSchemaLiteral(tokens),
    profile: findProfileLiteral(tokens, exportsInfo),
    fetchCalls: findFetchCalls(tokens),
  };
}

/** The imports of a source alone: `scanSource`'s `imports` without its other readings (share and a draft's copy need only these). */
export function scanImports(source: string): ImportUse[] {
  return findImports(lex(source).tokens);
}

/** True for `./x`, `../x`, `.` and `..`: a file beside the tool (the only imports besides the tool API). */
export function isRelativeSpecifier(specifier: string): boolean {
  return specifier === "." || specifier === ".." || specifier.startsWith("./") || specifier.startsWith("../");
}

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
        found.push({
          specifier: literal ? (argument as Token).value : undefined,
          kind: token.value === "import" ? "dynamic-import" : "require",
          line: token.line,
        });
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

function findExports(tokens: Token[]): { names: Map<string, Token>; unknown: boolean } {
  const found = new Map<string, Token>();
  const names = {
    add(token: Token): void {
      if (!found.has(token.value)) found.set(token.value, token);
    },
  };
  let unknown = false;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as Token;
    if (token.kind !== "name" || isProperty(tokens, i)) continue;
    if (token.value === "export") {
      let j = i + 1;
      if (is(tokens[j], "default")) {
        names.add(tokens[j] as Token);
        continue;
      }
      if (is(tokens[j], "declare")) j++;
      if (is(tokens[j], "async")) j++;
      if (is(tokens[j], "function") || is(tokens[j], "class") || is(tokens[j], "const") || is(tokens[j], "let") || is(tokens[j], "var")) {
        j++;
        if (is(tokens[j], "*")) j++;
        if (tokens[j]?.kind === "name") names.add(tokens[j] as Token);
      } else if (is(tokens[j], "{")) {
        // export { a, b as c, type T }: the exported name is the last name of each entry.
        for (j++; j < tokens.length && !is(tokens[j], "}"); j++) {
          if (tokens[j]?.kind !== "name" || is(tokens[j], "as") || is(tokens[j], "type")) continue;
          if (is(tokens[j + 1], "as")) continue;
          names.add(tokens[j] as Token);
        }
      }
    } else if (token.value === "exports" && is(tokens[i + 1], ".") && tokens[i + 2]?.kind === "name" && is(tokens[i + 3], "=")) {
      names.add(tokens[i + 2] as Token);
    } else if (token.value === "module" && is(tokens[i + 1], ".") && is(tokens[i + 2], "exports")) {
      if (is(tokens[i + 3], ".") && tokens[i + 4]?.kind === "name" && is(tokens[i + 5], "=")) names.add(tokens[i + 4] as Token);
      else if (is(tokens[i + 3], "=") && is(tokens[i + 4], "{")) for (const key of objectKeys(tokens, i + 4)) names.add(key);
      else if (is(tokens[i + 3], "=")) unknown = true;
    }
  }
  return { names: found, unknown };
}

/** Top-level keys of the object literal opening at `open`: `a: …`, `a,` (shorthand), `a() {…}`, `async a() {…}`, `"a": …`. */
function objectKeys(tokens: Token[], open: number): Token[] {
  const keys: Token[] = [];
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
      if ((t.kind === "name" || t.kind === "string") && (is(next, ":") || is(next, "(") || is(next, ",") || is(next, "}"))) keys.push(t);
      atKey = false;
    }
  }
  return keys;
}

/** Definitions of `get_tool_schemas` whose returned value is looked for, at most. */
const MAX_DEFINITIONS_READ = 8;

/** Finds `get_tool_schemas`' definition and, when what it returns is a literal, that value. */
function findSchemaLiteral(tokens: Token[]): SourceScan["schemas"] {
  let definitionLine: number | undefined;
  let tried = 0;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as Token;
    if (token.kind !== "name" || !SCHEMA_FUNCTIONS.has(token.value)) continue;
    const definition =
      is(tokens[i - 1], "function") ||
      is(tokens[i + 1], "=") ||
      is(tokens[i + 1], ":") ||
      (is(tokens[i + 1], "(") && (is(tokens[i - 1], "{") || is(tokens[i - 1], ",") || is(tokens[i - 1], "async")));
    if (!definition) continue;
    definitionLine ??= token.line;
    // Each look for what a definition returns may read to the end of the file: a file of thousands of
    // unclosed `{get_tool_schemas(` took minutes. A tool defines it once; the first few are looked at.
    if (++tried > MAX_DEFINITIONS_READ) break;
    const returned = returnedExpression(tokens, i + 1);
    if (returned === undefined) continue;
    const locations: LiteralLocations = new Map();
    const value = parseLiteral(tokens, resolveIdentifier(tokens, returned), locations);
    if (value.ok && Array.isArray(value.value) && endsExpression(tokens, value.next))
      return { kind: "literal", value: value.value, line: token.line, locations };
    return { kind: "dynamic", line: token.line };
  }
  return definitionLine === undefined ? undefined : { kind: "dynamic", line: definitionLine };
}

/** `return SCHEMAS` → the initialiser of `const SCHEMAS = …` (when there is one). */
function resolveIdentifier(tokens: Token[], index: number): number {
  const token = tokens[index];
  if (token?.kind !== "name" || !endsExpression(tokens, index + 1)) return index;
  return constInitializer(tokens, token.value) ?? index;
}

const PROFILE = "EXECUTION_PROFILE";

/** The host reads EXECUTION_PROFILE only as an export; a literal is read where `const EXECUTION_PROFILE` is. */
function findProfileLiteral(tokens: Token[], exportsInfo: { names: Map<string, Token>; unknown: boolean }): SourceScan["profile"] {
  const start = constInitializer(tokens, PROFILE);
  if (!exportsInfo.names.has(PROFILE)) return exportsInfo.unknown && start !== undefined ? { kind: "dynamic" } : undefined;
  if (start === undefined) return { kind: "dynamic" };
  const locations: LiteralLocations = new Map();
  const value = parseLiteral(tokens, start, locations);
  return value.ok && endsExpression(tokens, value.next) ? { kind: "literal", value: value.value, locations } : { kind: "dynamic" };
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

function findFetchCalls(tokens: Token[]): SourceScan["fetchCalls"] {
  const calls: SourceScan["fetchCalls"] = [];
  // Each call is judged in time linear in its own top level, never its whole inside (nested calls were
  // quadratic): timeout names counted before each token, nested groups jumped.
  const timeoutsBefore = new Int32Array(tokens.length + 1);
  tokens.forEach(
    (t, k) => (timeoutsBefore[k + 1] = (timeoutsBefore[k] as number) + (t.value === "timeoutMs" && (t.kind === "name" || t.kind === "string") ? 1 : 0)),
  );
  const timeoutNamedAnywhere = (timeoutsBefore[tokens.length] as number) > 0;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as Token;
    if (token.kind !== "name" || token.value !== "fetch" || !is(tokens[i + 1], "(") || is(tokens[i - 1], "function")) continue;
    const end = skipBalanced(tokens, i + 1);
    if (is(tokens[end], "{")) continue; // a method definition `fetch(url) { … }`, not a call
    // Inside the call: tokens i + 2 … end - 2.
    if ((timeoutsBefore[end - 1] as number) - (timeoutsBefore[i + 2] as number) > 0) {
      calls.push({ line: token.line, hasTimeout: true });
      continue;
    }
    // Options passed as a variable or spread: they may carry a timeout set elsewhere in the file.
    const second = afterTopLevelComma(tokens, i + 2, end - 1);
    const optionsElsewhere = second !== undefined && !is(second, "{");
    calls.push({ line: token.line, hasTimeout: optionsElsewhere && timeoutNamedAnywhere ? undefined : false });
  }
  return calls;
}

/** The token after the first `,` at the top level of `tokens[from … to - 1]` (nested groups jumped), if any. */
function afterTopLevelComma(tokens: Token[], from: number, to: number): Token | undefined {
  for (let j = from; j < to;) {
    const t = tokens[j] as Token;
    if (is(t, "(") || is(t, "[") || is(t, "{")) j = skipBalanced(tokens, j);
    else if (is(t, ",")) return j + 1 < to ? tokens[j + 1] : undefined;
    else j++;
  }
  return undefined;
}
