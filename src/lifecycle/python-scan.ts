/**
 * A small Python tokenizer for validate's checks on `.py` tools (python-checks.ts), as lexer.ts is for
 * TypeScript: it knows exactly enough never to mistake a comment or a string for code — every string
 * form ('…', "…", '''…''', """…""", the r/b/u/f/t prefixes and their pairs, and f-string replacement
 * fields, which since Python 3.12 may hold strings in the same quotes) — plus the layout Python's
 * grammar rests on: bracket depth, backslash continuations and indentation, from which it groups the
 * tokens into statements and blocks. Nothing about grammar beyond that.
 *
 * It never throws and never recurses over the input (a nesting of any depth is a stack in an array, not
 * on the call stack), and every loop moves forward: its work grows linearly with the text.
 */
export type PyTokenKind = "name" | "string" | "number" | "op";

export interface PyToken {
  kind: PyTokenKind;
  /** Names, numbers and operators: the text. Strings: the literal text (f-strings: only their literal parts). */
  value: string;
  /** 1-based line and column (UTF-16 code units, as editors count) of the token's first character. */
  line: number;
  column: number;
  /** Bracket depth the token is at; an opening or closing bracket has the depth outside it. */
  depth: number;
  /** f- and t-strings: their value leaves out the replacement fields. */
  dynamic?: boolean;
  /** Opening brackets: the index of the matching closing one, when there is one. */
  close?: number;
}

export interface PyStatement {
  /** Its tokens are tokens[start..end). */
  start: number;
  end: number;
  /** Indentation of the line it starts (a tab counts to the next multiple of 8, as Python counts it). */
  indent: number;
  /** The compound statement (`if …:`, `def …:`) whose block holds it, as a statement index; -1 at module level. */
  parent: number;
  /** The innermost `def` holding it, as a statement index; -1 when it is in none. */
  inDef: number;
  /** Compound statements: the keyword (`def` for `async def`) and the index of the first statement after the block. */
  header?: { keyword: string; blockEnd: number };
}

export interface PyScan {
  tokens: PyToken[];
  statements: PyStatement[];
  /** What makes Python refuse the file before it runs: unterminated strings, unbalanced brackets. */
  problems: Array<{ line: number; column: number; message: string }>;
}

const STRING_PREFIXES = new Set(["r", "u", "b", "f", "t", "br", "rb", "fr", "rf", "tr", "rt"]);
const IDENTIFIER = /[\p{ID_Start}_]\p{ID_Continue}*/uy;
const NUMBER = /\.?\d(?:[eE][+-]|[\w.])*/y;
/** Longest first: `**=` must not be read as `**` then `=` (keyword arguments are told from `==` by it). */
const OPERATORS = "**= //= >>= <<= ... -> := ** // == != <= >= << >> += -= *= /= %= &= |= ^= @=".split(" ");
/** Where an identifier or a number may start; the regular expressions run only there. */
const WORD_START = /[A-Za-z_\u0080-\uffff]/;
const DIGIT = /[0-9]/;
/** Python stops at its first syntax error; after a few, what follows is mostly their echo. */
const MAX_PROBLEMS = 5;
const CLOSING: Record<string, string> = { "(": ")", "[": "]", "{": "}" };
const COMPOUND = new Set(["if", "elif", "else", "for", "while", "try", "except", "finally", "with", "def", "class"]);

export function scanPython(text: string): PyScan {
  const tokens: PyToken[] = [];
  const problems: PyScan["problems"] = [];
  const lines: Array<{ start: number; end: number; indent: number }> = [];
  const opened: number[] = [];
  const at = positions(text);
  let lineStart = 0; // first token of the logical line being read
  let lineIndent = 0;
  let indent = 0; // of the physical line being read, when it starts a logical line
  let atLineStart = true;
  const push = (kind: PyTokenKind, value: string, offset: number, dynamic = false): void => {
    if (tokens.length === lineStart) lineIndent = indent;
    const { line, column } = at(offset);
    const token: PyToken = { kind, value, line, column, depth: opened.length };
    if (dynamic) token.dynamic = true;
    tokens.push(token);
  };
  const problem = (offset: number, message: string): void => {
    if (problems.length < MAX_PROBLEMS) problems.push({ ...at(offset), message: `${message}: Python refuses the file` });
  };
  const endLine = (): void => {
    if (tokens.length > lineStart) lines.push({ start: lineStart, end: tokens.length, indent: lineIndent });
    lineStart = tokens.length;
  };
  const string = (start: number, quoteAt: number, prefix: string): number => {
    const read = scanString(text, quoteAt, prefix);
    push("string", read.value, start, read.dynamic);
    if (read.unterminated !== undefined) {
      problem(start, read.unterminated === "line" ? "this string is not closed on its line" : "the file ends inside this string");
    }
    return read.end;
  };

  let i = 0;
  let word: string | undefined;
  while (i < text.length) {
    const c = text[i] as string;
    if (atLineStart) {
      // Indentation counts only where a logical line starts: not inside brackets, not after a `\`.
      let width = 0;
      for (; i < text.length; i++) {
        const w = text[i];
        if (w === " ") width++;
        else if (w === "\t") width += 8 - (width % 8);
        else if (w === "\f") width = 0;
        else break;
      }
      indent = width;
      atLineStart = false;
      continue;
    }
    if (c === "\n") {
      i++;
      if (opened.length === 0) {
        endLine();
        atLineStart = true;
      }
    } else if (c === " " || c === "\t" || c === "\f" || c === "\r") {
      i++;
    } else if (c === "#") {
      const newline = text.indexOf("\n", i);
      i = newline === -1 ? text.length : newline;
    } else if (c === "\\" && (text[i + 1] === "\n" || (text[i + 1] === "\r" && text[i + 2] === "\n"))) {
      i += text[i + 1] === "\n" ? 2 : 3;
    } else if (c === "'" || c === '"') {
      i = string(i, i, "");
    } else if (WORD_START.test(c) && (word = matchAt(IDENTIFIER, text, i)) !== undefined) {
      const next = text[i + word.length];
      if ((next === "'" || next === '"') && STRING_PREFIXES.has(word.toLowerCase())) {
        i = string(i, i + word.length, word.toLowerCase());
      } else {
        push("name", word, i);
        i += word.length;
      }
    } else if ((DIGIT.test(c) || (c === "." && DIGIT.test(text[i + 1] ?? ""))) && (word = matchAt(NUMBER, text, i)) !== undefined) {
      push("number", word, i);
      i += word.length;
    } else if (c === "(" || c === "[" || c === "{") {
      push("op", c, i);
      opened.push(tokens.length - 1);
      i++;
    } else if (c === ")" || c === "]" || c === "}") {
      const open = opened.pop();
      if (open === undefined) problem(i, `unmatched "${c}"`);
      else {
        const opener = tokens[open] as PyToken;
        opener.close = tokens.length;
        if (CLOSING[opener.value] !== c) problem(i, `"${c}" does not close the "${opener.value}" opened on line ${opener.line}`);
      }
      push("op", c, i);
      i++;
    } else {
      const op = OPERATORS.find((candidate) => text.startsWith(candidate, i)) ?? c;
      push("op", op, i);
      i += op.length;
    }
  }
  endLine();
  const unclosed = opened[0];
  if (unclosed !== undefined) {
    const opener = tokens[unclosed] as PyToken;
    problems.push({ line: opener.line, column: opener.column, message: `"${opener.value}" is never closed: Python refuses the file` });
  }
  return { tokens, statements: buildStatements(tokens, lines), problems };
}

type Frame = { kind: "string"; quote: string; triple: boolean; raw: boolean; format: boolean } | { kind: "field"; depth: number; spec: boolean };

/**
 * Reads the string literal whose opening quote is at `quoteAt` (`prefix`: its lower-cased prefix).
 * Replacement fields of f- and t-strings are code: brackets, nested strings (in any quotes) and, after
 * a `:` outside brackets, a format spec in which quotes are plain text and `{…}` nests another field.
 */
function scanString(text: string, quoteAt: number, prefix: string): { end: number; value: string; dynamic: boolean; unterminated?: "line" | "file" } {
  const open = (at: number, letters: string): { frame: Frame; length: number } => {
    const quote = text[at] as string;
    const triple = text.startsWith(quote.repeat(3), at);
    const format = letters.includes("f") || letters.includes("t");
    return { frame: { kind: "string", quote, triple, raw: letters.includes("r"), format }, length: triple ? 3 : 1 };
  };
  const first = open(quoteAt, prefix);
  const stack: Frame[] = [first.frame];
  let i = quoteAt + first.length;
  let value = "";
  let dynamic = false;
  while (i < text.length) {
    const frame = stack[stack.length - 1] as Frame;
    const c = text[i] as string;
    if (frame.kind === "string") {
      const outer = stack.length === 1;
      if (c === "\\" && !(frame.format && (text[i + 1] === "{" || text[i + 1] === "}"))) {
        // Even in a raw string a backslash keeps the next character (a quote) from ending it.
        const next = text[i + 1] ?? "";
        if (outer) value += frame.raw ? c + next : unescape(next);
        i += next === "\r" && text[i + 2] === "\n" ? 3 : 2;
      } else if (c === frame.quote && (!frame.triple || text.startsWith(c.repeat(3), i))) {
        i += frame.triple ? 3 : 1;
        stack.pop();
        if (stack.length === 0) return { end: i, value, dynamic };
      } else if (c === "\n" && !frame.triple) {
        return { end: i, value, dynamic, unterminated: "line" };
      } else if (frame.format && (c === "{" || c === "}") && text[i + 1] === c) {
        if (outer) value += c;
        i += 2;
      } else if (frame.format && c === "{") {
        stack.push({ kind: "field", depth: 0, spec: false });
        if (outer) dynamic = true;
        i++;
      } else {
        if (outer) value += c;
        i++;
      }
      continue;
    }
    if (frame.spec) {
      if (c === "{") stack.push({ kind: "field", depth: 0, spec: false });
      else if (c === "}") stack.pop();
      i++;
      continue;
    }
    const word = matchAt(IDENTIFIER, text, i);
    if (
      c === "'" ||
      c === '"' ||
      (word !== undefined && STRING_PREFIXES.has(word.toLowerCase()) && (text[i + word.length] === "'" || text[i + word.length] === '"'))
    ) {
      const letters = c === "'" || c === '"' ? "" : (word as string).toLowerCase();
      const nested = open(i + letters.length, letters);
      stack.push(nested.frame);
      i += letters.length + nested.length;
    } else if (word !== undefined) {
      i += word.length;
    } else if (c === "#") {
      const newline = text.indexOf("\n", i);
      i = newline === -1 ? text.length : newline;
    } else {
      if (c === "(" || c === "[" || c === "{") frame.depth++;
      else if (c === ")" || c === "]") frame.depth = Math.max(0, frame.depth - 1);
      else if (c === "}" && frame.depth === 0) stack.pop();
      else if (c === "}") frame.depth--;
      else if (c === ":" && frame.depth === 0) frame.spec = true;
      i++;
    }
  }
  return { end: text.length, value, dynamic, unterminated: "file" };
}

const ESCAPES: Record<string, string> = { "\\": "\\", "'": "'", '"': '"', n: "\n", t: "\t", r: "\r", "\n": "", "\r": "" };

function unescape(next: string): string {
  return ESCAPES[next] ?? `\\${next}`;
}

function matchAt(pattern: RegExp, text: string, index: number): string | undefined {
  pattern.lastIndex = index;
  return pattern.exec(text)?.[0];
}

/** Line and column of offsets asked for in increasing order (tokens are made in text order). */
function positions(text: string): (offset: number) => { line: number; column: number } {
  let line = 1;
  let lineOffset = 0;
  let next = text.indexOf("\n");
  return (offset) => {
    while (next !== -1 && next < offset) {
      line++;
      lineOffset = next + 1;
      next = text.indexOf("\n", lineOffset);
    }
    return { line, column: offset - lineOffset + 1 };
  };
}

/**
 * Statements and their blocks, from the logical lines: a line starting with a compound keyword is a
 * header up to its `:` (what follows on the line is its one-line body), and a block lasts while lines
 * are indented deeper than its header. Simple statements on one line split at `;`.
 */
function buildStatements(tokens: PyToken[], lines: Array<{ start: number; end: number; indent: number }>): PyStatement[] {
  const statements: PyStatement[] = [];
  const open: number[] = [];
  const innermostDef = (parent: number): number => {
    const holder = statements[parent];
    if (holder === undefined) return -1;
    return holder.header?.keyword === "def" ? parent : holder.inDef;
  };
  const simple = (start: number, end: number, indent: number, parent: number): void => {
    let from = start;
    for (let j = start; j <= end; j++) {
      const token = tokens[j];
      if (j < end && !(token?.kind === "op" && token.value === ";" && token.depth === tokens[start]?.depth)) continue;
      if (j > from) statements.push({ start: from, end: j, indent, parent, inDef: innermostDef(parent) });
      from = j + 1;
    }
  };
  for (const line of lines) {
    while (open.length > 0 && (statements[open[open.length - 1] as number] as PyStatement).indent >= line.indent) {
      ((statements[open.pop() as number] as PyStatement).header as { blockEnd: number }).blockEnd = statements.length;
    }
    const parent = open[open.length - 1] ?? -1;
    const header = headerOf(tokens, line.start, line.end);
    if (header === undefined) {
      simple(line.start, line.end, line.indent, parent);
      continue;
    }
    const index = statements.length;
    statements.push({
      start: line.start,
      end: header.colon + 1,
      indent: line.indent,
      parent,
      inDef: innermostDef(parent),
      header: { keyword: header.keyword, blockEnd: -1 },
    });
    simple(header.colon + 1, line.end, line.indent, index);
    open.push(index);
  }
  for (const index of open) ((statements[index] as PyStatement).header as { blockEnd: number }).blockEnd = statements.length;
  return statements;
}

/** The keyword and `:` of a compound statement's header on the logical line tokens[start..end), or undefined. */
function headerOf(tokens: PyToken[], start: number, end: number): { keyword: string; colon: number } | undefined {
  const first = tokens[start] as PyToken;
  const second = tokens[start + 1];
  if (first.kind !== "name") return undefined;
  let keyword = first.value;
  if (keyword === "async" && second?.kind === "name" && ["def", "for", "with"].includes(second.value)) keyword = second.value;
  else if (keyword === "match" || keyword === "case") {
    // Soft keywords: `match = 1`, `match.group(…)`, `case: int = 2` are simple statements.
    if (second === undefined || (second.kind === "op" && (second.value.endsWith("=") || [".", ":", ",", ")", "]", "}", ";"].includes(second.value))))
      return undefined;
  } else if (!COMPOUND.has(keyword)) return undefined;
  for (let j = start + 1; j < end; j++) {
    const token = tokens[j] as PyToken;
    if (token.kind === "op" && token.value === ":" && token.depth === first.depth) return { keyword, colon: j };
    if (token.close !== undefined && token.close < end) j = token.close;
  }
  return undefined;
}
