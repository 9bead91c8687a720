import type { Token } from "./lexer.js";

/**
 * Hard-coded secret heuristics for the validator ("Credentials: obtain via getCredential(). Never
 * hardcode", tool-creator.md). Three signals, each an error because a secret in a tool file is copied
 * into every Anima's view by share: well-known key formats anywhere in the text (comments included: a
 * key in a comment is still leaked), a credential-named variable or property assigned a literal, and
 * long high-entropy literals. Findings never repeat the secret: only its first four characters.
 */
export interface SecretHit {
  line: number;
  message: string;
}

/** A well-known credential format: where its keys are in a text (offset and the key's text). */
interface KnownFormat {
  label: string;
  find: (text: string) => Generator<{ index: number; text: string }>;
}

/** A format whose keys a global regular expression finds, in linear time (nothing follows its last run). */
function byPattern(label: string, pattern: RegExp): KnownFormat {
  return {
    label,
    find: function* (text) {
      for (const match of text.matchAll(pattern)) yield { index: match.index, text: match[0] };
    },
  };
}

/**
 * A JSON Web Token: `eyJ…` (10 or more), a dot, `eyJ…` (10 or more), a dot, 10 or more. Not a regular
 * expression: `\beyJ[\w-]{10,}\.` backtracks over the whole run of key characters at every `eyJ` in it
 * (`-eyJ-eyJ-eyJ…`: 7 s for 128 KB, minutes for a 1 MiB tool, on the shared daemon's thread). Here each
 * run of key characters and dots is split once, so the work is linear in the text.
 */
const KEY_AND_DOT_RUNS = /[A-Za-z0-9_.-]+/g;
const TOKEN_START = /(?<![A-Za-z0-9_])eyJ/;

function* jsonWebTokens(text: string): Generator<{ index: number; text: string }> {
  for (const run of text.matchAll(KEY_AND_DOT_RUNS)) {
    const parts = run[0].split(".");
    let offset = run.index;
    for (let i = 0; i + 2 < parts.length; offset += (parts[i] as string).length + 1, i++) {
      const [head, payload, signature] = [parts[i] as string, parts[i + 1] as string, parts[i + 2] as string];
      if (!payload.startsWith("eyJ") || payload.length < 13 || signature.length < 10) continue;
      // The earliest `eyJ` that starts a word (after `_`, a letter or a digit it would not) leaves the most after it.
      const start = TOKEN_START.exec(head);
      if (!start || head.length - start.index < 13) continue;
      const boundary = start.index > 0 || offset === 0 || !/[A-Za-z0-9_]/.test(text[offset - 1] as string);
      if (!boundary) continue;
      const index = offset + start.index;
      yield { index, text: text.slice(index, offset + head.length + 1 + payload.length + 1 + signature.length) };
    }
  }
}

/** Well-known credential formats. Lengths keep prose such as "sk-..." or "ghp_xxx" from matching. */
const KNOWN_FORMATS: KnownFormat[] = [
  byPattern("an OpenAI/Anthropic-style API key (sk-…)", /\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}/g),
  byPattern("a GitHub token (ghp_/gho_/ghu_/ghs_/ghr_…)", /\bgh[pousr]_[A-Za-z0-9]{30,}/g),
  byPattern("a GitHub fine-grained token (github_pat_…)", /\bgithub_pat_[A-Za-z0-9_]{30,}/g),
  byPattern("a Slack token (xox…-)", /\bxox[abposr]-[A-Za-z0-9-]{10,}/g),
  byPattern("an AWS access key id (AKIA…/ASIA…)", /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g),
  byPattern("a Google API key (AIza…)", /\bAIza[0-9A-Za-z_-]{35}/g),
  byPattern("a Stripe secret key (sk_live_/rk_live_…)", /\b[rs]k_live_[0-9A-Za-z]{16,}/g),
  byPattern("a private key block", /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/g),
  { label: "a JSON Web Token", find: jsonWebTokens },
];

/** Matches of one known format that are reported each (the rest are counted in one more finding). */
const MAX_HITS_PER_FORMAT = 100;

/** Names that hold a credential, compared lower-case without `_`/`-`, as a whole name or its ending. */
const SECRET_NAME_ENDINGS = [
  "apikey",
  "apisecret",
  "apitoken",
  "secret",
  "secretkey",
  "token",
  "password",
  "passwd",
  "privatekey",
  "accesskey",
  "accesskeyid",
  "clientsecret",
  "authorization",
  "bearer",
];
/** Names ending like a secret name that never hold one (`max_tokens`, `tokenizer` do not end so anyway). */
const NOT_SECRET_NAMES = new Set(["nexttoken", "pagetoken", "nextpagetoken", "continuationtoken", "csrftoken", "tokentype", "keyname"]);
const PLACEHOLDER =
  /^(?:x+|\*+|\.+|your[\w-]*|<[^>]*>|\{[^}]*\}|changeme|change_me|placeholder|example[\w-]*|dummy[\w-]*|test[\w-]*|todo|none|null|undefined|redacted)$/i;

export function findSecrets(source: string, tokens: Token[]): SecretHit[] {
  const hits: SecretHit[] = [];
  const seen = new Set<string>();
  /** True the first time a finding (its line and message) comes: each is one finding. */
  const fresh = (line: number, message: string): boolean => {
    const key = `${line}\0${message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  };
  const add = (line: number, message: string): void => {
    if (fresh(line, message)) hits.push({ line, message });
  };

  const lineAt = lineFinder(source);
  for (const { label, find } of KNOWN_FORMATS) {
    let listed = 0;
    let more = 0;
    let lastLine = 1;
    for (const key of find(source)) {
      const line = lineAt(key.index);
      const message = `${label} is written in the file ("${mask(key.text)}"); read it with getCredential() instead`;
      if (!fresh(line, message)) continue;
      // Past the first ones, counted, not listed (one finding says how many more): the report stays bounded.
      if (listed === MAX_HITS_PER_FORMAT) more++;
      else {
        hits.push({ line, message });
        listed++;
        lastLine = line;
      }
    }
    if (more > 0) add(lastLine, `… and ${more} more of ${label} in the file (only the first ${MAX_HITS_PER_FORMAT} are listed)`);
  }

  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as Token;
    const literal = token.kind === "string" || (token.kind === "template" && !token.dynamic) ? token.value : undefined;
    // A literal in a well-known format was reported above, once.
    if (literal === undefined || KNOWN_FORMATS.some(({ find }) => !find(literal).next().done)) continue;
    const name = assignedName(tokens, i);
    if (name !== undefined && isSecretName(name) && looksLikeValue(literal)) {
      add(token.line, `"${name}" is set to a literal ("${mask(literal)}"); read credentials with getCredential() instead of hard-coding them`);
      continue;
    }
    if (isHighEntropy(literal)) {
      add(token.line, `a long random-looking string literal ("${mask(literal)}") looks like a hard-coded secret; read it with getCredential()`);
    }
  }
  return hits.sort((a, b) => a.line - b.line);
}

/** `name = "…"`, `name: "…"`, `"name": "…"`, `obj.name = "…"`: the name a literal at `index` is given to. */
function assignedName(tokens: Token[], index: number): string | undefined {
  const operator = tokens[index - 1];
  const target = tokens[index - 2];
  if (operator?.kind !== "punct" || !["=", ":", "??=", "||="].includes(operator.value)) return undefined;
  if (target?.kind === "name" || target?.kind === "string") return target.value;
  return undefined;
}

function isSecretName(name: string): boolean {
  const normal = name.toLowerCase().replaceAll(/[_-]/g, "");
  if (NOT_SECRET_NAMES.has(normal)) return false;
  return SECRET_NAME_ENDINGS.some((ending) => normal === ending || normal.endsWith(ending));
}

/**
 * A value that could be a credential: at least 8 characters, no spaces (sentences, "Bearer " prefixes),
 * not an environment-variable name (`envVar: "MYAPI_KEY"`), not a placeholder, not a URL.
 */
function looksLikeValue(value: string): boolean {
  if (value.length < 8 || /\s/.test(value)) return false;
  if (/^[A-Z][A-Z0-9_]*$/.test(value)) return false;
  if (PLACEHOLDER.test(value) || /^https?:\/\//i.test(value)) return false;
  return true;
}

/**
 * Long (32+), no spaces, only key-like characters, letters and digits mixed, and close to random:
 * Shannon entropy of at least 4.2 bits per character, or 3.4 for hex (whose alphabet caps it at 4).
 * Identifiers, words, URLs and paths are excluded by the character rules.
 */
export function isHighEntropy(value: string): boolean {
  if (value.length < 32 || value.length > 4_096) return false;
  if (!/^[A-Za-z0-9+/=_-]+$/.test(value) || !/[0-9]/.test(value) || !/[A-Za-z]/.test(value)) return false;
  const hex = /^[0-9a-fA-F]+$/.test(value);
  return entropyBitsPerChar(value) >= (hex ? 3.4 : 4.2);
}

export function entropyBitsPerChar(value: string): number {
  const counts = new Map<string, number>();
  for (const ch of value) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let bits = 0;
  for (const count of counts.values()) {
    const p = count / value.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

/** First four characters then `****`, as AnimaWorks masks credentials (docs/animaworks-reference.md §6). */
export function mask(value: string): string {
  return value.length <= 4 ? "****" : `${value.slice(0, 4)}****`;
}

/**
 * The 1-based line of an offset in `source`, by binary search over line starts found once. (Counting
 * newlines from the start for each match made a hostile file of many lines and many key-shaped
 * strings cost matches × lines: one refresh held a shared daemon's event loop for minutes.)
 */
function lineFinder(source: string): (index: number) => number {
  let starts: number[] | undefined;
  return (index) => {
    if (starts === undefined) {
      starts = [0];
      for (let i = source.indexOf("\n"); i !== -1; i = source.indexOf("\n", i + 1)) starts.push(i + 1);
    }
    let low = 0;
    let high = starts.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if ((starts[middle] as number) <= index) low = middle;
      else high = middle - 1;
    }
    return low + 1;
  };
}
