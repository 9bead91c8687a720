/**
 * Looks positions up in a source map's `mappings` (Source Map v3: base64 VLQ segments, `,` between
 * segments, `;` between generated lines) by one scan of the text, without building the map in memory.
 * Why not a parsed map (node:module `SourceMap`, trace-mapping): they decode every segment into objects
 * or arrays, ≈ 20 bytes of heap per character of mappings (a 1 MB tool: a 0.8 MB map, 16 MB parsed, 80
 * to 150 ms), while a failing call needs a handful of positions once. This is ≈ 1 ms per 100 KB and
 * allocates nothing per segment.
 *
 * Semantics are those of a map's usual lookup (node:module `SourceMap.findEntry` on the same line): the
 * segment of the position's own generated line with the greatest column not after the position's; none
 * when that segment maps nothing (one field) or the line has none before it.
 */

/** A generated position, both from 0. */
export interface GeneratedPosition {
  line: number;
  column: number;
}

/** What a generated position maps to: index into `sources`, original line and column, all from 0. */
export interface OriginalPosition {
  source: number;
  line: number;
  column: number;
}

const DIGITS = (() => {
  const table = new Int8Array(128).fill(-1);
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (let index = 0; index < alphabet.length; index++) table[alphabet.charCodeAt(index)] = index;
  return table;
})();

const COMMA = 44;
const SEMICOLON = 59;

/**
 * The original position of each of `wanted` (in the same order; undefined where nothing is mapped), or
 * all undefined when `mappings` is malformed before the last wanted line.
 */
export function originalPositions(mappings: string, wanted: readonly GeneratedPosition[]): Array<OriginalPosition | undefined> {
  const found: Array<OriginalPosition | undefined> = wanted.map(() => undefined);
  /** Best generated column found so far for each wanted position (−1: none). */
  const bestColumn = wanted.map(() => -1);
  const lastLine = Math.max(-1, ...wanted.map((position) => position.line));
  const fields = [0, 0, 0, 0, 0];
  let line = 0;
  let column = 0;
  let source = 0;
  let originalLine = 0;
  let originalColumn = 0;
  let at = 0;
  while (at < mappings.length && line <= lastLine) {
    const code = mappings.charCodeAt(at);
    if (code === SEMICOLON) {
      line++;
      column = 0;
      at++;
      continue;
    }
    if (code === COMMA) {
      at++;
      continue;
    }
    // One segment: 1, 4 or 5 fields, each relative to the previous segment's (the column only within a line).
    let count = 0;
    while (at < mappings.length && mappings.charCodeAt(at) !== COMMA && mappings.charCodeAt(at) !== SEMICOLON) {
      if (count === fields.length) return wanted.map(() => undefined);
      let value = 0;
      let shift = 0;
      let digit: number;
      do {
        const char = mappings.charCodeAt(at++);
        digit = char < 128 ? (DIGITS[char] ?? -1) : -1;
        if (digit < 0 || shift > 30) return wanted.map(() => undefined);
        value += (digit & 31) * 2 ** shift;
        shift += 5;
      } while (digit & 32);
      fields[count++] = value % 2 === 1 ? -(value - 1) / 2 : value / 2;
    }
    if (count !== 1 && count !== 4 && count !== 5) return wanted.map(() => undefined);
    column += fields[0]!;
    if (count >= 4) {
      source += fields[1]!;
      originalLine += fields[2]!;
      originalColumn += fields[3]!;
    }
    for (let index = 0; index < wanted.length; index++) {
      const position = wanted[index]!;
      if (position.line !== line || column > position.column || column < bestColumn[index]!) continue;
      bestColumn[index] = column;
      found[index] = count >= 4 ? { source, line: originalLine, column: originalColumn } : undefined;
    }
  }
  return found;
}
