import { afterEach, describe, expect, it } from "vitest";
import { ToolHostError } from "../../src/errors.js";
import { checkArguments, describeExpected } from "../../src/execution/arguments.js";
import { type ToolSchema, checkToolSchemas } from "../../src/registry/schemas.js";
import { type TestHost, okOutput, useTestHost } from "../helpers/tools.js";

/** A schema as the registry hands it over (normalised and checked). */
function schemaOf(parameters: Record<string, unknown>, name = "t_run"): ToolSchema {
  const check = checkToolSchemas("t", [{ name, input_schema: parameters }], null);
  if (!check.ok) throw new Error(check.problems.join("; "));
  return check.schemas[0]!;
}

function refusal(schema: ToolSchema, args: unknown): ToolHostError {
  try {
    checkArguments(schema, args);
  } catch (error) {
    if (error instanceof ToolHostError) return error;
    throw error;
  }
  throw new Error("expected the arguments to be refused");
}

const SEARCH = schemaOf({
  type: "object",
  properties: {
    query: { type: "string", minLength: 2 },
    limit: { type: "integer", minimum: 1, maximum: 50 },
    mode: { enum: ["fast", "exact"] },
    filters: { type: "object", properties: { since: { type: "string", format: "date" } }, required: ["since"], additionalProperties: false },
    tags: { type: "array", items: { type: "string" } },
  },
  required: ["query"],
  additionalProperties: false,
});

describe("argument validation", () => {
  it("lists every problem, with dotted paths, and says what the action expects", () => {
    const error = refusal(SEARCH, { query: 7, limit: 0, mode: "slow", filters: { since: "yesterday", extra: 1 }, tags: ["a", 2], colour: "red" });
    expect(error.type).toBe("InvalidArguments");
    const problems = error.message.replace("invalid arguments for t_run: ", "").split("; ");
    expect(problems.sort()).toEqual(
      [
        'unknown parameter "colour"',
        '"query" must be string',
        '"limit" must be >= 1',
        '"mode" must be one of ["fast","exact"]',
        'unknown parameter "filters.extra"',
        '"filters.since" must match format "date"',
        '"tags.1" must be string',
      ].sort(),
    );
    expect(error.hint).toBe('expects: query (string, required), limit (integer), mode (one of "fast"|"exact"), filters (object), tags (array)');
  });

  it("names every missing required parameter", () => {
    const schema = schemaOf({ type: "object", properties: { a: { type: "string" }, b: { type: "number" } }, required: ["a", "b"] });
    expect(refusal(schema, {}).message).toBe('invalid arguments for t_run: missing required parameter "a"; missing required parameter "b"');
  });

  it("refuses arguments that are not a JSON object, or not plain JSON", () => {
    for (const args of [null, [], "query", 3]) {
      expect(refusal(SEARCH, args).message).toBe("arguments for t_run must be a JSON object");
    }
    const cyclic: Record<string, unknown> = { query: "ab" };
    cyclic["self"] = cyclic;
    const error = refusal(SEARCH, cyclic);
    expect(error.type).toBe("InvalidArguments");
    expect(error.message).toMatch(/must be plain JSON/);
    expect(refusal(SEARCH, { query: "ab", limit: 10n }).type).toBe("InvalidArguments");
  });

  it("returns a copy without anima_dir: the host sets that itself", () => {
    const args = { query: "weather", anima_dir: "/somewhere/else" };
    const checked = checkArguments(SEARCH, args);
    expect(checked).toEqual({ query: "weather" });
    expect(args.anima_dir).toBe("/somewhere/else"); // the caller's object is untouched
    // Even with additionalProperties: false, a caller's anima_dir is dropped rather than refused.
    expect(() => checkArguments(SEARCH, { query: "ok", anima_dir: 1 })).not.toThrow();
  });

  it("checks a catastrophic-backtracking pattern in linear time (RE2)", () => {
    const schema = schemaOf({ type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } });
    const hostile = `${"a".repeat(50_000)}!`;
    const started = performance.now();
    expect(refusal(schema, { s: hostile }).message).toBe('invalid arguments for t_run: "s" must match pattern "^(a+)+$"');
    // A backtracking engine needs ~2^50000 steps here; RE2 needs milliseconds.
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(checkArguments(schema, { s: "aaaa" })).toEqual({ s: "aaaa" });
  });

  it("checks each schema against its own patterns, however many schemas share the validator", () => {
    // ajv caches compiled patterns process-wide by their printed form; each must print differently.
    const digits = schemaOf({ type: "object", properties: { v: { type: "string", pattern: "^[0-9]+$" } } });
    const letters = schemaOf({ type: "object", properties: { v: { type: "string", pattern: "^[a-z]+$" } } });
    const caseless = schemaOf({ type: "object", properties: { v: { type: "string", pattern: "^(?i)[a-z]+$" } } });
    expect(checkArguments(digits, { v: "123" })).toEqual({ v: "123" });
    expect(refusal(digits, { v: "abc" }).message).toMatch(/must match pattern "\^\[0-9\]\+\$"/);
    expect(checkArguments(letters, { v: "abc" })).toEqual({ v: "abc" });
    expect(refusal(letters, { v: "123" }).message).toMatch(/must match pattern "\^\[a-z\]\+\$"/);
    expect(checkArguments(caseless, { v: "ABC" })).toEqual({ v: "ABC" });
    expect(refusal(caseless, { v: "123" }).type).toBe("InvalidArguments");
  });

  it("runs patternProperties on RE2 as well", () => {
    const schema = schemaOf({ type: "object", patternProperties: { "^(x+x+)+y$": { type: "number" } } });
    const started = performance.now();
    expect(checkArguments(schema, { [`${"x".repeat(30_000)}`]: "not a number" })).toBeDefined();
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(refusal(schema, { xxy: "text" }).message).toMatch(/"xxy" must be number/);
  });

  it("cuts caller-chosen names in messages, so a hostile key cannot flood the caller", () => {
    const message = refusal(SEARCH, { query: "ok", ["k".repeat(10_000)]: 1 }).message;
    expect(message).toBe(`invalid arguments for t_run: unknown parameter "${"k".repeat(64)}…"`);
  });

  it("describes an action without parameters", () => {
    expect(describeExpected(schemaOf({ type: "object", properties: {} }))).toBe("this action takes no arguments");
  });
});

describe("anima_dir through the host", () => {
  let t: TestHost;
  afterEach(async () => t?.close());

  const ECHO = `export function get_tool_schemas() {
  return [{ name: "echo_args", input_schema: { type: "object", properties: { x: { type: "number" } }, additionalProperties: false } }];
}
export function dispatch(name, args) { return args; }
`;

  it("is injected as the calling Anima's own directory and cannot be overridden by the caller", async () => {
    t = useTestHost();
    const bobDir = t.data.anima("bob");
    t.shared("echo.ts", ECHO);
    const aliceDir = `${t.data.dir}/animas/alice`;
    expect(JSON.parse(okOutput(await t.host.call("alice", "echo_args", { x: 1 })))).toEqual({ x: 1, anima_dir: aliceDir });
    expect(JSON.parse(okOutput(await t.host.call("alice", "echo_args", { x: 2, anima_dir: bobDir })))).toEqual({ x: 2, anima_dir: aliceDir });
    expect(JSON.parse(okOutput(await t.host.call("bob", "echo_args", { anima_dir: "/" })))).toEqual({ anima_dir: bobDir });
  });

  it("does not reach the tool when the arguments are wrong", async () => {
    t = useTestHost();
    t.shared("echo.ts", ECHO);
    const result = await t.host.call("alice", "echo_args", { x: "one", y: 2 });
    expect(result).toMatchObject({
      status: "error",
      error_type: "InvalidArguments",
      message: 'invalid arguments for echo_args: unknown parameter "y"; "x" must be number',
      hint: "expects: x (number)",
    });
  });
});
