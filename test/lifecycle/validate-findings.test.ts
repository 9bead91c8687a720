import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runLifecycleCommand } from "../../src/cli/lifecycle.js";
import { hostFromConfig } from "../../src/host.js";
import { type Finding, validateSource, validateToolFile } from "../../src/lifecycle/validate.js";
import { checkToolSchemas, schemaIssues } from "../../src/registry/schemas.js";
import { type TestHost, useTestHost } from "../helpers/tools.js";

// `validate` reports every finding of a draft in one run, each at the line (and column) it comes from,
// in the text report and in the --json one, also when the real load (which stops at the first problems
// and names no lines) runs. Real loads: needs `npm run build`.

/** A first draft of tool "forecast" with one of each mistake a new author makes; numbered by line. */
const FORECAST = [
  /*  1 */ 'import { fetch, getCredential } from "@animaworks/tool";',
  /*  2 */ "",
  /*  3 */ "// A first draft: every line below the schemas has something to fix.",
  /*  4 */ "export function get_tool_schemas() {",
  /*  5 */ "  return [",
  /*  6 */ '    { name: "weather_now", description: "Current weather", input_schema: { type: "object", properties: {} } },',
  /*  7 */ "    {",
  /*  8 */ '      name: "forecast_days",',
  /*  9 */ '      description: "Forecast for the next days",',
  /* 10 */ "      input_schema: {",
  /* 11 */ '        type: "object",',
  /* 12 */ "        properties: {",
  /* 13 */ '          days: { type: "integr", hint: "1 to 7" },',
  /* 14 */ '          city: { type: "string" },',
  /* 15 */ "        },",
  /* 16 */ '        required: ["city", "country"],',
  /* 17 */ "      },",
  /* 18 */ "    },",
  /* 19 */ '    { name: "forecast_alerts", description: "", input_schema: { type: "object", properties: {} } },',
  /* 20 */ "  ];",
  /* 21 */ "}",
  /* 22 */ "",
  /* 23 */ "export const EXECUTION_PROFILE = { days: { timeout_seconds: 0 } };",
  /* 24 */ "",
  /* 25 */ "export async function forecast_days(args) {",
  /* 26 */ '  const key = getCredential("weather", "forecast");',
  /* 27 */ "  return fetch(`https://api.example.com/days?city=${args.city}&key=${key}`, { timeoutMs: 5_000 });",
  /* 28 */ "}",
  /* 29 */ "",
  /* 30 */ "export function forecast_hourly() {",
  /* 31 */ '  return "no schema declares me";',
  /* 32 */ "}",
  "",
].join("\n");

/** Every finding of FORECAST, in report order: `line:column level [check]` and a part of its message. */
const EXPECTED: Array<[string, string]> = [
  ["6:7 error [schemas]", 'schema "weather_now" must be named forecast_<action>'],
  ["13:19 error [schemas]", 'schema "forecast_days": input_schema is not valid JSON Schema: at "properties.days.type": must be one of'],
  ["13:35 error [schemas]", 'unknown keyword: "hint"'],
  ["16:28 error [schemas]", 'required property "country" is not in "properties"'],
  ["23:44 error [profile]", "EXECUTION_PROFILE.days.timeout_seconds must be a positive number of seconds"],
  ["19:32 error [description]", 'schema "forecast_alerts" has no description'],
  ["6:7 error [handlers]", 'no handler for schema "weather_now"'],
  ["19:7 error [handlers]", 'no handler for schema "forecast_alerts"'],
  ["30:17 warning [handlers]", 'forecast_hourly is exported like a handler, but no schema declares "forecast_hourly"'],
  ["26:15 warning [credentials]", "getCredential() returns a Promise"],
];

const brief = (f: Finding): string => `${f.line}:${f.column} ${f.level} [${f.check}]`;

function expectEveryFinding(findings: Finding[]): void {
  expect(findings.map(brief)).toEqual(EXPECTED.map(([where]) => where));
  EXPECTED.forEach(([, message], i) => expect(findings[i]?.message).toContain(message));
}

describe("validate: every finding of a draft, each at its line", () => {
  it("without a load: the checks read from the source find them all", async () => {
    const findings = validateSource("forecast.ts", FORECAST);
    // validateSource leaves the order to the report; the set is the same.
    expect(findings.map(brief).sort()).toEqual(EXPECTED.map(([where]) => where).sort());
  });

  describe("through the CLI, with the real load", () => {
    let t: TestHost;
    beforeEach(() => {
      t = useTestHost();
    });
    afterEach(() => t.close());

    async function validate(path: string, json: boolean): Promise<{ code: number; stdout: string }> {
      const stdout: string[] = [];
      const code = await runLifecycleCommand(
        t.host,
        "validate",
        [path],
        undefined,
        json,
        { stdout: (text) => stdout.push(text), stderr: () => {} },
        t.data.dir,
        hostFromConfig,
      );
      return { code, stdout: stdout.join("\n") };
    }

    it("the text report has one line per finding, starting path:line:column; the load's own message is not repeated", async () => {
      const path = t.data.write("drafts/forecast.ts", FORECAST);
      const { code, stdout } = await validate(path, false);
      expect(code).toBe(6);
      const lines = stdout.split("\n");
      expect(lines).toHaveLength(EXPECTED.length + 1);
      EXPECTED.forEach(([where, message], i) => {
        const [position, level, check] = where.split(" ");
        expect(lines[i]).toMatch(new RegExp(`^${escape(path)}:${position}: ${level} ${escape(check ?? "")} .*${escape(message)}`));
      });
      expect(lines.at(-1)).toBe(`${path}: 8 errors, 2 warnings`);
      expect(stdout).not.toContain("[load]"); // the load failed with exactly what the findings say
    });

    it("--json carries every finding with its line and column", async () => {
      const path = t.data.write("drafts/forecast.ts", FORECAST);
      const { code, stdout } = await validate(path, true);
      expect(code).toBe(6);
      const body = JSON.parse(stdout) as {
        status: string;
        tool: string;
        errors: number;
        warnings: number;
        loaded: boolean;
        findings: Finding[];
        report: string;
      };
      expect(body).toMatchObject({ status: "error", tool: "forecast", errors: 8, warnings: 2, loaded: false });
      expectEveryFinding(body.findings);
      expect(body.report.split("\n")[0]).toBe(
        `${path}:6:7: error [schemas] schema "weather_now" must be named forecast_<action> (the file is forecast; e.g. forecast_query)`,
      );
    });

    it("what only the load can say is kept, without a line: a profile built at run time", async () => {
      const source = [
        "export function get_tool_schemas() {",
        '  return [{ name: "wrong_x", description: "X", input_schema: { type: "object", properties: {} } }];',
        "}",
        "export const EXECUTION_PROFILE = profile();",
        "function profile() { return { x: { timeout_seconds: -1 } }; }",
        "export function dispatch() { return 1; }",
      ].join("\n");
      const path = t.data.write("drafts/late.ts", source);
      const { stdout } = await validate(path, true);
      const { findings } = JSON.parse(stdout) as { findings: Finding[] };
      expect(findings).toEqual([
        { level: "error", check: "schemas", line: 2, column: 13, message: 'schema "wrong_x" must be named late_<action> (the file is late; e.g. late_query)' },
        { level: "error", check: "load", message: "late: EXECUTION_PROFILE.x.timeout_seconds must be a positive number of seconds" },
      ]);
    });

    it("puts a build error's place in front, path:line:col, for the file itself and for a helper it imports", async () => {
      const tool = (name: string, body: string): string =>
        [
          'import { twice } from "./_twice.ts";',
          "export function get_tool_schemas() {",
          `  return [{ name: "${name}_run", description: "Runs.", input_schema: { type: "object", properties: {} } }];`,
          "}",
          `export function ${name}_run() { ${body} }`,
        ].join("\n");
      const own = t.data.write("drafts/halfdone.ts", tool("halfdone", "const x = ; return twice(x);"));
      const helped = t.data.write("drafts/helped.ts", tool("helped", "return twice(2);"));
      t.data.write("drafts/_twice.ts", "export function twice(n: number) { return n * ; }\n");
      const ownRun = await validate(own, false);
      expect(ownRun.code).toBe(6);
      // The build error is a line starting where it is; no location is left inside the message.
      expect(ownRun.stdout.split("\n")[0]).toMatch(new RegExp(`^${escape(own)}:5:\\d+: error \\[load\\] build error: Unexpected ";"$`));
      expect(ownRun.stdout).not.toMatch(/could not be built/);
      // An error in a helper is at the helper's path, beside the file.
      const helperRun = await validate(helped, false);
      expect(helperRun.stdout.split("\n")[0]).toMatch(
        new RegExp(`^${escape(join(t.data.dir, "drafts", "_twice.ts"))}:1:\\d+: error \\[load\\] build error: Unexpected ";"$`),
      );
      const { findings } = JSON.parse((await validate(helped, true)).stdout) as { findings: Finding[] };
      expect(findings).toEqual([
        { level: "error", check: "load", line: 1, column: expect.any(Number), file: "_twice.ts", message: 'build error: Unexpected ";"' },
      ]);
    });

    it("a load that succeeds leaves nothing of the declaration checks but the checklist's", async () => {
      const path = t.data.write(
        "drafts/fine.ts",
        [
          "export function get_tool_schemas() {",
          '  return [{ name: "fine_run", description: "Runs.", input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }];',
          "}",
          "export function fine_run() { return 1; }",
          "export function fine_walk() { return 2; }",
        ].join("\n"),
      );
      const report = await validateToolFile(path, { load: async () => ({ ok: true, problems: [], schemas: ["fine_run"] }) });
      expect(report.findings).toEqual([
        {
          level: "warning",
          check: "handlers",
          line: 5,
          column: 17,
          message:
            'fine_walk is exported like a handler, but no schema declares "fine_walk": the host never calls it; declare it in get_tool_schemas() (or stop exporting it)',
        },
      ]);
    });
  });
});

describe("schemaIssues: everything the load's check finds, and no more", () => {
  const entry = (input_schema: unknown) => [{ name: "t_x", description: "X", input_schema }];

  it("finds nothing in schemas the load accepts, however they are written", () => {
    const accepted = [
      { type: "object", properties: { a: { type: "string", title: "A", examples: ["x"], default: "x" } }, required: ["a"] },
      { type: "object", allOf: [{ properties: { a: { type: "string" } } }], required: ["a"] },
      { type: "object", definitions: { id: { type: "string", minLength: 1 } }, properties: { a: { $ref: "#/definitions/id" } } },
      { properties: { n: { type: "integer", minimum: 1 } } },
    ];
    for (const schema of accepted) {
      expect(checkToolSchemas("t", entry(schema), null).ok, JSON.stringify(schema)).toBe(true);
      expect(schemaIssues("t", entry(schema), null), JSON.stringify(schema)).toEqual([]);
    }
  });

  it("includes each problem the load reports, with where it is", () => {
    const refused: Array<[unknown, Array<string | number>]> = [
      [{ type: "object", properties: { n: { type: "integr" } } }, [0, "input_schema", "properties", "n", "type"]],
      [{ type: "object", properties: { q: { type: "string", hint: "x" } } }, [0, "input_schema", "properties", "q", "hint"]],
      [{ type: "object", properties: { q: { type: "string" } }, required: ["query"] }, [0, "input_schema", "required", 0]],
      [{ type: "object", properties: { n: { minimum: 3 } } }, [0, "input_schema", "properties", "n"]],
      [{ type: "array" }, [0, "input_schema", "type"]],
      [{ type: "object", properties: { a: { $ref: "https://evil.example/s.json" } } }, [0, "input_schema", "properties", "a", "$ref"]],
    ];
    for (const [schema, path] of refused) {
      const load = checkToolSchemas("t", entry(schema), null);
      expect(load.ok, JSON.stringify(schema)).toBe(false);
      const issues = schemaIssues("t", entry(schema), null);
      expect(issues, JSON.stringify(schema)).toHaveLength(1);
      expect(issues[0]?.path).toEqual(path);
      // The wording is the load's: only the required check says it in its own words, before ajv would.
      if (!("required" in (schema as object))) expect(load.ok === false && load.problems).toEqual([issues[0]?.message]);
    }
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
