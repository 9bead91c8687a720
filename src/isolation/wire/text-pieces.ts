/**
 * A capability answer's text as the pieces it arrived in, so that a sandbox process's main thread never
 * handles a large text whole. Joining a 10 MiB text there took ≈ 37 ms, escaping it into the answers'
 * JSON 12–95 ms and copying that JSON into the isolate ≈ 57 ms, all in one block: another Anima's
 * request to the same process waited 170–325 ms behind each such answer. The bridge
 * (isolate-bridge.ts) hands the isolate a long text in groups of `TEXT_PIECE_CHARS` instead, one entry
 * each, and the prelude joins them (sandbox/capabilities.ts, on the isolate's own thread).
 */
export class TextPieces {
  constructor(readonly parts: readonly string[]) {}

  get length(): number {
    return this.parts.reduce((sum, part) => sum + part.length, 0);
  }

  /** The text in order, in groups of at most `chars` characters (see `textGroups`). */
  groups(chars: number): Generator<string> {
    return textGroups(this.parts, chars);
  }

  /** The whole text in one string. */
  join(): string {
    return this.parts.join("");
  }

  /** The whole text, where an answer goes out as JSON after all. */
  toJSON(): string {
    return this.join();
  }
}

/**
 * `parts` in order, in groups of at most `chars` characters: whole parts joined, a longer part cut (never
 * inside a surrogate pair: each piece is a well-formed string if the text is). Takes `parts` as it goes.
 */
export function* textGroups(parts: Iterable<string>, chars: number): Generator<string> {
  let group: string[] = [];
  let groupChars = 0;
  for (const part of parts) {
    if (groupChars + part.length > chars && group.length > 0) {
      yield group.join("");
      group = [];
      groupChars = 0;
    }
    if (part.length <= chars) {
      if (part.length > 0) group.push(part);
      groupChars += part.length;
      continue;
    }
    yield* cut(part, chars);
  }
  if (group.length > 0) yield group.join("");
}

/** `text` in slices of at most `chars` characters, never between the two halves of a surrogate pair. */
function* cut(text: string, chars: number): Generator<string> {
  let at = 0;
  while (at < text.length) {
    let end = Math.min(at + chars, text.length);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && end - 1 > at && last >= 0xd800 && last <= 0xdbff) end--;
    yield text.slice(at, end);
    at = end;
  }
}

/** Characters a bridge entry carries at most: copying them into the isolate takes ≈ 1 ms. */
export const TEXT_PIECE_CHARS = 256 * 1024;
