import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";

/**
 * No source file is longer than `MAX_LINES`: a file that grows past it holds more than one thing, and is
 * split by what its parts do (a class's helpers that form one concern, a table of constants, a describe
 * block of tests), not trimmed. Checked over the project's own code: TypeScript and JavaScript under
 * the folders below; test/fixtures/ holds the tools under test (inputs, often hostile on purpose), not
 * project code.
 */
const MAX_LINES = 400;
const FOLDERS = ["src", "sandbox", "tools", "benchmarks", "scripts", "bin", "test"];
const EXCLUDED = ["test/fixtures/"];
const SOURCE = /\.(?:ts|mts|mjs|cjs)$/;

function sourceFiles(): string[] {
  return FOLDERS.flatMap((folder) =>
    readdirSync(join(PROJECT_ROOT, folder), { recursive: true, encoding: "utf8" })
      .map((file) => `${folder}/${file}`)
      .filter((file) => SOURCE.test(file) && !file.split("/").includes("node_modules") && !EXCLUDED.some((prefix) => file.startsWith(prefix))),
  );
}

/** Lines as an editor counts them: a final newline ends the last line, it does not start another. */
function lineCount(text: string): number {
  if (text === "") return 0;
  const newlines = text.split("\n").length - 1;
  return text.endsWith("\n") ? newlines : newlines + 1;
}

describe("file size", () => {
  it(`no source file is over ${MAX_LINES} lines`, () => {
    const files = sourceFiles();
    expect(files).toContain("src/host.ts"); // the walk finds the sources
    expect(files).toContain("bin/animaworks-tool.cjs");
    expect(files.some((file) => file.startsWith("test/fixtures/"))).toBe(false);
    const over = files
      .map((file) => ({ file, lines: lineCount(readFileSync(join(PROJECT_ROOT, file), "utf8")) }))
      .filter(({ lines }) => lines > MAX_LINES)
      .map(({ file, lines }) => `${file}: ${lines} lines`);
    expect(over, `split these by what their parts do (at most ${MAX_LINES} lines each)`).toEqual([]);
  });

  it("counts lines as an editor does", () => {
    expect([lineCount(""), lineCount("a"), lineCount("a\n"), lineCount("a\nb"), lineCount("a\nb\n"), lineCount("\n\n")]).toEqual([0, 1, 1, 2, 2, 2]);
  });
});
