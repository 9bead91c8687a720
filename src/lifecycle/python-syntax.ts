import type { PyStatement, PyToken } from "./python-scan.js";

/**
 * What python-checks.ts reads from python-scan.ts's tokens beyond the layout: values written as literals
 * (the list get_tool_schemas() returns, EXECUTION_PROFILE), import statements, a `def`'s parameters and a
 * call's arguments. Every part keeps the token it starts at, so a problem is shown at its line.
 *
 * Only what a literal spells is read: a part written as any other expression is `expression`, and a
 * container built in part at run time (a comprehension, `*rest`, `**extra`) is marked incomplete, so
 * that nothing is reported missing from it. Nested brackets are stepped over by their matching closer,
 * so each token is looked at once per reading.
 */
export type PyValue =
  | { kind: "list"; items: PyValue[]; token: PyToken; complete: boolean }
  | { kind: "dict"; entries: Array<{ key: string | undefined; value: PyValue | undefined }>; token: PyToken; complete: boolean }
  | { kind: "str"; value: string; token: PyToken; dynamic: boolean }
  | { kind: "number" | "constant" | "set" | "tuple" | "expression"; token: PyToken };

/** Nesting read at most: deeper parts are `expression` (no schema nests near it; the call stack stays small). */
const MAX_DEPTH = 48;

/** The value written as tokens[start..end), or undefined when the range is empty. */
export function pyLiteral(tokens: PyToken[], start: number, end: number, depth = 0): PyValue | undefined {
  const first = tokens[start];
  if (first === undefined || start >= end) return undefined;
  const op = (value: string): boolean => first.kind === "op" && first.value === value;
  const bracketed = first.close === end - 1 && depth < MAX_DEPTH;
  if (bracketed && op("[")) {
    const inner = split(tokens, start + 1, end - 1);
    if (inner.comprehension) return { kind: "list", items: [], token: first, complete: false };
    const items: PyValue[] = [];
    let complete = true;
    for (const part of inner.parts) {
      if (isOp(tokens[part.start], "*")) complete = false;
      else items.push(pyLiteral(tokens, part.start, part.end, depth + 1) ?? { kind: "expression", token: tokens[part.start] as PyToken });
    }
    return { kind: "list", items, token: first, complete };
  }
  if (bracketed && op("{")) {
    const inner = split(tokens, start + 1, end - 1);
    if (inner.parts.length === 0) return { kind: "dict", entries: [], token: first, complete: true };
    const isEntry = (part: Part): boolean => part.colon !== -1 || isOp(tokens[part.start], "**");
    if (inner.comprehension) return inner.parts.every(isEntry) ? { kind: "dict", entries: [], token: first, complete: false } : { kind: "set", token: first };
    if (!inner.parts.some(isEntry)) return { kind: "set", token: first };
    if (!inner.parts.every(isEntry)) return { kind: "expression", token: first };
    const entries: Array<{ key: string | undefined; value: PyValue | undefined }> = [];
    let complete = true;
    for (const part of inner.parts) {
      if (part.colon === -1) {
        complete = false; // **extra
        continue;
      }
      const key = pyLiteral(tokens, part.start, part.colon, depth + 1);
      entries.push({ key: key?.kind === "str" && !key.dynamic ? key.value : undefined, value: pyLiteral(tokens, part.colon + 1, part.end, depth + 1) });
    }
    return { kind: "dict", entries, token: first, complete };
  }
  if (bracketed && op("(")) {
    const inner = split(tokens, start + 1, end - 1);
    if (inner.comprehension) return { kind: "expression", token: first };
    if (inner.parts.length !== 1 || inner.commas > 0) return { kind: "tuple", token: first };
    const part = inner.parts[0] as Part;
    return pyLiteral(tokens, part.start, part.end, depth + 1);
  }
  // "a" "b": adjacent strings are one.
  let text = "";
  let dynamic = false;
  for (let j = start; j < end; j++) {
    const token = tokens[j] as PyToken;
    if (token.kind !== "string") break;
    text += token.value;
    dynamic ||= token.dynamic === true;
    if (j === end - 1) return { kind: "str", value: text, token: first, dynamic };
  }
  const single = end - start === 1 || (end - start === 2 && (op("-") || op("+")));
  const last = tokens[end - 1] as PyToken;
  if (single && last.kind === "number") return { kind: "number", token: first };
  if (end - start === 1 && first.kind === "name" && ["None", "True", "False"].includes(first.value)) return { kind: "constant", token: first };
  return { kind: "expression", token: first };
}

/** How a value that should be a list or dict is described when it is not one. */
export function describeValue(value: PyValue | undefined): string {
  if (value === undefined) return "nothing (None)";
  switch (value.kind) {
    case "str":
      return "a string";
    case "number":
      return "a number";
    case "constant":
      return value.token.value;
    case "set":
      return "a set";
    case "tuple":
      return "a tuple";
    case "dict":
      return "a dict";
    case "list":
      return "a list";
    case "expression":
      return "an expression";
  }
}

interface Part {
  start: number;
  end: number;
  /** Index of the part's first `:` outside brackets (a dict entry's), -1 when none. */
  colon: number;
}

/** The comma-separated parts of tokens[start..end) (inside one pair of brackets); nested brackets are skipped whole. */
export function split(tokens: PyToken[], start: number, end: number): { parts: Part[]; commas: number; comprehension: boolean } {
  const parts: Part[] = [];
  let commas = 0;
  let comprehension = false;
  let from = start;
  let colon = -1;
  for (let j = start; j < end; j++) {
    const token = tokens[j] as PyToken;
    if (token.close !== undefined && token.close < end) {
      j = token.close;
    } else if (token.kind === "name" && token.value === "for") {
      comprehension = true;
    } else if (isOp(token, ":") && colon === -1) {
      colon = j;
    } else if (isOp(token, ",")) {
      commas++;
      parts.push({ start: from, end: j, colon });
      from = j + 1;
      colon = -1;
    }
  }
  if (from < end) parts.push({ start: from, end, colon });
  return { parts: parts.filter((part) => part.end > part.start), commas, comprehension };
}

export function isOp(token: PyToken | undefined, value: string): boolean {
  return token !== undefined && token.kind === "op" && token.value === value;
}

export function isName(token: PyToken | undefined, value: string): boolean {
  return token !== undefined && token.kind === "name" && token.value === value;
}

export interface PyImport {
  /** The dotted module name as written (without a relative import's dots). */
  module: string;
  /** Leading dots of a relative import. */
  level: number;
  /** `from m import a as b`: [a, b] pairs; `import m as b`: empty. */
  names: Array<[string, string]>;
  /** The name `import m` / `import m as b` binds. */
  alias?: string;
  /** Where it is shown: the module name, or a relative import's `from`. */
  token: PyToken;
  /** Index of its statement. */
  statement: number;
}

/** Each `import` / `from … import` statement's modules. */
export function importsOf(tokens: PyToken[], statement: PyStatement, index: number): PyImport[] {
  const dotted = (from: number): { name: string; next: number } => {
    let name = "";
    let j = from;
    while (tokens[j]?.kind === "name" && j < statement.end) {
      name += (tokens[j] as PyToken).value;
      if (!isOp(tokens[j + 1], ".")) return { name, next: j + 1 };
      name += ".";
      j += 2;
    }
    return { name, next: j };
  };
  const alias = (j: number): string | undefined => (isName(tokens[j], "as") && tokens[j + 1]?.kind === "name" ? (tokens[j + 1] as PyToken).value : undefined);
  const first = tokens[statement.start];
  if (isName(first, "import")) {
    const found: PyImport[] = [];
    for (let j = statement.start + 1; j < statement.end;) {
      const token = tokens[j] as PyToken;
      const { name, next } = dotted(j);
      if (name === "") break;
      const bound = alias(next);
      found.push({ module: name, level: 0, names: [], alias: bound ?? name.split(".")[0], token, statement: index });
      j = (bound === undefined ? next : next + 2) + 1; // past the comma
    }
    return found;
  }
  if (!isName(first, "from")) return [];
  let j = statement.start + 1;
  let level = 0;
  for (; isOp(tokens[j], ".") || isOp(tokens[j], "..."); j++) level += (tokens[j] as PyToken).value.length;
  const token = tokens[j] as PyToken;
  const { name, next } = isName(tokens[j], "import") ? { name: "", next: j } : dotted(j);
  if (!isName(tokens[next], "import")) return [];
  const names: Array<[string, string]> = [];
  for (let k = next + 1; k < statement.end; k++) {
    const part = tokens[k] as PyToken;
    if (part.kind !== "name") continue;
    const bound = alias(k + 1);
    names.push([part.value, bound ?? part.value]);
    if (bound !== undefined) k += 2;
  }
  return [{ module: name, level, names, token: level > 0 ? (tokens[statement.start] as PyToken) : token, statement: index }];
}

/** Positional parameter names of the `def` whose `(` is tokens[open]; `variadic` when it takes *args. */
export function parameters(tokens: PyToken[], open: number): { positional: string[]; variadic: boolean } {
  const positional: string[] = [];
  let variadic = false;
  let keywordOnly = false;
  for (const part of split(tokens, open + 1, tokens[open]?.close ?? open + 1).parts) {
    const first = tokens[part.start] as PyToken;
    if (isOp(first, "*")) {
      keywordOnly = true;
      if (tokens[part.start + 1]?.kind === "name") variadic = true;
    } else if (isOp(first, "**")) keywordOnly = true;
    else if (first.kind === "name" && !keywordOnly) positional.push(first.value);
  }
  return { positional, variadic };
}

/** The arguments of the call whose `(` is tokens[open]: positional count, keyword names, and whether *x / **x is passed. */
export function callArguments(tokens: PyToken[], open: number): { positional: number; keywords: Set<string>; spread: boolean } | undefined {
  const close = tokens[open]?.close;
  if (close === undefined) return undefined;
  const keywords = new Set<string>();
  let positional = 0;
  let spread = false;
  for (const part of split(tokens, open + 1, close).parts) {
    const first = tokens[part.start] as PyToken;
    if (isOp(first, "*") || isOp(first, "**")) spread = true;
    else if (first.kind === "name" && isOp(tokens[part.start + 1], "=")) keywords.add(first.value);
    else positional++;
  }
  return { positional, keywords, spread };
}
