import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { type Finding, checkFileName, formatValidation, runValidate, validateSource, validateToolFile } from "../../src/lifecycle/validate.js";
import { REPO_ROOT } from "../helpers/tools.js";

const FIXTURES = join(REPO_ROOT, "test", "fixtures", "lifecycle");
const scratch = mkdtempSync(join(tmpdir(), "awt-validate-test-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const brief = (findings: Finding[]): string[] => findings.map((f) => `${f.level} ${f.check}${f.line !== undefined ? `:${f.line}` : ""}`);
const fixture = (file: string): Promise<Finding[]> => validateToolFile(join(FIXTURES, file)).then((report) => report.findings);

/** A deterministic pseudo-random string, so no real-looking secret is ever committed to this repo. */
function randomish(length: number, alphabet: string, seed: number): string {
  let state = seed;
  let out = "";
  for (let i = 0; i < length; i++) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    out += alphabet[(state >>> 8) % alphabet.length]; // the low bits of this generator repeat quickly
  }
  return out;
}
const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

describe("validate: good tools", () => {
  it.each(["good_tool.ts", "named_handlers.mjs", "cjs_tool.js"])("%s has no findings", async (file) => {
    const report = await validateToolFile(join(FIXTURES, file));
    expect(report.findings).toEqual([]);
    expect(formatValidation(report)).toEqual({ text: `${join(FIXTURES, file)}: OK, no problems found`, exitCode: 0 });
  });
});

describe("validate: no false alarms on the product's own tools", () => {
  it.each(["tools/text_stats.ts", "test/fixtures/tools/seed/my_tool.ts", "test/fixtures/tools/seed/myapi.ts"])("%s has no findings", async (file) => {
    expect((await validateToolFile(join(REPO_ROOT, file))).findings).toEqual([]);
  });
});

describe("validate: file names", () => {
  it("wants snake_case with an allowed extension, and refuses helpers, reserved and invalid names", () => {
    expect(checkFileName("my_tool.ts")).toEqual([]);
    expect(checkFileName("my_tool.mjs")).toEqual([]);
    const one = (name: string): string => {
      const findings = checkFileName(name);
      expect(findings).toHaveLength(1);
      return `${findings[0]?.level}: ${findings[0]?.message}`;
    };
    expect(one("myTool.ts")).toMatch(/^warning: "myTool" is not snake_case.*my_tool/);
    expect(checkFileName("my_tool.py")).toEqual([]); // the seed's Python tools (python-checks.ts)
    expect(one("my_tool.rb")).toMatch(/^error: .*must end in \.ts, \.mts, \.js, \.mjs, \.py/);
    expect(one("my_tool.d.ts")).toMatch(/^error: .*type declaration/);
    expect(one("my-tool.ts")).toMatch(/^error: "my-tool" is not a valid tool name/);
    expect(one("9tool.ts")).toMatch(/^error: .*not a valid tool name/);
    expect(one("_helper.ts")).toMatch(/^error: .*helpers/);
    expect(one("list.ts")).toMatch(/^error: .*animaworks-tool command/);
    expect(one(`${"a".repeat(65)}.ts`)).toMatch(/^error: .*not a valid tool name/);
  });

  it("with a name (a draft to be installed under it), the name is checked and the file gives only the extension", () => {
    expect(checkFileName("draft.ts", "my_tool")).toEqual([]);
    expect(checkFileName("_draft.ts", "my_tool")).toEqual([]);
    expect(checkFileName("draft.py", "my_tool")).toEqual([]);
    expect(checkFileName("draft.rb", "my_tool")[0]?.message).toMatch(/must end in \.ts/);
    expect(checkFileName("draft.ts", "list")[0]?.message).toBe('"list" is an animaworks-tool command and cannot be a tool name');
    expect(checkFileName("draft.ts", "_x")[0]?.message).toMatch(/^"_x" starts with "_"/);
    expect(checkFileName("draft.ts", "myTool")[0]?.level).toBe("warning");
  });
});

describe("validate: schemas, descriptions, handlers, exports", () => {
  it("reports each schema rule that bad_schemas.ts breaks", async () => {
    const findings = await fixture("bad_schemas.ts");
    // Each at the line of the schema entry (or its key) it is about.
    expect(brief(findings)).toEqual([
      "error schemas:4",
      "error description:5",
      "error description:6",
      "warning input-schema:5",
      "error handlers:4",
      "error handlers:6",
    ]);
    const text = findings.map((f) => f.message).join("\n");
    expect(text).toContain('schema "other_tool_run" must be named bad_schemas_<action>');
    expect(text).toContain('schema "bad_schemas_quiet" has no description');
    expect(text).toContain('schema "bad_schemas_list" has no description');
    expect(text).toContain('schema "bad_schemas_quiet" has no input_schema');
    expect(text).toContain('no handler for schema "other_tool_run"');
    expect(text).toContain('no handler for schema "bad_schemas_list"');
  });

  it("requires the get_tool_schemas export", async () => {
    expect(brief(await fixture("no_export.ts"))).toEqual(["error exports:2"]);
  });

  it("warns that computed schemas are left to a real load", async () => {
    expect(brief(await fixture("dynamic_schemas.ts"))).toEqual(["warning schemas:4"]);
  });

  it("reports an unterminated source", async () => {
    expect(brief(await fixture("unterminated.ts"))).toContain("error source:2");
  });
});

describe("validate: imports", () => {
  it("refuses everything but relative files and @animaworks/tool, including require and computed import()", async () => {
    const findings = await fixture("bad_imports.ts");
    expect(brief(findings)).toEqual(["error imports:2", "error imports:3", "error imports:7", "error imports:14", "error imports:16", "error imports:20"]);
    const text = findings.map((f) => f.message).join("\n");
    expect(text).toContain('import "node:fs" is not allowed: Node built-ins are not available in the sandbox');
    expect(text).toContain('import "lodash" is not allowed: npm packages are not available in the sandbox');
    expect(text).toContain('export … from "https://example.com/mod.js" is not allowed: URL imports are not allowed');
    expect(text).toContain('require() "child_process" is not allowed: Node built-ins');
    expect(text).toContain("import() with a computed module name cannot be bundled");
    expect(text).toContain('export … from "../outside" leaves the tool\'s folder');
  });
});

describe("validate: hard-coded secrets", () => {
  const sk = `sk-${randomish(40, ALNUM, 1)}`;
  const ghp = `ghp_${randomish(36, ALNUM, 2)}`;
  const xoxb = `xoxb-${randomish(24, "0123456789", 3)}-abc`;
  const akia = `AKIA${randomish(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 4)}`;
  const blob = randomish(40, ALNUM, 5);
  const hex = randomish(40, "0123456789abcdef", 6);
  const cases: Array<[string, string, string, RegExp]> = [
    ["known prefix sk-", `const api_key = "${sk}";`, sk, /OpenAI\/Anthropic-style API key/],
    ["GitHub token", `const t = "${ghp}";`, ghp, /GitHub token/],
    ["Slack token in a comment", `// ${xoxb}`, xoxb, /Slack token/],
    ["AWS key id", `const id = "${akia}";`, akia, /AWS access key id/],
    ["api_key assignment", 'const api_key = "hunter2hunter2";', "hunter2hunter2", /"api_key" is set to a literal/],
    ["camelCase property", 'const config = { apiKey: "abc12345def" };', "abc12345def", /"apiKey" is set to a literal/],
    ["quoted property", 'const headers = { "X-Auth-Token": "t0k3nvalue" };', "t0k3nvalue", /"X-Auth-Token" is set to a literal/],
    ["high-entropy literal", `const blob = "${blob}";`, blob, /random-looking string literal/],
    ["high-entropy hex", `const h = "${hex}";`, hex, /random-looking string literal/],
  ];
  it.each(cases)("flags %s as one error without repeating the secret", (_label, line, secret, message) => {
    const findings = validateSource("secret_tool.ts", `${line}\nexport function get_tool_schemas() { return []; }`).filter((f) => f.check === "secrets");
    expect(findings).toHaveLength(1);
    expect(findings[0]).toMatchObject({ level: "error", line: 1 });
    expect(findings[0]?.message).toMatch(message);
    expect(findings[0]?.message).not.toContain(secret);
    expect(findings[0]?.message).toContain(`${secret.slice(0, 4)}****`);
  });

  it("leaves ordinary strings alone: env var names, placeholders, short values, prose, URLs, words", () => {
    const source = [
      'const key = getCredential("myapi", "myapi_tool", { envVar: "MYAPI_KEY", keyName: "api_key" });',
      'const token = "YOUR_TOKEN_HERE";',
      'const password = "changeme";',
      'const secret = "short";',
      'const headers = { Authorization: "Bearer " + key };',
      'const nextPageToken = "CAEQAhgBIhAKDgoHMjAyNi0wMQ";',
      'const url = "https://api.example.com/v1/search/items/by-category/all";',
      'const longWords = "this_is_a_very_long_identifier_without_digits_at_all";',
      "// sk-... and ghp_xxx in prose are fine",
    ].join("\n");
    expect(validateSource("fine_tool.ts", source).filter((f) => f.check === "secrets")).toEqual([]);
  });
});

describe("validate: network timeouts", () => {
  it("warns about each fetch without timeoutMs", async () => {
    expect(brief(await fixture("network_calls.ts"))).toEqual(["warning network-timeout:9", "warning network-timeout:11"]);
  });
});

describe("validate: report and exit codes", () => {
  it("prints one line per finding with path, line, level and check, then a summary; errors exit 6", async () => {
    const path = join(FIXTURES, "no_export.ts");
    const { text, exitCode } = formatValidation(await validateToolFile(path));
    expect(exitCode).toBe(6);
    expect(text.split("\n")).toEqual([
      `${path}:2: error [exports] get_tool_schemas() (or getToolSchemas) is not exported; every tool must export it`,
      `${path}: 1 error, 0 warnings`,
    ]);
  });

  it("warnings alone exit 0", async () => {
    const { text, exitCode } = await runValidate(join(FIXTURES, "network_calls.ts"));
    expect(exitCode).toBe(0);
    expect(text.split("\n").pop()).toMatch(/: 0 errors, 2 warnings$/);
  });

  it("a missing file exits 2, a directory too; a file over the size limit is an error finding", async () => {
    expect(await runValidate(join(scratch, "nope.ts"))).toMatchObject({
      text: `${join(scratch, "nope.ts")}: error [file] no such file`,
      exitCode: 2,
      report: { errors: 1, findings: [{ level: "error", check: "file", message: "no such file" }] },
    });
    expect((await runValidate(FIXTURES)).exitCode).toBe(2);
    const big = join(scratch, "big_tool.ts");
    writeFileSync(big, `// ${"x".repeat(2_000)}\n`);
    const report = await validateToolFile(big, { maxSourceBytes: 1_000 });
    expect(brief(report.findings)).toEqual(["error file"]);
  });

  it("with a loader, schema and handler checks come from the load and its problems are findings", async () => {
    const calls: string[] = [];
    const load = async (path: string) => {
      calls.push(path);
      return { ok: false, problems: ["dynamic_schemas: no handler for dynamic_schemas_b"] };
    };
    const report = await validateToolFile(join(FIXTURES, "dynamic_schemas.ts"), { load });
    expect(calls).toEqual([join(FIXTURES, "dynamic_schemas.ts")]);
    expect(report.loaded).toBe(false);
    // the "computed schemas" warning is gone: the load covered them
    expect(report.findings).toEqual([{ level: "error", check: "load", message: "dynamic_schemas: no handler for dynamic_schemas_b" }]);
    const bad = await validateToolFile(join(FIXTURES, "bad_schemas.ts"), { load: async () => ({ ok: true, problems: [] }) });
    expect(brief(bad.findings)).toEqual(["error description:5", "error description:6", "warning input-schema:5"]);
    const thrown = await validateToolFile(join(FIXTURES, "good_tool.ts"), { load: async () => Promise.reject(new Error("sandbox gone")) });
    expect(thrown.findings).toEqual([{ level: "error", check: "load", message: "the tool could not be loaded: sandbox gone" }]);
  });

  it("checks the name against the installed tools (with the loaded schemas) unless the name is invalid; a failing check is a finding", async () => {
    const seen: Array<[string, string[] | undefined]> = [];
    const installed = async (tool: string, schemas: string[] | undefined): Promise<Finding[]> => {
      seen.push([tool, schemas]);
      return [{ level: "warning", check: "shadowing", message: `${tool} exists` }];
    };
    const load = async (_path: string, tool?: string) => ({ ok: true, problems: [], schemas: [`${tool}_action`] });
    const report = await validateToolFile(join(FIXTURES, "good_tool.ts"), { load, installed, name: "renamed" });
    expect(report.tool).toBe("renamed");
    expect(seen).toEqual([["renamed", ["renamed_action"]]]);
    expect(report.findings).toEqual([{ level: "warning", check: "shadowing", message: "renamed exists" }]);
    const invalid = await validateToolFile(join(FIXTURES, "good_tool.ts"), { load, installed, name: "list" });
    expect(brief(invalid.findings)).toEqual(["error file-name"]);
    expect(seen).toHaveLength(1);
    const failing = await validateToolFile(join(FIXTURES, "good_tool.ts"), { load, installed: () => Promise.reject(new Error("host closed")) });
    expect(failing.findings).toEqual([
      {
        level: "error",
        check: "shadowing",
        message: "the installed tools could not be listed (host closed); run validate again, or check them with animaworks-tool list",
      },
    ]);
  });
});
