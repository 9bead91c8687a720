/**
 * A small JavaScript/TypeScript tokenizer for the validator's static checks. Only src/bundling/bundler.ts may
 * load esbuild, and the TypeScript compiler is a dev dependency, so the checks read source text with this
 * instead. It knows exactly enough to never mistake a comment, string, template or regular expression
 * for code (which regexes over raw text get wrong), and nothing about grammar beyond that.
 *
 * Ambiguity it resolves by convention: `/` after `)`, `]`, `}`, a name or a literal is division,
 * anywhere else a regular expression. Wrong guesses only affect those few tokens.
 */
export type TokenKind = "name" | "string" | "template" | "number" | "regex" | "punct";

export interface Token {
  kind: TokenKind;
  /** Names and punctuators: the text. Strings and templates: the decoded value (template: its literal parts). */
  value: string;
  /** 1-based line of the token's first character. */
  line: number;
  /** 1-based column of the token's first character (in UTF-16 code units, as editors count). */
  column: number;
  /** Templates: true when the template has `${…}` substitutions (its value is then only the literal parts). */
  dynamic?: boolean;
}

export interface LexResult {
  tokens: Token[];
  /** Set when the text ends inside a comment, string, template or regex: the source cannot be valid. */
  unterminated?: { what: string; line: number };
}

/** Keywords after which `/` starts a regular expression rather than a division. */
const REGEX_AFTER_WORDS = new Set(["return", "typeof", "case", "do", "else", "in", "instanceof", "new", "delete", "void", "throw", "yield", "await", "of"]);
const PUNCTUATORS = [
  ">>>=",
  "...",
  "===",
  "!==",
  "**=",
  "<<=",
  ">>=",
  ">>>",
  "&&=",
  "||=",
  "??=",
  "=>",
  "==",
  "!=",
  "<=",
  ">=",
  "&&",
  "||",
  "??",
  "?.",
  "++",
  "--",
  "+=",
  "-=",
  "*=",
  "/=",
  "%=",
  "&=",
  "|=",
  "^=",
  "**",
  "<<",
  ">>",
];

export function lex(source: string): LexResult {
  const tokens: Token[] = [];
  let pos = source.startsWith("#!") ? (source.indexOf("\n") === -1 ? source.length : source.indexOf("\n")) : 0;
  let line = 1;
  /** Offset of the first character of the current line, for columns. */
  let lineStart = 0;
  /** One entry per open template substitution: the brace depth at which its `}` resumes the template. */
  const templateDepths: number[] = [];
  let braceDepth = 0;

  const fail = (what: string, startLine: number): LexResult => ({ tokens, unterminated: { what, line: startLine } });
  const countLines = (from: number, to: number): void => {
    for (let i = from; i < to; i++) {
      if (source.charCodeAt(i) !== 10) continue;
      line++;
      lineStart = i + 1;
    }
  };

  /** Reads template text from `pos` (just after "`" or "}") to the next "${" or closing "`". */
  const readTemplatePart = (): { text: string; ends: "end" | "substitution" } | undefined => {
    let text = "";
    while (pos < source.length) {
      const ch = source[pos] as string;
      if (ch === "`") {
        pos++;
        return { text, ends: "end" };
      }
      if (ch === "$" && source[pos + 1] === "{") {
        pos += 2;
        return { text, ends: "substitution" };
      }
      if (ch === "\\") {
        const escaped = readEscape(source, pos);
        countLines(pos, escaped.next);
        text += escaped.text;
        pos = escaped.next;
        continue;
      }
      if (ch === "\n") {
        line++;
        lineStart = pos + 1;
      }
      text += ch;
      pos++;
    }
    return undefined;
  };

  while (pos < source.length) {
    const ch = source[pos] as string;
    const next = source[pos + 1];
    if (ch === "\n") {
      line++;
      pos++;
      lineStart = pos;
      continue;
    }
    if (/\s/.test(ch)) {
      pos++;
      continue;
    }
    if (ch === "/" && next === "/") {
      const end = source.indexOf("\n", pos);
      pos = end === -1 ? source.length : end;
      continue;
    }
    if (ch === "/" && next === "*") {
      const end = source.indexOf("*/", pos + 2);
      if (end === -1) return fail("comment", line);
      countLines(pos, end);
      pos = end + 2;
      continue;
    }
    const startLine = line;
    const column = pos - lineStart + 1;
    if (ch === '"' || ch === "'") {
      let text = "";
      pos++;
      for (;;) {
        if (pos >= source.length || source[pos] === "\n") return fail("string", startLine);
        const c = source[pos] as string;
        if (c === ch) break;
        if (c === "\\") {
          const escaped = readEscape(source, pos);
          countLines(pos, escaped.next);
          text += escaped.text;
          pos = escaped.next;
        } else {
          text += c;
          pos++;
        }
      }
      pos++;
      tokens.push({ kind: "string", value: text, line: startLine, column });
      continue;
    }
    if (ch === "`") {
      pos++;
      const part = readTemplatePart();
      if (!part) return fail("template", startLine);
      if (part.ends === "substitution") templateDepths.push(braceDepth);
      tokens.push({ kind: "template", value: part.text, line: startLine, column, dynamic: part.ends === "substitution" });
      continue;
    }
    if (ch === "}" && templateDepths.length > 0 && templateDepths[templateDepths.length - 1] === braceDepth) {
      // The end of a `${…}` substitution: the template continues; its text joins the opening token.
      templateDepths.pop();
      pos++;
      const part = readTemplatePart();
      if (!part) return fail("template", startLine);
      if (part.ends === "substitution") templateDepths.push(braceDepth);
      tokens.push({ kind: "template", value: part.text, line: startLine, column, dynamic: true });
      continue;
    }
    if (/[A-Za-z_$#\u0080-\uffff]/.test(ch)) {
      let end = pos + 1;
      while (end < source.length && /[\w$\u0080-\uffff]/.test(source[end] as string)) end++;
      tokens.push({ kind: "name", value: source.slice(pos, end), line: startLine, column });
      pos = end;
      continue;
    }
    if (/[0-9]/.test(ch) || (ch === "." && next !== undefined && /[0-9]/.test(next))) {
      let end = pos + 1;
      while (end < source.length && /[\w.]/.test(source[end] as string)) {
        // An exponent sign belongs to the number: 1e-5.
        if (/[eE]/.test(source[end] as string) && /[+-]/.test(source[end + 1] ?? "") && !/^0[xX]/.test(source.slice(pos, end))) end++;
        end++;
      }
      tokens.push({ kind: "number", value: source.slice(pos, end), line: startLine, column });
      pos = end;
      continue;
    }
    if (ch === "/" && regexAllowed(tokens[tokens.length - 1])) {
      let end = pos + 1;
      let inClass = false;
      for (;;) {
        const c = source[end];
        if (c === undefined || c === "\n") return fail("regular expression", startLine);
        if (c === "\\") end++;
        else if (c === "[") inClass = true;
        else if (c === "]") inClass = false;
        else if (c === "/" && !inClass) break;
        end++;
      }
      end++;
      while (end < source.length && /[a-z]/i.test(source[end] as string)) end++;
      tokens.push({ kind: "regex", value: source.slice(pos, end), line: startLine, column });
      pos = end;
      continue;
    }
    const punct = PUNCTUATORS.find((p) => source.startsWith(p, pos)) ?? ch;
    if (punct === "{") braceDepth++;
    if (punct === "}") braceDepth--;
    tokens.push({ kind: "punct", value: punct, line: startLine, column });
    pos += punct.length;
  }
  if (templateDepths.length > 0) return fail("template", line);
  return { tokens };
}

function regexAllowed(previous: Token | undefined): boolean {
  if (!previous) return true;
  if (previous.kind === "name") return REGEX_AFTER_WORDS.has(previous.value);
  if (previous.kind === "punct") return previous.value !== ")" && previous.value !== "]" && previous.value !== "}";
  return false;
}

const SIMPLE_ESCAPES: Record<string, string> = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f", v: "\v", "0": "\0" };

/** Decodes one escape sequence starting at the backslash; a line continuation yields nothing. */
function readEscape(source: string, at: number): { text: string; next: number } {
  const c = source[at + 1];
  if (c === undefined) return { text: "", next: at + 1 };
  if (c === "\r") return { text: "", next: source[at + 2] === "\n" ? at + 3 : at + 2 };
  if (c === "\n") return { text: "", next: at + 2 };
  if (c in SIMPLE_ESCAPES && !(c === "0" && /[0-9]/.test(source[at + 2] ?? ""))) return { text: SIMPLE_ESCAPES[c] as string, next: at + 2 };
  if (c === "x" && /^[0-9a-f]{2}$/i.test(source.slice(at + 2, at + 4))) {
    return { text: String.fromCharCode(Number.parseInt(source.slice(at + 2, at + 4), 16)), next: at + 4 };
  }
  if (c === "u") {
    const braced = /^\{([0-9a-f]{1,6})\}/i.exec(source.slice(at + 2, at + 12));
    if (braced) {
      const code = Number.parseInt(braced[1] as string, 16);
      return { text: code <= 0x10ffff ? String.fromCodePoint(code) : "", next: at + 2 + braced[0].length };
    }
    if (/^[0-9a-f]{4}$/i.test(source.slice(at + 2, at + 6))) {
      return { text: String.fromCharCode(Number.parseInt(source.slice(at + 2, at + 6), 16)), next: at + 6 };
    }
  }
  return { text: c, next: at + 2 };
}
