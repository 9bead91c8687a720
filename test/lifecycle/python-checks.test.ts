import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { formatValidation, validateToolFile } from "../../src/lifecycle/validate.js";
import { brief, check, edit, GOOD, only, template, WITHOUT_LIST } from "../helpers/python-checks.js";

const scratch = mkdtempSync(join(tmpdir(), "awt-python-checks-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("Python tools: the seed's templates", () => {
  it.each([["my_tool.py"], ["myapi.py"]])("%s has no findings", async (file) => {
    const path = join(scratch, file);
    writeFileSync(path, template(file));
    const report = await validateToolFile(path);
    expect(report.findings).toEqual([]);
    expect(formatValidation(report)).toEqual({ text: `${path}: OK, no problems found`, exitCode: 0 });
  });

  it("the small tool the other tests break has none either", () => {
    expect(check(GOOD.join("\n"))).toEqual([]);
  });
});

describe("Python tools: file name", () => {
  it("accepts .py, wants snake_case, refuses helpers and invalid names", () => {
    expect(brief(only(check(GOOD.join("\n"), "MyTool.py"), "file-name"))).toEqual(["warning file-name"]);
    expect(brief(only(check(GOOD.join("\n"), "my-tool.py"), "file-name"))).toEqual(["error file-name"]);
    expect(only(check(GOOD.join("\n"), "_helpers.py"), "file-name")[0]?.message).toMatch(/helpers that tools import/);
  });
});

describe("Python tools: from __future__ import annotations", () => {
  it("warns when it is missing, at the first statement", () => {
    const findings = check(edit(GOOD, { 1: "" }));
    expect(brief(findings)).toEqual(["warning source:3"]);
    expect(findings[0]?.message).toMatch(/^the file does not start with from __future__ import annotations/);
  });

  it("may follow comments and the module docstring", () => {
    expect(check(edit(GOOD, { 1: '#!/usr/bin/env python3\n# A tool.\n"""Docstring.\n\nMore."""\nfrom __future__ import annotations' }))).toEqual([]);
  });

  it("after another statement it is an error (Python refuses the file), and missing from the top", () => {
    expect(brief(check(edit(GOOD, { 1: "import os\nfrom __future__ import annotations" })))).toEqual(["warning source:1", "error source:2"]);
  });
});

describe("Python tools: get_tool_schemas()", () => {
  it("is required, at the top level", () => {
    const missing = check(edit(GOOD, { 4: "def schemas() -> list[dict]:" }));
    expect(brief(missing)).toEqual(["error exports"]);
    expect(missing[0]?.message).toMatch(/^get_tool_schemas\(\) is not defined/);
    const nested = check(edit(GOOD, { 3: "class Tool:", 4: "  def get_tool_schemas() -> list[dict]:" }));
    expect(brief(nested)).toEqual(["error exports:4"]);
    expect(nested[0]?.message).toMatch(/inside a class or function/);
  });

  it("must return a list: a dict, a string, None or no return at all are errors", () => {
    const dict = check(edit(GOOD, { 5: "    return {", 6: "", 10: "", 11: "    }" }));
    expect(brief(dict)).toEqual(["error schemas:5"]);
    expect(dict[0]?.message).toBe("get_tool_schemas() must return a list of schemas; this returns a dict (one schema? put it in a list: return [{…}])");
    const text = check(edit(GOOD, { ...WITHOUT_LIST, 5: '    return "my_tool_run"' }));
    expect(text.map((f) => [f.level, f.check, f.line, f.message])).toEqual([
      ["error", "schemas", 5, "get_tool_schemas() must return a list of schemas; this returns a string"],
    ]);
    expect(brief(check(edit(GOOD, { ...WITHOUT_LIST, 5: "    return" })))).toEqual(["error schemas:5"]);
    expect(brief(check(edit(GOOD, { ...WITHOUT_LIST, 5: "    pass" })))).toEqual(["error schemas:4"]);
    expect(check(edit(GOOD, { ...WITHOUT_LIST, 5: "    return []" })).map((f) => [f.check, f.line, f.message])).toEqual([
      ["schemas", 5, "get_tool_schemas() returns an empty list: declare at least one schema"],
    ]);
  });

  it("a list built at run time is left to the load; one returned by name is read where it is written", () => {
    expect(check(edit(GOOD, { ...WITHOUT_LIST, 5: '    return [{"name": f"my_tool_{a}"} for a in ("x", "y")]' }))).toEqual([]);
    expect(check(edit(GOOD, { ...WITHOUT_LIST, 5: "    return build_schemas()" }))).toEqual([]);
    const named = edit(GOOD, { ...WITHOUT_LIST, 3: 'SCHEMAS = [{"name": "other_run", "description": "d", "parameters": {}}]', 5: "    return SCHEMAS" });
    expect(brief(check(named))).toEqual(["error schemas:3"]);
  });
});

describe("Python tools: schemas", () => {
  it("names each schema {tool}_{action}, at the line and column of its name", () => {
    const findings = check(edit(GOOD, { 7: '            "name": "other_run",' }));
    expect(findings.map((f) => [f.level, f.check, f.line, f.column])).toEqual([["error", "schemas", 7, 21]]);
    expect(findings[0]?.message).toMatch(/^schema "other_run" must be named my_tool_<action> \(the tool is my_tool; e\.g\. my_tool_query\)/);
    // Checked under another name (a draft to be installed so), that name is the prefix.
    expect(brief(check(GOOD.join("\n"), "draft.py", "renamed"))).toEqual(["error schemas:7"]);
    expect(check(GOOD.join("\n"), "draft.py", "my_tool")).toEqual([]);
  });

  it("a schema without a name, declared twice, or not a dict is an error", () => {
    expect(brief(check(edit(GOOD, { 7: "" })))).toEqual(["error schemas:6"]);
    const twice = edit(GOOD, { 10: '        },\n        {"name": "my_tool_run", "description": "Again.", "parameters": {}},' });
    expect(check(twice).map((f) => [f.check, f.line, f.message])).toEqual([["schemas", 11, 'schema "my_tool_run" is declared twice (first on line 7)']]);
    expect(brief(check(edit(GOOD, { 10: '        },\n        "my_tool_other",' })))).toEqual(["error schemas:11"]);
  });

  it("warns about a missing or empty description, at the schema", () => {
    const missing = check(edit(GOOD, { 8: "" }));
    expect(brief(missing)).toEqual(["warning description:6"]);
    expect(missing[0]?.message).toBe('schema "my_tool_run" has no description; the model chooses tools by it (one or two sentences)');
    expect(brief(check(edit(GOOD, { 8: '            "description": "  ",' })))).toEqual(["warning description:6"]);
  });

  it("needs input_schema or parameters", () => {
    const missing = check(edit(GOOD, { 9: "" }));
    expect(brief(missing)).toEqual(["error input-schema:6"]);
    expect(missing[0]?.message).toMatch(/^schema "my_tool_run" has neither "input_schema" nor "parameters"/);
    expect(check(edit(GOOD, { 9: '            "parameters": {"type": "object", "properties": {}},' }))).toEqual([]);
    // **extra may hold them: nothing is reported missing from a dict that is not all written out.
    expect(check(edit(GOOD, { 9: "            **EXTRA," }))).toEqual([]);
  });
});

describe("Python tools: handlers and dispatch", () => {
  it("each schema needs dispatch() or a top-level function of its name", () => {
    const none = check(edit(GOOD, { 14: "", 15: "", 16: "" }));
    expect(brief(none)).toEqual(["error handlers:7"]);
    expect(none[0]?.message).toBe(
      'no handler for schema "my_tool_run": define dispatch(name, args) (recommended), or a function named my_tool_run, at the top level',
    );
    expect(check(edit(GOOD, { 14: "def my_tool_run(**kwargs):", 15: "", 16: '    return {"ran": True}' }))).toEqual([]);
    // A method of that name is not a handler.
    expect(brief(check(edit(GOOD, { 14: "class Tool:\n    def my_tool_run(self):", 15: "", 16: "        return {}" })))).toEqual(["error handlers:7"]);
  });

  it("dispatch must take (name, args)", () => {
    const findings = check(edit(GOOD, { 14: "def dispatch(name):", 15: "" }));
    expect(findings.map((f) => [f.level, f.check, f.line, f.message])).toEqual([
      ["error", "handlers", 14, "dispatch() takes 1 positional parameter; the host calls dispatch(name, args)"],
    ]);
    expect(check(edit(GOOD, { 14: "def dispatch(*call):", 15: "" }))).toEqual([]);
  });

  it('warns when dispatch does not pop "anima_dir" from its args, whatever they are called', () => {
    const missing = check(edit(GOOD, { 15: "    name = name.strip()" }));
    expect(missing.map((f) => [f.level, f.check, f.line, f.column])).toEqual([["warning", "anima-dir", 14, 5]]);
    expect(missing[0]?.message).toMatch(/^dispatch\(\) does not remove "anima_dir" from args: .* start dispatch with args\.pop\("anima_dir", None\)$/);
    expect(check(edit(GOOD, { 14: "def dispatch(schema, arguments):", 15: "    arguments.pop('anima_dir', None)", 16: "    return schema" }))).toEqual([]);
    // Popping from another name, or in a string, is not it.
    expect(brief(check(edit(GOOD, { 14: "def dispatch(schema, arguments):", 16: "    return \"arguments.pop('anima_dir', None)\"" })))).toEqual([
      "warning anima-dir:14",
    ]);
    const noDefault = check(edit(GOOD, { 15: '    args.pop("anima_dir")' }));
    expect(brief(noDefault)).toEqual(["warning anima-dir:14"]);
    expect(noDefault[0]?.message).toMatch(/raises KeyError/);
  });
});
