import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { validatePythonSource } from "../../src/lifecycle/python-checks.js";
import { scanPython } from "../../src/lifecycle/python-scan.js";
import { validateToolFile } from "../../src/lifecycle/validate.js";
import { fuzzParameters, propertyTimeoutMs } from "../property/settings.js";
import { brief, check, edit, GOOD, only } from "../helpers/python-checks.js";

const scratch = mkdtempSync(join(tmpdir(), "awt-python-source-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("Python tools: network timeouts", () => {
  it("httpx requests and clients without timeout=, urlopen without a timeout, are errors at the call", () => {
    const source = edit(GOOD, {
      16: [
        "    import httpx", // 16
        "    import urllib.request", // 17
        "    from urllib.request import urlopen", // 18
        "    a = httpx.get(", // 19
        '        "https://example.com/search",', // 20
        '        params={"timeout": 30},', // 21
        "    )", // 22
        '    b = httpx.post("https://example.com", json={}, timeout=30)', // 23
        "    with httpx.Client() as client:", // 24
        '        client.get("https://example.com")', // 25
        "    with httpx.Client(timeout=10) as client:", // 26
        '        client.get("https://example.com")', // 27
        '    c = urllib.request.urlopen("https://example.com")', // 28
        '    d = urlopen("https://example.com", None, 30)', // 29
        '    e = urllib.request.urlopen("https://example.com", timeout=10)', // 30
        '    f = httpx.request("GET", "https://example.com", **options)', // 31
        "    return [a, b, c, d, e, f]", // 32
      ].join("\n"),
    });
    const findings = check(source);
    expect(findings.map((f) => [f.level, f.check, f.line, f.column])).toEqual([
      ["error", "network-timeout", 19, 9],
      ["error", "network-timeout", 24, 10],
      ["error", "network-timeout", 28, 9],
    ]);
    expect(findings[0]?.message).toMatch(/^httpx\.get\(\) without timeout=: .*timeout=30/);
    expect(findings[1]?.message).toMatch(/^httpx\.Client\(\) without timeout=/);
    expect(findings[2]?.message).toMatch(/^urllib\.request\.urlopen\(\) without a timeout: .*timeout=30/);
  });

  it("follows the names imports give them", () => {
    const lines = [
      "    import httpx as hx",
      "    from httpx import post as send",
      "    from urllib import request",
      "    hx.get(u)",
      "    send(u, json={})",
      "    request.urlopen(u)",
    ];
    expect(brief(check(edit(GOOD, { 16: [...lines, "    return {}"].join("\n") })))).toEqual([
      "error network-timeout:19",
      "error network-timeout:20",
      "error network-timeout:21",
    ]);
  });
});

describe("Python tools: imports", () => {
  it("only the standard library, httpx and core.tools(._base): anything else is an error at its line", () => {
    const imports = [
      "import json, urllib.request",
      "from collections.abc import Mapping",
      "import requests",
      "from numpy import array",
      "from core import memory",
      "from .helpers import x",
    ];
    const findings = check(edit(GOOD, { 2: imports.join("\n") }));
    expect(findings.map((f) => [f.level, f.check, f.line, f.column])).toEqual([
      ["error", "imports", 4, 8],
      ["error", "imports", 5, 6],
      ["error", "imports", 6, 6],
      ["error", "imports", 7, 1],
    ]);
    expect(findings.map((f) => f.message)).toEqual([
      "`requests` is not available: Python tools here run with the standard library and httpx only; use httpx (with a timeout) or urllib.request",
      "`numpy` is not available: Python tools here run with the standard library and httpx only; use the standard library instead",
      "`core.memory` is not available: of AnimaWorks' core, Python tools here get core.tools._base (get_credential, ToolConfigError) and core.tools only",
      "relative import (from .helpers import …): a Python tool is loaded as a single file, not as part of a package, so it fails; keep the tool's code in this file",
    ]);
  });

  it("warns when httpx or core.tools._base is imported at module level instead of where it is used", () => {
    const findings = check(edit(GOOD, { 2: "import httpx\nfrom core.tools._base import get_credential, ToolConfigError" }));
    expect(brief(findings)).toEqual(["warning imports:2", "warning imports:3"]);
    expect(findings[1]?.message).toMatch(/^`core\.tools\._base` is imported at module level: .* move this import there$/);
    // For type checkers only: never run.
    expect(check(edit(GOOD, { 2: "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import httpx" }))).toEqual([]);
  });
});

describe("Python tools: secrets, EXECUTION_PROFILE, source", () => {
  it("a hard-coded credential is an error; env_var and key_name are not credentials", () => {
    const findings = check(edit(GOOD, { 2: 'API_TOKEN = "hunter2hunter2"' }));
    expect(brief(findings)).toEqual(["error secrets:2"]);
    expect(findings[0]?.message).toBe('"API_TOKEN" is set to a literal ("hunt****"); read credentials with get_credential() instead of hard-coding them');
    expect(check(edit(GOOD, { 2: 'KEY = dict(env_var="MYAPI_KEY", key_name="api_key")' }))).toEqual([]);
  });

  it("EXECUTION_PROFILE is optional, and a dict when present", () => {
    expect(check(edit(GOOD, { 2: 'EXECUTION_PROFILE = {"run": {"expected_seconds": 60, "background_eligible": True}}' }))).toEqual([]);
    const list = check(edit(GOOD, { 2: 'EXECUTION_PROFILE: list[str] = ["run"]' }));
    expect(list.map((f) => [f.level, f.check, f.line, f.column])).toEqual([["error", "profile", 2, 32]]);
    expect(list[0]?.message).toMatch(/^EXECUTION_PROFILE must be a dict of actions, .*; it is a list$/);
  });

  it("an unterminated string or an unclosed bracket is an error where it opens", () => {
    expect(brief(only(check(edit(GOOD, { 2: 'NOTE = "not closed' })), "source"))).toEqual(["error source:2"]);
    expect(brief(only(check(`${GOOD.join("\n")}NOTE = """never closed\n`), "source"))).toEqual(["error source:17"]);
    expect(brief(only(check(edit(GOOD, { 2: "VALUES = (1, 2" })), "source"))).toEqual(["error source:2"]);
  });
});

describe("Python tools: strings and comments are not code", () => {
  it("def dispatch(, import requests and httpx.get( in strings or comments count for nothing", () => {
    const source = edit(GOOD, {
      2: [
        '"""Not the docstring: def dispatch(name, args): import requests"""',
        "# import requests; httpx.get(url)",
        "NOTES = '''",
        "def dispatch(name, args):",
        "    import requests",
        "    httpx.get(url)",
        "'''",
        "HINT = f\"{len('import requests')} httpx.get(url) {'def dispatch('!r:>{10}} {\"httpx.get(u)\"}\"",
        "RAW = rb'\\' httpx.get(' + r\"import requests\"",
      ].join("\n"),
      14: "def run(name: str, args: dict) -> dict:",
    });
    expect(brief(check(source))).toEqual(["error handlers:15"]);
  });

  it("reads statements and blocks by indentation, brackets and continuations", () => {
    const scan = scanPython(
      ["def f(a,", "      b):  # comment", "    x = [1,", "2]; y = \\", "  3", "    if x: return y", "class C:", "\tdef g(self): pass", "z = 1"].join("\n"),
    );
    const text = (s: { start: number; end: number }): string =>
      scan.tokens
        .slice(s.start, s.end)
        .map((t) => t.value)
        .join(" ");
    expect(scan.statements.map((s) => [text(s), s.indent, s.parent, s.inDef, s.header?.keyword, s.header?.blockEnd])).toEqual([
      ["def f ( a , b ) :", 0, -1, -1, "def", 5],
      ["x = [ 1 , 2 ]", 4, 0, 0, undefined, undefined],
      ["y = 3", 4, 0, 0, undefined, undefined],
      ["if x :", 4, 0, 0, "if", 5],
      ["return y", 4, 3, 0, undefined, undefined],
      ["class C :", 0, -1, -1, "class", 8],
      ["def g ( self ) :", 8, 5, -1, "def", 8],
      ["pass", 8, 6, 6, undefined, undefined],
      ["z = 1", 0, -1, -1, undefined, undefined],
    ]);
    expect(scan.problems).toEqual([]);
  });
});

describe("Python tools: with a loader", () => {
  it("calls it as for any tool and adds its problems to the static findings", async () => {
    const path = join(scratch, "loaded_tool.py");
    writeFileSync(path, edit(GOOD, { 7: '            "name": "loaded_tool_run",', 15: "    pass" }));
    const calls: string[][] = [];
    const load = async (file: string, tool?: string) => {
      calls.push([file, tool ?? ""]);
      return { ok: false, problems: ["loaded_tool could not be built: loaded_tool.py:3:1: SyntaxError: invalid syntax"] };
    };
    const report = await validateToolFile(path, { load });
    expect(calls).toEqual([[path, "loaded_tool"]]);
    expect(report.loaded).toBe(false);
    expect(brief(report.findings)).toEqual(["warning anima-dir:14", "error load:3"]);
    const ok = await validateToolFile(path, { load: async () => ({ ok: true, problems: [], schemas: ["loaded_tool_run"] }) });
    expect([ok.loaded, brief(ok.findings)]).toEqual([true, ["warning anima-dir:14"]]);
  });
});

describe("Python tools: the scanner on any text (property)", () => {
  const piece = fc.oneof(
    fc.string({ unit: "binary", maxLength: 8 }),
    fc.constantFrom("'", '"', "'''", '"""', "f'", 'f"', 'rb"', "t'", "{", "}", "{{", "(", ")", "[", "]", "\n", "\r\n", "\\", "\\\n", "#"),
    fc.constantFrom(
      ":",
      ";",
      "=",
      ",",
      ".",
      "!r",
      "def ",
      "class ",
      "if x:",
      "    ",
      "\t",
      "import ",
      "from . import x",
      "httpx.get(",
      "return [",
      "dispatch",
      "\ud800",
    ),
  );
  const source = fc.oneof(
    fc.string({ unit: "binary", maxLength: 200 }),
    fc.array(piece, { maxLength: 60 }).map((pieces) => pieces.join("")),
  );

  it(
    "never throws, ends, and keeps its tokens and statements in order and in range",
    () => {
      fc.assert(
        fc.property(source, (text) => {
          const scan = scanPython(text);
          let last = { line: 1, column: 0 };
          for (const token of scan.tokens) {
            expect(token.line > last.line || (token.line === last.line && token.column > last.column)).toBe(true);
            last = token;
            if (token.close !== undefined) expect(scan.tokens[token.close]?.depth).toBe(token.depth);
          }
          let end = 0;
          for (const [index, statement] of scan.statements.entries()) {
            expect(statement.start).toBeGreaterThanOrEqual(end);
            expect(statement.end).toBeGreaterThan(statement.start);
            expect(statement.end).toBeLessThanOrEqual(scan.tokens.length);
            expect(statement.parent).toBeLessThan(index);
            end = statement.end;
          }
          expect(Array.isArray(validatePythonSource("t.py", text))).toBe(true);
        }),
        fuzzParameters(200),
      );
    },
    propertyTimeoutMs(20_000, 200),
  );

  it("stays fast on deep nesting and long inputs (no recursion over the text, linear work)", () => {
    const inputs = [
      "(".repeat(200_000),
      "[".repeat(100_000) + "]".repeat(100_000),
      'f"{'.repeat(100_000),
      "httpx.get(".repeat(50_000),
      "    if x:\n".repeat(20_000),
    ];
    const started = performance.now();
    for (const text of inputs) expect(() => validatePythonSource("t.py", text)).not.toThrow();
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});
