import type { Token } from "./lexer.js";

/**
 * Reading values written as literals in a tool's source (its schema list, its EXECUTION_PROFILE) from
 * the lexer's tokens, and where each part of them was written, so that a problem found in the value can
 * be shown at its line. Shared by source-scan.ts and the validator's other token checks.
 */

export const is = (token: Token | undefined, value: string): boolean =>
  token !== undefined && (token.kind === "punct" || token.kind === "name") && token.value === value;
export const isStringish = (token: Token | undefined): boolean =>
  token !== undefined && (token.kind === "string" || (token.kind === "template" && !token.dynamic));

/** Keys and indexes from a literal's top to one of its parts. */
export type LiteralPath = ReadonlyArray<string | number>;
/**
 * Where the parts of a parsed literal were written: for a property its key, for an array element its
 * first token, by `pathKey`. A part written as the name of another `const` has its inner parts where
 * that const's literal is.
 */
export type LiteralLocations = Map<string, Token>;

/** Indexes as strings: a JSON Pointer (how ajv says where) names array elements so too. */
export const pathKey = (path: LiteralPath): string => JSON.stringify(path.map(String));

/** The token where the part at `path` was written, or, when that part is absent, the nearest part holding it. */
export function locate(locations: LiteralLocations, path: LiteralPath): Token | undefined {
  for (let length = path.length; length >= 0; length--) {
    const token = locations.get(pathKey(path.slice(0, length)));
    if (token) return token;
  }
  return undefined;
}

/** Index of the first token after `=` in `const NAME = …` / `const NAME: Type = …`. Only `const`: it cannot be reassigned. */
export function constInitializer(tokens: Token[], name: string): number | undefined {
  return initializersOf(tokens).get(name);
}

/**
 * Every `const`'s initialiser in `tokens`, found in one pass and kept with the tokens: a literal naming
 * the same const thousands of times once rescanned the whole file for each (a 100 KB draft: 41 s).
 */
const initializers = new WeakMap<Token[], Map<string, number>>();

function initializersOf(tokens: Token[]): Map<string, number> {
  let found = initializers.get(tokens);
  if (found) return found;
  found = new Map();
  for (let i = 0; i < tokens.length; i++) {
    const name = tokens[i + 1];
    if (!is(tokens[i], "const") || name?.kind !== "name" || found.has(name.value)) continue;
    for (let j = i + 2; j < tokens.length && j < i + 200; j++) {
      if (is(tokens[j], "=")) {
        found.set(name.value, j + 1);
        break;
      }
      if (is(tokens[j], ";")) break;
    }
  }
  initializers.set(tokens, found);
  return found;
}

/**
 * True when the expression ends right before `index`: `[…].map(f)` is not the literal `[…]`. A name on a
 * later line ends it too (automatic semicolon insertion); `as`/`satisfies` only add a type.
 */
export function endsExpression(tokens: Token[], index: number): boolean {
  const next = tokens[index];
  if (next === undefined || is(next, ";") || is(next, "}") || is(next, ")") || is(next, ",") || is(next, "]")) return true;
  if (is(next, "as") || is(next, "satisfies")) return true;
  return next.kind === "name" && next.line > (tokens[index - 1]?.line ?? 0);
}

const isOpener = (t: Token | undefined): boolean => is(t, "(") || is(t, "[") || is(t, "{");
const isCloser = (t: Token | undefined): boolean => is(t, ")") || is(t, "]") || is(t, "}");

/**
 * A token list's brackets, found in one pass, once per list. Checks ask for the end of a call or a group
 * at every name that may start one, and for what encloses a call, and a draft nests them
 * (`fetch(fetch(fetch(…`): walked each time, that was quadratic (300 KB held the checks for their whole
 * 30 s; red team: nested_call_scan). Any closer closes the latest opener, whatever its kind (as a walk
 * counting depth would).
 */
export interface Brackets {
  /** Per opening bracket: the index just after the bracket that closes it (the list's length when none does). */
  after: Int32Array;
  /** Per token: the opening bracket enclosing it (-1: none); a closer's is the one it closes. */
  parent: Int32Array;
}

const bracketsByTokens = new WeakMap<Token[], Brackets>();

export function bracketsOf(tokens: Token[]): Brackets {
  let brackets = bracketsByTokens.get(tokens);
  if (brackets) return brackets;
  brackets = { after: new Int32Array(tokens.length).fill(tokens.length), parent: new Int32Array(tokens.length) };
  const open: number[] = [];
  for (let j = 0; j < tokens.length; j++) {
    const t = tokens[j];
    brackets.parent[j] = open.at(-1) ?? -1;
    if (isOpener(t)) open.push(j);
    else if (isCloser(t) && open.length > 0) brackets.after[open.pop() as number] = j + 1;
  }
  bracketsByTokens.set(tokens, brackets);
  return brackets;
}

/** Index just after the bracket that closes the one at `open` (from `open`, the end of the first group). */
export function skipBalanced(tokens: Token[], open: number): number {
  if (isOpener(tokens[open])) return bracketsOf(tokens).after[open] as number;
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

export type Parsed = { ok: true; value: unknown; next: number } | { ok: false };

/** How deep `const` references inside a literal are followed (`properties: { text: textParameter }`). */
const MAX_REFERENCE_DEPTH = 8;

/** Where parseLiteral records locations, and the path of the value it is reading. */
interface Tracking {
  locations: LiteralLocations;
  path: LiteralPath;
}

/**
 * Values one `parseLiteral` reads, at most, counting each time a `const` it names is read again: past
 * it the literal is not read (as if computed). `const L1 = [L0, L0, …]; const L2 = [L1, L1, …]; …` is
 * F⁸ values in a few hundred bytes, which ended the process that read it (a heap abort no worker limit
 * catches). A schema list of 64 schemas is a few thousand.
 */
export const MAX_LITERAL_VALUES = 100_000;

/** What is left of a literal's values, and how deep its brackets are where it is being read. */
interface Budget {
  left: number;
  nesting: number;
}

/** Brackets a literal may nest and still be read (each level is a few stack frames; schemas may nest 24). */
export const MAX_LITERAL_NESTING = 1_000;

/**
 * Parses a JSON-like literal (also unquoted keys, single quotes, trailing commas, `as const`, and names
 * of other `const` literals in the file). With `locations`, records where each part was written.
 */
export function parseLiteral(tokens: Token[], start: number, locations?: LiteralLocations): Parsed {
  return parseValue(tokens, start, 0, locations ? { locations, path: [] } : undefined, { left: MAX_LITERAL_VALUES, nesting: 0 });
}

function parseValue(tokens: Token[], start: number, depth: number, track: Tracking | undefined, budget: Budget): Parsed {
  const t = tokens[start];
  if (t === undefined || --budget.left < 0) return { ok: false };
  // The first record wins: a property is at its key, not at the value after it.
  if (track && !track.locations.has(pathKey(track.path))) track.locations.set(pathKey(track.path), t);
  if (t.kind === "name" && !["true", "false", "null"].includes(t.value)) {
    const at = depth < MAX_REFERENCE_DEPTH && endsExpression(tokens, start + 1) ? constInitializer(tokens, t.value) : undefined;
    const referenced = at === undefined ? undefined : parseValue(tokens, at, depth + 1, track, budget);
    return referenced?.ok && endsExpression(tokens, referenced.next) ? { ok: true, value: referenced.value, next: start + 1 } : { ok: false };
  }
  let result: Parsed;
  if (isStringish(t)) result = { ok: true, value: t.value, next: start + 1 };
  else if (t.kind === "number") result = numberAt(t.value, start + 1, 1);
  else if (is(t, "-") && tokens[start + 1]?.kind === "number") result = numberAt((tokens[start + 1] as Token).value, start + 2, -1);
  else if (is(t, "true") || is(t, "false")) result = { ok: true, value: t.value === "true", next: start + 1 };
  else if (is(t, "null")) result = { ok: true, value: null, next: start + 1 };
  else if (is(t, "[") || is(t, "{")) {
    if (++budget.nesting > MAX_LITERAL_NESTING) return { ok: false };
    result = is(t, "[") ? parseArray(tokens, start + 1, depth, track, budget) : parseObject(tokens, start + 1, depth, track, budget);
    budget.nesting--;
  } else if (is(t, "(")) {
    const inner = parseValue(tokens, start + 1, depth, track, budget);
    result = inner.ok && is(tokens[inner.next], ")") ? { ...inner, next: inner.next + 1 } : { ok: false };
  } else return { ok: false };
  if (result.ok && is(tokens[result.next], "as") && is(tokens[result.next + 1], "const")) result.next += 2;
  return result;
}

function numberAt(text: string, next: number, sign: number): Parsed {
  const value = Number(text.replaceAll("_", ""));
  return Number.isFinite(value) ? { ok: true, value: sign * value, next } : { ok: false };
}

/**
 * Parts deeper than this are not located (a problem there is shown at the deepest part located, as
 * `locate` does): each level copies and keys its whole path, so tracking every level of a literal nested
 * thousands deep cost seconds (quadratic: a crafted 10 KB draft took 1.6 s). Schemas may nest 24 levels.
 */
const MAX_LOCATED_DEPTH = 64;

/** Longest key below which parts are located: each part's location key holds its whole path (`pathKey`). */
const MAX_LOCATED_KEY_CHARS = 256;

const child = (track: Tracking | undefined, key: string | number): Tracking | undefined =>
  track && track.path.length < MAX_LOCATED_DEPTH && String(key).length <= MAX_LOCATED_KEY_CHARS
    ? { locations: track.locations, path: [...track.path, key] }
    : undefined;

function parseArray(tokens: Token[], start: number, depth: number, track: Tracking | undefined, budget: Budget): Parsed {
  const items: unknown[] = [];
  let j = start;
  while (!is(tokens[j], "]")) {
    const item = parseValue(tokens, j, depth, child(track, items.length), budget);
    if (!item.ok) return item;
    items.push(item.value);
    j = item.next;
    if (is(tokens[j], ",")) j++;
    else if (!is(tokens[j], "]")) return { ok: false };
  }
  return { ok: true, value: items, next: j + 1 };
}

function parseObject(tokens: Token[], start: number, depth: number, track: Tracking | undefined, budget: Budget): Parsed {
  const object: Record<string, unknown> = {};
  let j = start;
  while (!is(tokens[j], "}")) {
    const key = tokens[j];
    if (key === undefined || !(key.kind === "name" || isStringish(key) || key.kind === "number") || !is(tokens[j + 1], ":")) return { ok: false };
    const keyTrack = child(track, key.value);
    if (keyTrack && !keyTrack.locations.has(pathKey(keyTrack.path))) keyTrack.locations.set(pathKey(keyTrack.path), key);
    const value = parseValue(tokens, j + 2, depth, keyTrack, budget);
    if (!value.ok) return value;
    Object.defineProperty(object, key.value, { value: value.value, enumerable: true, writable: true, configurable: true });
    j = value.next;
    if (is(tokens[j], ",")) j++;
    else if (!is(tokens[j], "}")) return { ok: false };
  }
  return { ok: true, value: object, next: j + 1 };
}
