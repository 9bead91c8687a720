import type { Token } from "./lexer.js";
import { bracketsOf, is, skipBalanced } from "./literal.js";

/**
 * getCredential() is asynchronous in this host (the lookup runs on the host, outside the isolate), while
 * the Python it is ported from (`get_credential`) returns the value. A draft that forgets the `await`
 * sends "[object Promise]" as its API key and fails far from the mistake, so the validator points at the
 * call instead. Read from tokens, so a mention in a string or comment is never a call.
 *
 * What counts as handled: `await` (also through parentheses), `.then/.catch/.finally`, being returned
 * (`return`, an arrow's expression body, `yield`), being given to Promise.all/allSettled/race/any, and a
 * variable that holds the call and is itself awaited, returned or given on so later. A call whose value
 * is dropped (a statement of its own) is left alone: it passes no Promise where a string belongs.
 */
export interface UnawaitedCredential {
  line: number;
  column: number;
  /** The name the call used: getCredential or get_credential. */
  name: string;
}

const CREDENTIAL_FUNCTIONS = new Set(["getCredential", "get_credential"]);
/** Words after which `(` groups an expression rather than calling something. */
const OPERATOR_WORDS = new Set(["await", "return", "yield", "typeof", "void", "delete", "in", "of", "case", "throw", "new", "else", "do", "instanceof"]);
const PROMISE_COMBINATORS = new Set(["all", "allSettled", "race", "any"]);
const CHAIN_METHODS = new Set(["then", "catch", "finally"]);

export function findUnawaitedCredentials(tokens: Token[]): UnawaitedCredential[] {
  const found: UnawaitedCredential[] = [];
  const holders = new HolderUses(tokens);
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as Token;
    if (token.kind !== "name" || !CREDENTIAL_FUNCTIONS.has(token.value) || !is(tokens[i + 1], "(")) continue;
    if (is(tokens[i - 1], "function")) continue;
    const end = skipBalanced(tokens, i + 1);
    if (isDeclaration(tokens, i, end)) continue;
    const start = chainStart(tokens, i);
    if (handled(tokens, start, end)) continue;
    const before = skipGrouping(tokens, start - 1);
    if (isStatementStart(tokens, before, start) && isStatementEnd(tokens, end)) continue;
    const holder = assignedTo(tokens, before);
    if (holder !== undefined && holders.lastHandledUse(holder) >= end) continue;
    found.push({ line: token.line, column: token.column, name: token.value });
  }
  return found;
}

/** `getCredential(name) {…}` (a method) or `getCredential(name): Promise<string>;` (a signature). */
function isDeclaration(tokens: Token[], index: number, end: number): boolean {
  if (is(tokens[end], "{")) return true;
  const before = tokens[index - 1];
  return is(tokens[end], ":") && (before === undefined || is(before, "{") || is(before, ";") || is(before, "}") || is(before, ",") || is(before, "async"));
}

/** `api.getCredential(…)`: the expression starts at `api`. */
function chainStart(tokens: Token[], index: number): number {
  let start = index;
  while ((is(tokens[start - 1], ".") || is(tokens[start - 1], "?.")) && tokens[start - 2]?.kind === "name") start -= 2;
  return start;
}

/** Whether the expression from `start` to before `end` is awaited, chained, returned or combined. */
function handled(tokens: Token[], start: number, end: number): boolean {
  if ((is(tokens[end], ".") || is(tokens[end], "?.")) && CHAIN_METHODS.has(tokens[end + 1]?.value ?? "")) return true;
  const before = tokens[skipGrouping(tokens, start - 1)];
  if (is(before, "await") || is(before, "return") || is(before, "=>") || is(before, "yield") || is(before, "void")) return true;
  return insideCombinator(tokens, start);
}

/** Index of the token before `index`'s expression once grouping parentheses `(` are stepped over. */
function skipGrouping(tokens: Token[], index: number): number {
  let j = index;
  while (is(tokens[j], "(") && !isCallParen(tokens, j)) j--;
  return j;
}

function isCallParen(tokens: Token[], open: number): boolean {
  const before = tokens[open - 1];
  if (before === undefined) return false;
  if (before.kind === "name") return !OPERATOR_WORDS.has(before.value);
  return is(before, ")") || is(before, "]") || is(before, ">") || is(before, "?.");
}

/** Inside `Promise.all([…])` (through array literals and further arguments), directly or nested. */
function insideCombinator(tokens: Token[], index: number): boolean {
  const levels = levelsOf(tokens);
  const { parent, lastStop, fromArray } = levels;
  // From the call outwards, group by group: a statement's end, an assignment or an arrow between the
  // group's opening bracket and the call says it is not given to the combinator directly. What is found
  // from an array literal outwards is kept for it (nested arrays of calls would walk out again each).
  const arrays: number[] = [];
  let held: boolean;
  for (let j = index; ;) {
    const open = parent[j] as number;
    if ((lastStop[j] as number) > open || open < 0) {
      held = false;
      break;
    }
    const t = tokens[open] as Token;
    if (is(t, "{")) {
      held = false;
      break;
    }
    if (is(t, "(")) {
      held = is(tokens[open - 2], ".") && PROMISE_COMBINATORS.has(tokens[open - 1]?.value ?? "") && is(tokens[open - 3], "Promise");
      break;
    }
    // `[`: an array literal, which the combinator may be holding.
    const known = fromArray[open] as number;
    if (known !== 0) {
      held = known === 2;
      break;
    }
    arrays.push(open);
    j = open;
  }
  for (const open of arrays) fromArray[open] = held ? 2 : 1;
  return held;
}

/**
 * For each token, the bracket that encloses it (-1: none; literal.ts `bracketsOf`) and the last `;`, `=` or
 * `=>` before it inside that bracket (-1: none): found in one pass, once per token list. Walked back from
 * each call, the enclosing combinator was found in time quadratic in a list of many calls (red team round 18).
 */
interface Levels {
  parent: Int32Array;
  lastStop: Int32Array;
  /** Per array literal's `[`: 0 not known yet, 1 not held by a combinator, 2 held (insideCombinator). */
  fromArray: Int8Array;
}

const levelsByTokens = new WeakMap<Token[], Levels>();

function levelsOf(tokens: Token[]): Levels {
  let levels = levelsByTokens.get(tokens);
  if (levels) return levels;
  const { parent } = bracketsOf(tokens);
  levels = { parent, lastStop: new Int32Array(tokens.length), fromArray: new Int8Array(tokens.length) };
  // The last stop seen inside each bracket, by its opener's index + 1 (0: the top level).
  const lastInside = new Int32Array(tokens.length + 1).fill(-1);
  for (let j = 0; j < tokens.length; j++) {
    const level = (parent[j] as number) + 1;
    levels.lastStop[j] = lastInside[level] as number;
    const t = tokens[j] as Token;
    if (is(t, ";") || is(t, "=") || is(t, "=>")) lastInside[level] = j;
  }
  levelsByTokens.set(tokens, levels);
  return levels;
}

/** True when the token at `before` ends a statement, so the call at `start` begins one. */
function isStatementStart(tokens: Token[], before: number, start: number): boolean {
  const t = tokens[before];
  if (t === undefined || is(t, ";") || is(t, "{") || is(t, "}")) return true;
  return t.line < (tokens[start] as Token).line && (t.kind === "name" || t.kind === "number" || t.kind === "string" || is(t, ")") || is(t, "]"));
}

/** True when the expression ending before `end` ends its statement (`;`, `}`, the end, or a new line). */
function isStatementEnd(tokens: Token[], end: number): boolean {
  const t = tokens[end];
  return t === undefined || is(t, ";") || is(t, "}") || t.line > (tokens[end - 1] as Token).line;
}

/** `key = getCredential(…)` / `const key = …` / `this.key = …`: the assigned target, as its tokens' text. */
function assignedTo(tokens: Token[], before: number): string | undefined {
  if (!is(tokens[before], "=")) return undefined;
  let j = before - 1;
  // `const key: Promise<string> = …`: the name comes before the type.
  if (tokens[j]?.kind !== "name") {
    let k = j;
    while (k > 0 && !is(tokens[k], ":") && !is(tokens[k], ";") && !is(tokens[k], "{") && before - k < 20) k--;
    if (!is(tokens[k], ":")) return undefined;
    j = k - 1;
  }
  if (tokens[j]?.kind !== "name") return undefined;
  const parts = [(tokens[j] as Token).value];
  while (is(tokens[j - 1], ".") && tokens[j - 2]?.kind === "name") {
    parts.unshift((tokens[j - 2] as Token).value);
    j -= 2;
  }
  return parts.join(".");
}

/**
 * Where each variable holding a call is last used in a way that awaits, chains, returns or combines it:
 * a call's holder is handled when such a use comes after the call. Each holder's uses are judged once
 * (scanned again for each call, `x = getCredential(a); x;` repeated was quadratic: 400 KB held the checks
 * their whole 30 s; red team round 18).
 */
class HolderUses {
  private readonly byName = new Map<string, number[]>();
  private readonly lastHandled = new Map<string, number>();

  constructor(private readonly tokens: Token[]) {
    tokens.forEach((token, i) => {
      if (token.kind !== "name") return;
      const at = this.byName.get(token.value);
      if (at) at.push(i);
      else this.byName.set(token.value, [i]);
    });
  }

  /** The last handled use of `target` (`key`, `this.key`), -1 when none is. */
  lastHandledUse(target: string): number {
    const known = this.lastHandled.get(target);
    if (known !== undefined) return known;
    const tokens = this.tokens;
    const parts = target.split(".");
    const usedAt = (i: number): boolean =>
      parts.every((part, k) => tokens[i + 2 * k]?.kind === "name" && tokens[i + 2 * k]?.value === part && (k === 0 || is(tokens[i + 2 * k - 1], ".")));
    let last = -1;
    for (const i of this.byName.get(parts[0] as string) ?? []) {
      // `other.key` is another variable's property, not `key`.
      if (!usedAt(i) || is(tokens[i - 1], ".") || is(tokens[i - 1], "?.")) continue;
      if (handled(tokens, i, i + parts.length * 2 - 1)) last = i;
    }
    this.lastHandled.set(target, last);
    return last;
  }
}
