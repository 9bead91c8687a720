import { describe, expect, it } from "vitest";
import { profileFor } from "../../src/registry/profile.js";
import { SCHEMA_LIMITS, type SchemaCheck, checkToolSchemas } from "../../src/registry/schemas.js";

function ok(check: SchemaCheck) {
  if (!check.ok) throw new Error(`expected the schemas to pass: ${check.problems.join("; ")}`);
  return check;
}

function problems(check: SchemaCheck): string[] {
  if (check.ok) throw new Error("expected the schemas to be refused");
  return check.problems;
}

const QUERY_PARAMS = { type: "object", properties: { q: { type: "string" } }, required: ["q"] };

describe("normalising schemas (docs/animaworks-reference.md §3.1, docs/animaworks-reference.md checklist 15, 16)", () => {
  it("uses input_schema as parameters, and input_schema wins over parameters", () => {
    const { schemas } = ok(
      checkToolSchemas(
        "t",
        [
          { name: "t_a", description: "A", input_schema: QUERY_PARAMS },
          { name: "t_b", description: "B", parameters: QUERY_PARAMS },
          { name: "t_c", description: "C", input_schema: QUERY_PARAMS, parameters: { type: "object", properties: { other: { type: "number" } } } },
        ],
        null,
      ),
    );
    expect(schemas.map((s) => [s.name, s.action, s.description])).toEqual([
      ["t_a", "a", "A"],
      ["t_b", "b", "B"],
      ["t_c", "c", "C"],
    ]);
    for (const schema of schemas) expect(schema.parameters).toEqual(QUERY_PARAMS);
  });

  it("defaults a missing description to an empty string and missing parameters to an empty object schema", () => {
    const { schemas } = ok(checkToolSchemas("t", [{ name: "t_bare" }], undefined));
    expect(schemas[0]).toEqual({ name: "t_bare", action: "bare", description: "", parameters: { type: "object", properties: {} } });
  });

  it('reads `{}` as "no arguments" and adds the implied "type": "object"', () => {
    const { schemas } = ok(
      checkToolSchemas(
        "t",
        [
          { name: "t_empty", parameters: {} },
          { name: "t_untyped", input_schema: { properties: { n: { type: "integer" } }, required: ["n"] } },
        ],
        null,
      ),
    );
    expect(schemas[0]?.parameters).toEqual({ type: "object", properties: {} });
    expect(schemas[1]?.parameters).toEqual({ type: "object", properties: { n: { type: "integer" } }, required: ["n"] });
  });
});

describe("schema names", () => {
  it("must be {tool}_{action} for the file's tool name", () => {
    const found = problems(checkToolSchemas("weather", [{ name: "forecast" }, { name: "weather_" }, { name: "weatherly_x" }], null));
    expect(found).toEqual([
      'schema "forecast" must be named weather_<action> (the file is weather; e.g. weather_query)',
      'schema "weather_" must be named weather_<action> (the file is weather; e.g. weather_query)',
      'schema "weatherly_x" must be named weather_<action> (the file is weather; e.g. weather_query)',
    ]);
  });

  it("needs a name of letters, digits, _ or -, and refuses duplicates", () => {
    const found = problems(checkToolSchemas("t", [{ description: "no name" }, { name: "t_sp ace" }, { name: "t_ok" }, { name: "t_ok" }, "t_str"], null));
    expect(found).toHaveLength(4);
    expect(found[0]).toMatch(/schema #1 needs a "name"/);
    expect(found[1]).toMatch(/schema #2 needs a "name".*got "t_sp ace"/);
    expect(found[2]).toBe('schema "t_ok" is declared twice');
    expect(found[3]).toMatch(/schema #5 must be an object/);
  });

  it("accepts hyphenated actions (AnimaWorks spells some CLI actions so)", () => {
    expect(ok(checkToolSchemas("gmail", [{ name: "gmail_draft-update" }], null)).schemas[0]?.action).toBe("draft-update");
  });
});

describe("what get_tool_schemas() returned", () => {
  it("explains a missing function, a non-array and an empty list", () => {
    expect(problems(checkToolSchemas("t", null, null))).toEqual(["the module does not export get_tool_schemas() (alias getToolSchemas)"]);
    expect(problems(checkToolSchemas("t", { name: "t_x" }, null))).toEqual(["get_tool_schemas() must return an array of schemas"]);
    expect(problems(checkToolSchemas("t", [], null))).toEqual(["get_tool_schemas() returned no schemas"]);
  });

  it("lists every problem at once, not only the first", () => {
    const found = problems(
      checkToolSchemas("t", [{ name: "x_wrong" }, { name: "t_desc", description: 42 }, { name: "t_params", input_schema: { type: "array" } }], {
        run: { timeout_seconds: -1 },
      }),
    );
    expect(found).toHaveLength(4);
    expect(found.join("\n")).toMatch(/x_wrong/);
    expect(found.join("\n")).toMatch(/"description" must be a string/);
    expect(found.join("\n")).toMatch(/must have "type": "object"/);
    expect(found.join("\n")).toMatch(/EXECUTION_PROFILE\.run\.timeout_seconds must be a positive number/);
  });
});

describe("invalid JSON Schema is a load problem that says what to fix", () => {
  const check = (inputSchema: unknown) => problems(checkToolSchemas("t", [{ name: "t_x", input_schema: inputSchema }], null)).join("\n");

  it("names the location, the allowed values and the bad value of a misspelt type", () => {
    expect(check({ type: "object", properties: { n: { type: "integr" } } })).toBe(
      'schema "t_x": input_schema is not valid JSON Schema: at "properties.n.type": must be one of "array", "boolean", "integer", "null", "number", "object", "string" (got "integr")',
    );
  });

  it("reports wrongly shaped keywords", () => {
    expect(check({ type: "object", properties: { n: { type: "string", minLength: "3" } } })).toMatch(
      /at "properties\.n\.minLength": must be integer \(got "3"\)/,
    );
    expect(check({ type: "object", required: "q" })).toMatch(/at "required": must be array \(got "q"\)/);
  });

  it("refuses unknown keywords and required names missing from properties (strict mode)", () => {
    expect(check({ type: "object", properties: { q: { type: "string", hint: "x" } } })).toMatch(
      /unknown keyword: "hint".*put notes for the model in "description"/,
    );
    expect(check({ type: "object", properties: { q: { type: "string" } }, required: ["query"] })).toMatch(/required property "query" is not defined/);
  });

  it("refuses patterns RE2 cannot run, saying why", () => {
    expect(check({ type: "object", properties: { q: { type: "string", pattern: "^(?!admin).*" } } })).toMatch(
      /look-arounds and back-references are not supported/,
    );
    expect(check({ type: "object", properties: { q: { type: "string", pattern: "(a)\\1" } } })).toMatch(/not valid JSON Schema/);
  });

  it("refuses schemas that are not object schemas", () => {
    expect(check("a string")).toMatch(/input_schema must be a JSON Schema object/);
    expect(check([QUERY_PARAMS])).toMatch(/input_schema must be a JSON Schema object/);
    expect(check({ type: "string" })).toMatch(/must have "type": "object" \(arguments are always an object\)/);
  });

  it("allows only local references: no $id, no anchors, no remote $ref (all tools share one validator)", () => {
    expect(check({ $id: "https://example.com/s", type: "object" })).toMatch(/may not use "\$id"/);
    expect(check({ type: "object", properties: { a: { $id: "inner", type: "string" } } })).toMatch(/may not use "\$id" \(at properties\.a\)/);
    expect(check({ type: "object", properties: { a: { anyOf: [{ $anchor: "x", type: "string" }] } } })).toMatch(
      /may not use "\$anchor" \(at properties\.a\.anyOf\.0\)/,
    );
    expect(check({ type: "object", properties: { a: { $ref: "https://evil.example/schema.json" } } })).toMatch(/only use local references/);
    expect(check({ type: "object", properties: { a: { $ref: "other.json#/x" } } })).toMatch(/only use local references/);
    // A property that is merely *named* "$id" is data, not the keyword.
    const local = {
      type: "object",
      definitions: { id: { type: "string", minLength: 1 } },
      properties: { $id: { $ref: "#/definitions/id" }, more: { type: "array", items: { $ref: "#/definitions/id" } } },
    };
    expect(ok(checkToolSchemas("t", [{ name: "t_x", input_schema: local }], null)).schemas[0]?.parameters).toEqual(local);
  });

  it("refuses an oversize schema", () => {
    const properties: Record<string, unknown> = {};
    for (let i = 0; i < 2_000; i++) properties[`field_${i}`] = { type: "string", description: "x".repeat(40) };
    expect(check({ type: "object", properties })).toMatch(new RegExp(`input_schema is \\d+ bytes; at most ${SCHEMA_LIMITS.maxSchemaJsonBytes} are allowed`));
  });

  it("refuses a deeply nested schema", () => {
    let inner: Record<string, unknown> = { type: "string" };
    for (let i = 0; i < 40; i++) inner = { type: "object", properties: { next: inner } };
    expect(check(inner)).toMatch(new RegExp(`nested deeper than ${SCHEMA_LIMITS.maxDepth} levels`));
  });

  it("refuses too many schemas and an overlong description", () => {
    const many = Array.from({ length: SCHEMA_LIMITS.maxSchemas + 1 }, (_, i) => ({ name: `t_a${i}` }));
    expect(problems(checkToolSchemas("t", many, null))[0]).toMatch(/at most 64 are allowed/);
    const long = problems(checkToolSchemas("t", [{ name: "t_x", description: "d".repeat(SCHEMA_LIMITS.maxDescriptionChars + 1) }], null));
    expect(long[0]).toMatch(/description is longer than 4096 characters/);
  });
});

describe("EXECUTION_PROFILE", () => {
  it("keeps the known keys per action and checks their types", () => {
    const { profile } = ok(
      checkToolSchemas("t", [{ name: "t_run" }], {
        run: { expected_seconds: 600, background_eligible: true, timeout_seconds: 900, gated: false, extra: "ignored" },
        "draft-update": { gated: true },
      }),
    );
    expect(profile).toEqual({ run: { expected_seconds: 600, background_eligible: true, timeout_seconds: 900, gated: false }, "draft-update": { gated: true } });
    expect(profileFor(profile, "draft_update")).toEqual({ gated: true }); // underscores find the hyphenated key
    expect(profileFor(profile, "other")).toBeUndefined();
  });

  it("keeps a retry policy for background jobs and says what is wrong with a bad one", () => {
    const { profile } = ok(checkToolSchemas("t", [{ name: "t_run" }], { run: { retry: { attempts: 3, backoff: 2.5 } }, other: { retry: { attempts: 1 } } }));
    expect(profile).toEqual({ run: { retry: { attempts: 3, backoff: 2.5 } }, other: { retry: { attempts: 1 } } });
    const found = problems(
      checkToolSchemas("t", [{ name: "t_run" }], {
        a: { retry: 3 },
        b: { retry: { attempts: 0 } },
        c: { retry: { attempts: 2.5, backoff: -1 } },
        d: { retry: { attempts: 11 } },
      }),
    );
    expect(found).toEqual([
      "EXECUTION_PROFILE.a.retry must be an object like { attempts: 3, backoff: 5 }",
      "EXECUTION_PROFILE.b.retry.attempts must be a whole number of runs from 1 to 10",
      "EXECUTION_PROFILE.c.retry.attempts must be a whole number of runs from 1 to 10",
      "EXECUTION_PROFILE.c.retry.backoff must be a number of seconds from 0 to 3600",
      "EXECUTION_PROFILE.d.retry.attempts must be a whole number of runs from 1 to 10",
    ]);
  });

  it("refuses values of the wrong type", () => {
    const found = problems(checkToolSchemas("t", [{ name: "t_run" }], { run: { timeout_seconds: "10", background_eligible: "yes" }, other: 5 }));
    expect(found).toEqual([
      "EXECUTION_PROFILE.run.timeout_seconds must be a positive number of seconds",
      "EXECUTION_PROFILE.run.background_eligible must be true or false",
      "EXECUTION_PROFILE.other must be an object",
    ]);
    expect(problems(checkToolSchemas("t", [{ name: "t_run" }], ["run"]))).toEqual(["EXECUTION_PROFILE must be an object mapping action names to settings"]);
  });
});
