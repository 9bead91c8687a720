import { describe, expect, it } from "vitest";
import { lex } from "../../src/lifecycle/lexer.js";
import { scanSource } from "../../src/lifecycle/source-scan.js";

const specifiers = (source: string): Array<string | undefined> => scanSource(source).imports.map((use) => use.specifier);

describe("lexer", () => {
  it("never reads code inside comments, strings, templates or regular expressions", () => {
    const source = [
      '// import a from "node:fs"',
      '/* require("child_process") */',
      "const s = 'import(\"x\")';",
      'const t = `require("y") ${1 + 1} import("z")`;',
      'const r = /require\\("w"\\)/g;',
      "const d = 4 / 2 / 1;",
    ].join("\n");
    const { tokens, unterminated } = lex(source);
    expect(unterminated).toBeUndefined();
    expect(tokens.filter((t) => t.kind === "name" && (t.value === "require" || t.value === "import"))).toEqual([]);
    expect(tokens.find((t) => t.kind === "regex")?.value).toBe('/require\\("w"\\)/g');
    expect(tokens.filter((t) => t.value === "/")).toHaveLength(2); // the divisions stay punctuators
  });

  it("decodes escapes, tracks lines through templates and reports unterminated text", () => {
    const { tokens } = lex('const a = "\\x41\\u0042\\u{43}\\n";\nconst b = `x\n${a}\ny`;\nconst c = 1;');
    expect(tokens.find((t) => t.kind === "string")?.value).toBe("ABC\n");
    expect(tokens.find((t) => t.value === "c")?.line).toBe(5);
    expect(lex('const x = "open').unterminated).toEqual({ what: "string", line: 1 });
    expect(lex("a\n/* never closed").unterminated).toEqual({ what: "comment", line: 2 });
    expect(lex("const t = `a ${ {b: 1} } c").unterminated?.what).toBe("template");
  });
});

describe("imports", () => {
  it("finds static, re-export, dynamic and require imports, and skips type-only and property uses", () => {
    const source = [
      'import a from "./a";',
      'import * as b from "node:fs";',
      'import { c, type D } from "@animaworks/tool";',
      'import "./side-effect";',
      'import type { E } from "types-only";',
      'export { f } from "./f";',
      'export * from "lodash";',
      "export { g };",
      'const h = require("./h");',
      'const i = await import("./i");',
      "const j = await import(name);",
      'const k = obj.require("not-an-import");',
      "const m = import.meta.url;",
    ].join("\n");
    expect(scanSource(source).imports).toEqual([
      { specifier: "./a", kind: "import", line: 1 },
      { specifier: "node:fs", kind: "import", line: 2 },
      { specifier: "@animaworks/tool", kind: "import", line: 3 },
      { specifier: "./side-effect", kind: "import", line: 4 },
      { specifier: "./f", kind: "export-from", line: 6 },
      { specifier: "lodash", kind: "export-from", line: 7 },
      { specifier: "./h", kind: "require", line: 9 },
      { specifier: "./i", kind: "dynamic-import", line: 10 },
      { specifier: undefined, kind: "dynamic-import", line: 11 },
    ]);
  });

  it("does not borrow a later statement's specifier for an export list without from", () => {
    expect(specifiers('export { a }\nexport function b() {}\nimport c from "./c";')).toEqual(["./c"]);
  });
});

describe("exports", () => {
  it("reads ES exports, CommonJS assignments and module.exports object keys", () => {
    const es = scanSource("export function a() {}\nexport async function b() {}\nexport const c = 1;\nfunction d() {}\nexport { d as e, d };");
    expect([...es.exports].sort()).toEqual(["a", "b", "c", "d", "e"]);
    const cjs = scanSource("exports.a = 1;\nmodule.exports.b = () => 2;\nmodule.exports = { c, d: 1, e() { return { f: 1 }; }, async g() {}, 'h': 2 };");
    expect([...cjs.exports].sort()).toEqual(["a", "b", "c", "d", "e", "g", "h"]);
    expect(cjs.exportsUnknown).toBe(false);
    expect(scanSource("module.exports = build();").exportsUnknown).toBe(true);
  });
});

describe("schema literal", () => {
  it("extracts the returned array from the usual ways of writing get_tool_schemas", () => {
    const expected = [{ name: "t_run", description: "Run", input_schema: { type: "object", properties: { n: { type: "integer", default: -1 } } } }];
    const literal =
      '[{ name: "t_run", "description": \'Run\', input_schema: { type: "object" as const, properties: { n: { type: "integer", default: -1, }, }, }, }]';
    const forms = [
      `export function get_tool_schemas(): Array<{ name: string }> { return ${literal}; }`,
      `export const getToolSchemas = (): ToolSchema[] => ${literal};`,
      `exports.get_tool_schemas = () => (${literal});`,
      `module.exports = { get_tool_schemas() { const unused = () => { return []; }; return ${literal}; } };`,
      `const SCHEMAS = ${literal} as const;\nexport async function get_tool_schemas() { return SCHEMAS; }`,
    ];
    for (const form of forms) {
      const schemas = scanSource(form).schemas;
      expect(schemas, form).toMatchObject({ kind: "literal", value: expected });
    }
  });

  it("follows names of other const literals inside the list", () => {
    const source =
      'const MAX = 5;\nconst param = { type: "integer", maximum: MAX } as const;\nexport function get_tool_schemas() { return [{ name: "t_x", input_schema: { type: "object", properties: { n: param } } }]; }';
    expect(scanSource(source).schemas).toMatchObject({ kind: "literal", value: [{ input_schema: { properties: { n: { type: "integer", maximum: 5 } } } }] });
    // `let` may be reassigned before the call, and a name without a const is unknown: both dynamic.
    expect(scanSource('let p = {};\nexport function get_tool_schemas() { return [{ name: "t_x", input_schema: p }]; }').schemas?.kind).toBe("dynamic");
    expect(scanSource('export function get_tool_schemas() { return [{ name: "t_x", input_schema: p }]; }').schemas?.kind).toBe("dynamic");
  });

  it("reports a computed list as dynamic and a missing function as absent", () => {
    expect(scanSource('export function get_tool_schemas() { return ["a", "b"].map((a) => ({ name: `t_${a}` })); }').schemas?.kind).toBe("dynamic");
    expect(scanSource('const NAMES = ["a"];\nexport function get_tool_schemas() { return NAMES.map(f); }').schemas?.kind).toBe("dynamic");
    expect(scanSource("export function get_tool_schemas() { return ACTIONS.map(f); }").schemas?.kind).toBe("dynamic");
    expect(scanSource('export function get_tool_schemas() { return [{ name: prefix + "_x" }]; }').schemas?.kind).toBe("dynamic");
    expect(scanSource("export function dispatch() { return get_tool_schemas(); }").schemas).toBeUndefined();
  });
});

describe("fetch calls", () => {
  it("tells calls with a timeoutMs option from calls without one", () => {
    const scan = scanSource(
      [
        'await fetch("u");',
        'await fetch("u", { timeoutMs: 5_000 });',
        'await fetch("u", { method: "GET" });',
        'const s = "fetch(x)";',
        "function fetch(url) { return url; }",
      ].join("\n"),
    );
    expect(scan.fetchCalls).toEqual([
      { line: 1, hasTimeout: false },
      { line: 2, hasTimeout: true },
      { line: 3, hasTimeout: false },
    ]);
    // Options built elsewhere in a file that sets timeoutMs somewhere: cannot tell, so no verdict.
    expect(scanSource('const o = { timeoutMs: 1 };\nawait fetch("u", o);').fetchCalls).toEqual([{ line: 2, hasTimeout: undefined }]);
  });
});
