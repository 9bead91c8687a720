import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestHost, okOutput, useTestHost } from "../helpers/tools.js";

/** The shipped core tool tools/text_stats.ts, loaded from the project's tools/ folder. */
describe("core tool text_stats", () => {
  let t: TestHost;
  beforeAll(() => {
    t = useTestHost({ realCoreTools: true });
  });
  afterAll(async () => t.close());

  const count = async (text: string) => JSON.parse(okOutput(await t.host.call("alice", "text_stats_count", { text }))) as Record<string, number>;
  const top = async (args: Record<string, unknown>) =>
    JSON.parse(okOutput(await t.host.call("alice", "text_stats_top_words", args))) as {
      total_words: number;
      distinct_words: number;
      top: Array<{ word: string; count: number; share: number }>;
    };

  it("is a core tool with two documented actions and a profile", async () => {
    const info = await t.host.describe("alice", "text_stats");
    expect(info).toMatchObject({ name: "text_stats", origin: "core", status: "ok", hasCliMain: false });
    expect(info.schemas.map((s) => s.action)).toEqual(["count", "top_words"]);
    for (const schema of info.schemas) {
      expect(schema.description.length).toBeGreaterThan(20);
      expect(schema.profile).toEqual({ expected_seconds: 1, timeout_seconds: 60 });
    }
  });

  it("counts characters, words, lines, sentences and paragraphs of English text", async () => {
    const text = "The cat sat. The dog ran!\nIs it over?\n\nYes, it is.\n";
    expect(await count(text)).toEqual({
      characters: 51,
      characters_excluding_spaces: 38,
      utf8_bytes: 51,
      words: 12,
      lines: 4,
      sentences: 4,
      paragraphs: 2,
      average_word_length: 2.75, // 33 letters in 12 words
    });
  });

  it("splits text without spaces into words, and counts an emoji as one character", async () => {
    const result = await count("今日は良い天気です。👍🏽");
    expect(result.words).toBe(5); // 今日 / は / 良い / 天気 / です
    expect(result.sentences).toBe(2);
    expect(result.characters).toBe(11); // 10 ideographs and punctuation + one emoji with a skin-tone modifier
    expect(result.utf8_bytes).toBe(Buffer.byteLength("今日は良い天気です。👍🏽"));
  });

  it("handles empty and whitespace-only text", async () => {
    expect(await count("")).toEqual({
      characters: 0,
      characters_excluding_spaces: 0,
      utf8_bytes: 0,
      words: 0,
      lines: 0,
      sentences: 0,
      paragraphs: 0,
      average_word_length: 0,
    });
    expect(await count(" \n\t")).toMatchObject({ words: 0, lines: 2, paragraphs: 0, sentences: 0 });
    expect((await count("one\r\ntwo\rthree")).lines).toBe(3);
  });

  it("ranks words by frequency, case-insensitively by default, ties in code-point order", async () => {
    const result = await top({ text: "b a B c a A, b!", limit: 2 });
    expect(result).toEqual({
      total_words: 7,
      distinct_words: 3,
      top: [
        { word: "a", count: 3, share: 0.429 },
        { word: "b", count: 3, share: 0.429 },
      ],
    });
    const sensitive = await top({ text: "Word word WORD word", case_sensitive: true });
    expect(sensitive.top[0]).toEqual({ word: "word", count: 2, share: 0.5 });
    expect(sensitive.distinct_words).toBe(3);
  });

  it("leaves out excluded and short words", async () => {
    const result = await top({ text: "the cat and the hat and a bat", exclude: ["The", "and"], min_length: 2 });
    expect(result.top.map((w) => w.word)).toEqual(["bat", "cat", "hat"]);
    expect(result.total_words).toBe(3);
  });

  it("refuses bad arguments before running, with the schema's limits", async () => {
    const result = await t.host.call("alice", "text_stats_top_words", { text: 5, limit: 0, colour: "red" });
    expect(result).toMatchObject({ status: "error", error_type: "InvalidArguments" });
    expect(result.status === "error" && result.message).toBe(
      'invalid arguments for text_stats_top_words: unknown parameter "colour"; "text" must be string; "limit" must be >= 1',
    );
  });

  it("counts a long text without spaces or line breaks exactly (it is segmented in pieces)", async () => {
    const sentence = "今日は良い天気です。";
    const text = sentence.repeat(20_000); // 200,000 characters in one line
    expect(await count(text)).toMatchObject({ characters: 200_000, words: 100_000, sentences: 20_000, lines: 1, paragraphs: 1 });
  });

  it("copes with a large text inside its timeout", async () => {
    const text = "lorem ipsum dolor sit amet, ".repeat(35_000); // 980,000 characters, one long line
    const result = await top({ text, limit: 3 });
    expect(result.total_words).toBe(175_000);
    expect(result.top.map((w) => w.count)).toEqual([35_000, 35_000, 35_000]);
  });
});
