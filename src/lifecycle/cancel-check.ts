import type { Token } from "./lexer.js";
import { is } from "./literal.js";

/**
 * `isCancelled()` is a plain boolean (it was once a Promise, and `if (isCancelled())` then stopped every
 * job at its first step). A tool still written for the Promise, `isCancelled().then(…)`, now fails with
 * "isCancelled(...).then is not a function" when the job runs; the validator points at it instead. Read
 * from tokens, so a mention in a string or comment is never a use. (`await isCancelled()` is fine.)
 */
export interface PromiseUseOfIsCancelled {
  line: number;
  column: number;
  /** then, catch or finally. */
  method: string;
}

const PROMISE_METHODS = new Set(["then", "catch", "finally"]);

export function findPromiseUsesOfIsCancelled(tokens: Token[]): PromiseUseOfIsCancelled[] {
  const found: PromiseUseOfIsCancelled[] = [];
  for (let i = 0; i + 4 < tokens.length; i++) {
    const token = tokens[i] as Token;
    if (token.kind !== "name" || token.value !== "isCancelled" || is(tokens[i - 1], "function")) continue;
    if (!is(tokens[i + 1], "(") || !is(tokens[i + 2], ")") || !(is(tokens[i + 3], ".") || is(tokens[i + 3], "?."))) continue;
    const method = tokens[i + 4] as Token;
    if (method.kind === "name" && PROMISE_METHODS.has(method.value)) found.push({ line: token.line, column: token.column, method: method.value });
  }
  return found;
}
