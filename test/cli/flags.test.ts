import { describe, expect, it } from "vitest";
import { parseToolFlags, positionalParameters } from "../../src/cli/flags.js";
import { ToolHostError } from "../../src/errors.js";

const schema = {
  properties: {
    query: { type: "string" },
    target: { type: "string" },
    limit: { type: "integer" },
    ratio: { type: "number" },
    verbose: { type: "boolean" },
    tags: { type: "array", items: { type: "string" } },
    ids: { type: "array", items: { type: "integer" } },
    options: { type: "object" },
    max_results: { type: "integer" },
    mode: { enum: ["fast", "slow"] },
    maybe: { type: ["integer", "null"] },
  },
  required: ["query", "target", "limit"],
};

function problems(argv: string[]): string {
  try {
    parseToolFlags(schema, argv);
  } catch (error) {
    expect(error).toBeInstanceOf(ToolHostError);
    expect((error as ToolHostError).type).toBe("InvalidArguments");
    return (error as ToolHostError).message;
  }
  throw new Error("expected InvalidArguments");
}

describe("schema-typed CLI flags", () => {
  it("types values by the schema, in both --name value and --name=value forms", () => {
    expect(parseToolFlags(schema, ["--limit", "10", "--ratio=0.5", "--query", "q"])).toEqual({ limit: 10, ratio: 0.5, query: "q" });
  });

  it("accepts snake_case and kebab-case names", () => {
    expect(parseToolFlags(schema, ["--max-results", "3"])).toEqual({ max_results: 3 });
    expect(parseToolFlags(schema, ["--max_results", "4"])).toEqual({ max_results: 4 });
  });

  it("reads booleans as --flag / --no-flag, and an explicit true/false", () => {
    expect(parseToolFlags(schema, ["--verbose"])).toEqual({ verbose: true });
    expect(parseToolFlags(schema, ["--no-verbose"])).toEqual({ verbose: false });
    expect(parseToolFlags(schema, ["--verbose", "false"])).toEqual({ verbose: false });
    expect(parseToolFlags(schema, ["--verbose=true"])).toEqual({ verbose: true });
  });

  it("builds arrays from repeated flags or JSON, typing the items", () => {
    expect(parseToolFlags(schema, ["--tags", "a", "--tags", "b"])).toEqual({ tags: ["a", "b"] });
    expect(parseToolFlags(schema, ["--tags", '["x","y"]'])).toEqual({ tags: ["x", "y"] });
    expect(parseToolFlags(schema, ["--ids", "1", "--ids", "2"])).toEqual({ ids: [1, 2] });
  });

  it("parses objects as JSON", () => {
    expect(parseToolFlags(schema, ["--options", '{"a":1}'])).toEqual({ options: { a: 1 } });
    expect(problems(["--options", "not json"])).toContain("--options expects object");
  });

  it("takes required scalars positionally, in required order, typed like their flags", () => {
    expect(positionalParameters(schema)).toEqual(["query", "target", "limit"]);
    expect(parseToolFlags(schema, ["hello", "world", "--limit", "1"])).toEqual({ query: "hello", target: "world", limit: 1 });
    expect(parseToolFlags(schema, ["hello", "world", "-3"])).toEqual({ query: "hello", target: "world", limit: -3 });
    expect(problems(["hello", "world", "many"])).toContain('--limit expects integer, got "many" (given in place of --limit)');
    // a flag given explicitly takes its parameter out of the positional order
    expect(parseToolFlags(schema, ["--query", "q", "t"])).toEqual({ query: "q", target: "t" });
  });

  it("accepts negative numbers as values and union types", () => {
    expect(parseToolFlags(schema, ["--limit", "-5"])).toEqual({ limit: -5 });
    expect(parseToolFlags(schema, ["--maybe", "null"])).toEqual({ maybe: null });
    expect(parseToolFlags(schema, ["--maybe", "7"])).toEqual({ maybe: 7 });
    expect(parseToolFlags(schema, ["--mode", "fast"])).toEqual({ mode: "fast" });
  });

  it("treats everything after -- as positional", () => {
    expect(parseToolFlags(schema, ["--", "--not-a-flag"])).toEqual({ query: "--not-a-flag" });
  });

  it("lists every problem at once: wrong types, unknown options, missing values, extra arguments", () => {
    const message = problems(["--limit", "ten", "--bogus", "1", "a", "b", "7", "c", "--ratio"]);
    expect(message).toContain('--limit expects integer, got "ten"');
    expect(message).toContain("unknown option --bogus");
    expect(message).toContain('unexpected argument "c"');
    expect(message).toContain("option --ratio needs a value");
  });
});
