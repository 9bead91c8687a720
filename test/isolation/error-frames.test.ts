import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SourceMap, type SourceMapPayload } from "node:module";
import { ToolBundler } from "../../src/bundling/bundler.js";
import { originalPositions } from "../../src/bundling/mappings.js";
import { MAX_NAMED_FRAMES } from "../../src/bundling/source-maps.js";
import { withToolLines } from "../../src/bundling/tool-frames.js";
import { createHost } from "../../src/host.js";
import { bundlePositions } from "../../src/isolation/isolate/tool-frames.js";
import { MAX_TOOL_FRAMES } from "../../src/isolation/wire/messages.js";
import { IsolateRunner } from "../../src/isolation/isolate/isolate-runner.js";
import { decodeCallOutcome } from "../../src/isolation/wire/decode.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { buildProbeTool } from "../helpers/probe-tool.js";

/** The parts of a runtime error's lines: stack → bundle positions (sandbox), the wire, the map (host). */

const FILE = "tool:personal/weather.ts";

describe("bundle positions read from a stack (the sandbox side)", () => {
  it("keeps the frames of the bundle's own file, innermost first, in V8's shapes", () => {
    const stack = [
      "TypeError: Cannot read properties of undefined (reading 'value')",
      `    at parse (${FILE}:33:17)`,
      `    at ${FILE}:40:9`,
      "    at Array.map (<anonymous>)",
      `    at async Object.weather_get (${FILE}:45:3)`,
      "    at settle (animaworks:prelude.js:300:10)",
      `    at eval (eval at run (${FILE}:50:1), <anonymous>:1:1)`,
      "    at f (tool:shared/weather.ts:12:3)",
      "    at g (/etc/passwd:1:1)",
    ].join("\n");
    expect(bundlePositions(stack, FILE)).toEqual([
      { line: 33, column: 17 },
      { line: 40, column: 9 },
      { line: 45, column: 3 },
    ]);
  });

  it("is bounded: a few frames, a few lines looked at, numbers in range", () => {
    expect(bundlePositions(`    at f (${FILE}:1:1)\n`.repeat(1_000), FILE)).toHaveLength(MAX_TOOL_FRAMES);
    // A forged stack of junk lines first: the frames after them are never reached.
    expect(bundlePositions(`${"junk\n".repeat(1_000)}    at f (${FILE}:1:1)`, FILE)).toEqual([]);
    expect(bundlePositions(`    at f (${FILE}:0:1)\n    at f (${FILE}:99999999:1)\n    at f (${FILE}:1:-1)`, FILE)).toEqual([]);
    expect(bundlePositions(undefined, FILE)).toEqual([]);
    expect(bundlePositions(`    at f (:1:1)`, "")).toEqual([]);
  });
});

describe("bundle positions of a failing call (IsolateRunner)", () => {
  it("come with the failure in isolates that ran the prelude and in those made from the startup snapshot", async () => {
    const probe = await buildProbeTool(`export function get_tool_schemas() {
  return [{ name: "probe_run", description: "d", input_schema: { type: "object", properties: {} } }];
}
export function probe_run() {
  return (undefined as unknown as { value: string }).value;
}
`);
    const runner = new IsolateRunner({});
    try {
      const frames = [];
      // Each Anima gets an isolate of its own; from the third on they are made from the snapshot.
      for (let i = 0; i < 5; i++) {
        const outcome = await runner.call(probe.request(`anima${i}`));
        if (outcome.ok) throw new Error("expected a failure");
        expect(outcome.error.message).toBe("TypeError: Cannot read properties of undefined (reading 'value')");
        frames.push(outcome.toolFrames);
      }
      expect(runner.usesStartupSnapshot).toBe(true);
      expect(frames[0]).toHaveLength(1);
      for (const each of frames) expect(each).toEqual(frames[0]);
    } finally {
      await runner.close();
      probe.cleanup();
    }
  });
});

describe("tool frames on the wire (what the host accepts from a sandbox process)", () => {
  const error = { type: "ExecutionError", fault: "tool", message: "m" };

  it("keeps up to MAX_TOOL_FRAMES positions, copied field by field", () => {
    const outcome = decodeCallOutcome({ ok: false, error, toolFrames: [{ line: 3, column: 4, path: "/etc/passwd" }] }, 1);
    expect(outcome).toEqual({ ok: false, error, durationMs: 1, toolFrames: [{ line: 3, column: 4 }] });
    expect(decodeCallOutcome({ ok: false, error }, 1)).toEqual({ ok: false, error, durationMs: 1 });
  });

  it.each([
    ["too many", Array.from({ length: MAX_TOOL_FRAMES + 1 }, () => ({ line: 1, column: 1 }))],
    ["a fraction", [{ line: 1.5, column: 1 }]],
    ["a zero", [{ line: 0, column: 1 }]],
    ["a string", [{ line: "1", column: 1 }]],
    ["not a list", { line: 1, column: 1 }],
    ["text", "at /etc/passwd:1:1"],
  ])("refuses %s as a protocol violation", (_label, toolFrames) => {
    expect(decodeCallOutcome({ ok: false, error, toolFrames }, 1)).toBeUndefined();
  });
});

describe("source maps of bundles (the host side)", () => {
  let folder: string;
  let cacheDir: string;
  beforeAll(() => {
    folder = mkdtempSync(join(tmpdir(), "aw-frames-tools-"));
    cacheDir = mkdtempSync(join(tmpdir(), "aw-frames-cache-"));
    writeFileSync(
      join(folder, "weather.ts"),
      `import { logger } from "@animaworks/tool";\nimport { parse } from "./parse";\nexport function weather_get(a: any) {\n  logger.info("x");\n  return parse(a);\n}\n`,
    );
    writeFileSync(join(folder, "parse.ts"), `export function parse(d: any): string {\n  return d.value;\n}\n`);
  });
  afterAll(() => {
    rmSync(folder, { recursive: true, force: true });
    rmSync(cacheDir, { recursive: true, force: true });
  });

  async function build(bundler = new ToolBundler(cacheDir)) {
    const built = await bundler.build({ path: join(folder, "weather.ts"), folder, displayName: "personal/weather.ts" });
    if (!built.ok) throw new Error(built.error.message);
    return { bundler, bundle: built.bundle, lines: built.bundle.code.split("\n") };
  }

  it("keeps no host path in the bundle or its map", async () => {
    const { bundle } = await build();
    expect(bundle.code).not.toContain(folder);
    const map = readdirSync(cacheDir).find((name) => name === `${bundle.hash}.map.json`);
    expect(map).toBeDefined();
    const text = readFileSync(join(cacheDir, map!), "utf8");
    expect(text).not.toContain(folder);
    expect(JSON.parse(text).sources).toEqual(expect.arrayContaining(["weather.ts", "parse.ts", ""]));
  });

  it("names only positions on mapped lines of the tool's own files", async () => {
    const { bundler, bundle, lines } = await build();
    const lineOf = (text: string) => lines.findIndex((line) => line.includes(text)) + 1;
    const inParse = { line: lineOf("return d.value"), column: lines[lineOf("return d.value") - 1]!.indexOf("value") + 1 };
    expect(await bundler.sourceMaps.locate(bundle.hash, [inParse])).toEqual(["parse.ts:2:12"]);
    // The @animaworks/tool module, esbuild's runtime helpers, the registration line, past the end: nothing.
    const elsewhere = [lineOf("globalThis.__animaworksTool"), lineOf("__defProp = Object.defineProperty"), lineOf("__awRegister("), lines.length + 10];
    expect(
      await bundler.sourceMaps.locate(
        bundle.hash,
        elsewhere.map((line) => ({ line, column: 5 })),
      ),
    ).toEqual([]);
    // The same line twice in a row (recursion) is named once; at most MAX_NAMED_FRAMES in all.
    const many = Array.from({ length: 8 }, (_, index) => ({ line: index % 2 === 0 ? inParse.line : lineOf("return parse(a)"), column: 5 }));
    expect(await bundler.sourceMaps.locate(bundle.hash, many)).toHaveLength(MAX_NAMED_FRAMES);
    expect(await bundler.sourceMaps.locate(bundle.hash, [inParse, inParse])).toEqual(["parse.ts:2:12"]);
  });

  it("reads the map from the cache in a new process's bundler; a damaged or missing map names nothing", async () => {
    const { bundle, lines } = await build();
    const line = lines.findIndex((text) => text.includes("return d.value")) + 1;
    const fresh = new ToolBundler(cacheDir);
    expect(await fresh.sourceMaps.locate(bundle.hash, [{ line, column: 12 }])).toEqual(["parse.ts:2:10"]);
    writeFileSync(join(cacheDir, `${bundle.hash}.map.json`), "{ not json");
    expect(await new ToolBundler(cacheDir).sourceMaps.locate(bundle.hash, [{ line, column: 12 }])).toEqual([]);
    expect(await new ToolBundler(cacheDir).sourceMaps.locate("../../etc/passwd", [{ line, column: 12 }])).toEqual([]);
  });

  it("looks positions up as a parsed map does (node:module SourceMap, same line), for every position of a bundle", async () => {
    const ownCache = mkdtempSync(join(tmpdir(), "aw-frames-cache-"));
    const { bundle, lines } = await build(new ToolBundler(ownCache));
    const text = readFileSync(join(ownCache, `${bundle.hash}.map.json`), "utf8");
    rmSync(ownCache, { recursive: true, force: true });
    const map = JSON.parse(text) as SourceMapPayload;
    const reference = new SourceMap(map);
    const wanted = lines.flatMap((line, index) => Array.from({ length: line.length + 2 }, (_, column) => ({ line: index, column })));
    const expected = wanted.map(({ line, column }) => {
      const entry = reference.findEntry(line, column) as { generatedLine?: number; originalSource?: string; originalLine?: number; originalColumn?: number };
      if (entry.generatedLine !== line || entry.originalSource === undefined) return undefined;
      return { source: map.sources.indexOf(entry.originalSource), line: entry.originalLine, column: entry.originalColumn };
    });
    // In batches, as a failure asks (at most a few positions at a time).
    const found = [];
    for (let at = 0; at < wanted.length; at += 8) found.push(...originalPositions(map.mappings, wanted.slice(at, at + 8)));
    expect(found).toEqual(expected);
    expect(expected.filter(Boolean).length).toBeGreaterThan(10);
    // Malformed mappings answer nothing rather than something wrong.
    for (const mappings of ["AAAA,!", "AAAAAAA", "gggggggggA", "AA"]) expect(originalPositions(mappings, [{ line: 0, column: 0 }])).toEqual([undefined]);
  });

  it("words the lines as `(in A, called from B, C)`", () => {
    expect(withToolLines("boom", ["a.ts:1:2"])).toBe("boom (in a.ts:1:2)");
    expect(withToolLines("boom", ["a.ts:1:2", "b.ts:3:4", "c.ts:5:6"])).toBe("boom (in a.ts:1:2, called from b.ts:3:4, c.ts:5:6)");
  });
});

const TOOL = `export function get_tool_schemas() {
  return [{ name: "weather_get", description: "d", input_schema: { type: "object", properties: {} } }];
}
export function weather_get() {
  const reading: any = undefined;
  return reading.value;
}
`;
const EXPECTED = "TypeError: Cannot read properties of undefined (reading 'value') (in weather.ts:6:18)";

describe("through sandbox processes", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it("the host maps the positions a sandbox process sends", async () => {
    data = makeDataDir({ "animas/alice/tools/weather.ts": TOOL });
    const host = createHost({ dataDir: data.dir, isolation: "process", sandboxProcesses: 1, spareSandboxProcesses: 0, onLog: () => {} });
    try {
      const result = await host.call("alice", "weather_get", {});
      expect(result).toMatchObject({ status: "error", error_type: "ExecutionError", fault: "tool", message: EXPECTED });
    } finally {
      await host.close();
    }
  });

  it("an MCP client gets them in the tool's error result", async () => {
    data = makeDataDir({ "animas/alice/tools/weather.ts": TOOL });
    const client = new Client({ name: "test", version: "1.0.0" });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", data.dir, "mcp", "--anima", "alice"],
      stderr: "ignore",
    });
    await client.connect(transport);
    try {
      const result = await client.callTool({ name: "weather_get", arguments: {} });
      expect(result.isError).toBe(true);
      const envelope = JSON.parse((result.content as Array<{ text: string }>)[0]?.text as string) as { message: string };
      expect(envelope.message).toBe(EXPECTED);
    } finally {
      await client.close();
    }
  }, 30_000);
});
