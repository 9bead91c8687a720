/**
 * text_stats — counts and word frequencies of a text (core tool).
 *
 *   animaworks-tool text_stats count "Some text."
 *   animaworks-tool text_stats top_words --text "a b a" --limit 5
 *
 * It is also the reference example for tool authors: one file, schemas named `{tool}_{action}`, a
 * `dispatch` that routes by schema name, an `EXECUTION_PROFILE`, errors thrown as `ToolError`, and no
 * capability beyond plain computation. Words are found with `Intl.Segmenter`, so text without spaces
 * (Japanese, Chinese, Thai) is split into words too.
 */
import { ToolError, type ExecutionProfile, type ToolArgs, type ToolSchema } from "@animaworks/tool";

/** Large enough for a long document, small enough that one call stays well inside its timeout. */
const MAX_TEXT_CHARS = 1_000_000;

const textParameter = {
  type: "string",
  description: "The text to analyse",
  maxLength: MAX_TEXT_CHARS,
} as const;

export function get_tool_schemas(): ToolSchema[] {
  return [
    {
      name: "text_stats_count",
      description: "Count the characters, words, lines, sentences and paragraphs of a text.",
      input_schema: {
        type: "object",
        properties: { text: textParameter },
        required: ["text"],
        additionalProperties: false,
      },
    },
    {
      name: "text_stats_top_words",
      description: "List the most frequent words of a text with their counts, most frequent first.",
      input_schema: {
        type: "object",
        properties: {
          text: textParameter,
          limit: { type: "integer", description: "How many words to list", minimum: 1, maximum: 100, default: 10 },
          min_length: { type: "integer", description: "Ignore words shorter than this many characters", minimum: 1, maximum: 50, default: 1 },
          case_sensitive: { type: "boolean", description: "Count 'Word' and 'word' separately", default: false },
          exclude: {
            type: "array",
            description: "Words to leave out, e.g. stop words such as 'the' or 'a'",
            items: { type: "string", maxLength: 100 },
            maxItems: 1000,
          },
        },
        required: ["text"],
        additionalProperties: false,
      },
    },
  ];
}

/**
 * Keyed by action. Typical texts take milliseconds, but a megabyte of text without spaces (Japanese,
 * Chinese) takes several seconds to split into words; on a busy host that could pass the default 30 s,
 * so both actions allow 60.
 */
export const EXECUTION_PROFILE: ExecutionProfile = {
  count: { expected_seconds: 1, timeout_seconds: 60 },
  top_words: { expected_seconds: 1, timeout_seconds: 60 },
};

interface TopWordsOptions {
  limit: number;
  minLength: number;
  caseSensitive: boolean;
  exclude: string[];
}

export function dispatch(name: string, args: ToolArgs): object {
  // The host adds anima_dir to every call; this tool has no use for it.
  const { anima_dir: _animaDir, ...params } = args;
  // The host has validated the arguments against the schema, so `text` is a string here.
  const text = params["text"] as string;
  switch (name) {
    case "text_stats_count":
      return countText(text);
    case "text_stats_top_words":
      return topWords(text, {
        limit: (params["limit"] as number | undefined) ?? 10,
        minLength: (params["min_length"] as number | undefined) ?? 1,
        caseSensitive: (params["case_sensitive"] as boolean | undefined) ?? false,
        exclude: (params["exclude"] as string[] | undefined) ?? [],
      });
    default:
      throw new ToolError(`text_stats has no action for schema "${name}"`);
  }
}

interface TextCounts {
  /** User-perceived characters (an emoji with modifiers counts once). */
  characters: number;
  characters_excluding_spaces: number;
  utf8_bytes: number;
  words: number;
  /** A final line break does not start another line; an empty text has no lines. */
  lines: number;
  sentences: number;
  /** Blocks of non-blank lines separated by at least one blank line. */
  paragraphs: number;
  /** In characters, rounded to two decimals; 0 for a text without words. */
  average_word_length: number;
}

function countText(text: string): TextCounts {
  const wordList = words(text);
  const wordChars = wordList.reduce((sum, word) => sum + graphemeCount(word), 0);
  const characters = graphemeCount(text);
  // Whitespace characters are graphemes of their own, except CR LF, which is one grapheme of two.
  const spaces = (text.match(/\s/gu)?.length ?? 0) - (text.match(/\r\n/gu)?.length ?? 0);
  let sentenceCount = 0;
  for (const piece of pieces(text)) {
    for (const { segment } of sentenceSegmenter.segment(piece)) if (/\S/u.test(segment)) sentenceCount++;
  }
  return {
    characters,
    characters_excluding_spaces: characters - spaces,
    utf8_bytes: utf8Length(text),
    words: wordList.length,
    lines: text === "" ? 0 : text.replace(/(\r\n|\r|\n)$/u, "").split(/\r\n|\r|\n/u).length,
    sentences: sentenceCount,
    paragraphs: text.split(/(?:\r\n|\r|\n)[^\S\r\n]*(?:\r\n|\r|\n)/u).filter((block) => /\S/u.test(block)).length,
    average_word_length: wordList.length === 0 ? 0 : Math.round((wordChars / wordList.length) * 100) / 100,
  };
}

interface TopWords {
  total_words: number;
  distinct_words: number;
  /** Most frequent first; ties in code-point order of the word, so the result is stable. */
  top: Array<{ word: string; count: number; share: number }>;
}

function topWords(text: string, options: TopWordsOptions): TopWords {
  const normalise = (word: string) => (options.caseSensitive ? word.normalize("NFC") : word.normalize("NFC").toLowerCase());
  const excluded = new Set(options.exclude.map(normalise));
  const counts = new Map<string, number>();
  let total = 0;
  for (const raw of words(text)) {
    const word = normalise(raw);
    if (excluded.has(word) || graphemeCount(word) < options.minLength) continue;
    total++;
    counts.set(word, (counts.get(word) ?? 0) + 1);
  }
  const ranked = [...counts].sort(([a, countA], [b, countB]) => countB - countA || (a < b ? -1 : a > b ? 1 : 0));
  return {
    total_words: total,
    distinct_words: counts.size,
    top: ranked.slice(0, options.limit).map(([word, count]) => ({ word, count, share: Math.round((count / total) * 1000) / 1000 })),
  };
}

// Created once per isolate and reused: module state lives as long as the warm isolate, and the sandbox
// budgets Intl objects (every `segment()` call holds an ICU iterator and counts against that budget).
const wordSegmenter = new Intl.Segmenter(undefined, { granularity: "word" });
const sentenceSegmenter = new Intl.Segmenter(undefined, { granularity: "sentence" });

/** Word-like segments: letters or digits, not punctuation or spaces. */
function words(text: string): string[] {
  const out: string[] = [];
  for (const piece of pieces(text)) {
    for (const { segment, isWordLike } of wordSegmenter.segment(piece)) if (isWordLike) out.push(segment);
  }
  return out;
}

/**
 * One user-perceived character (extended grapheme cluster), closely enough for counting: CR LF, a flag
 * (two regional indicators), an emoji with its modifiers and joined parts, or any other character with
 * the combining marks, joiners and tags that follow it (an Indic conjunct joined by a virama counts as
 * two). A regular expression rather than Intl.Segmenter: it runs in linear time and holds no ICU memory.
 */
const GRAPHEME =
  /\r\n|\p{RI}\p{RI}|\p{Extended_Pictographic}[\p{M}\p{EMod}\u{E0020}-\u{E007F}]*(?:\u200D\p{Extended_Pictographic}[\p{M}\p{EMod}\u{E0020}-\u{E007F}]*)*\u200D?|[^][\p{M}\p{EMod}\u200D\u{E0020}-\u{E007F}]*/gu;

function graphemeCount(text: string): number {
  // Below U+0300 (Latin, no combining marks) every code point is a character, except CR LF.
  if (!/[^\u0000-\u02ff]|\r\n/u.test(text)) return text.length;
  let count = 0;
  for (const _ of text.matchAll(GRAPHEME)) count++;
  return count;
}

/**
 * Intl.Segmenter slowed down with the square of the length of the string it walks in the V8 of Node 20
 * (100 kB of text took seconds; on Node 26, 100 kB of words take ≈ 15 ms), so long texts are segmented
 * piece by piece, which bounds the cost on any V8; pieces are large because
 * each one costs an Intl object of the sandbox's budget. A piece ends after a line break if there is one
 * in range (a boundary of words and sentences alike), else after the end of a sentence, else after a
 * space; only a run of PIECE_CHARS without any of these is cut where it stands, which may split a word.
 */
const PIECE_CHARS = 20_000;
const SENTENCE_ENDS = [". ", "! ", "? ", "。", "！", "？"];

function* pieces(text: string): Generator<string> {
  let start = 0;
  while (text.length - start > PIECE_CHARS) {
    const window = text.slice(start, start + PIECE_CHARS);
    let cut = window.lastIndexOf("\n") + 1;
    if (cut === 0) cut = afterLastSentenceEnd(window);
    if (cut === 0) cut = window.search(/\s\S*$/u) + 1;
    if (cut === 0) cut = isHighSurrogate(window.charCodeAt(PIECE_CHARS - 1)) ? PIECE_CHARS - 1 : PIECE_CHARS;
    yield window.slice(0, cut);
    start += cut;
  }
  yield text.slice(start);
}

/** The position just after the last sentence end in `window`, or 0 when there is none. */
function afterLastSentenceEnd(window: string): number {
  let cut = 0;
  for (const end of SENTENCE_ENDS) {
    const at = window.lastIndexOf(end);
    if (at >= 0) cut = Math.max(cut, at + end.length);
  }
  return cut;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/** The sandbox has no TextEncoder; count UTF-8 bytes from code points (a lone surrogate encodes as 3). */
function utf8Length(text: string): number {
  let bytes = 0;
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    bytes += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
  }
  return bytes;
}
