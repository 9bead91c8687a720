import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import type { Ajv as AjvType, ValidateFunction } from "ajv";
import { checkArguments } from "../../src/execution/arguments.js";
import { checkToolSchemas } from "../../src/registry/schemas.js";
import { compileSchema, describeValidationErrors, loadValidator, schemaProblems, validatorSource } from "../../src/validation/ajv.js";
import { duplicatePair } from "../../src/validation/unique-items.js";

// uniqueItems in linear time (src/validation/unique-items.ts): ajv's own keyword compares every pair of
// non-scalar items, and a 30,000-object argument held the host's event loop, every Anima's, for 15 s.

const require = createRequire(import.meta.url);
/** ajv as it comes, for the error shape the host's keyword keeps. */
const plainAjv = (): AjvType => new (require("ajv") as { Ajv: typeof AjvType }).Ajv({ allErrors: true, strict: true });

const OBJECTS = { type: "object", properties: { rows: { type: "array", uniqueItems: true } } };
const rows = (count: number): Array<Record<string, unknown>> =>
  Array.from({ length: count }, (_, index) => ({ id: index, tags: ["a", index % 7], note: "row" }));

/** Both validators the host uses: compiled here, and the standalone one cached with a tool's description. */
function validators(schema: object): Array<[string, ValidateFunction]> {
  const compiled = compileSchema(schema);
  return [
    ["compiled", compiled],
    ["standalone", loadValidator(validatorSource(compiled))],
  ];
}

/** The fastest of a few runs, ms: the least disturbed by other work on the machine. */
function fastestMs(work: () => void, runs = 3): number {
  let best = Number.POSITIVE_INFINITY;
  for (let run = 0; run < runs; run++) {
    const startedAt = performance.now();
    work();
    best = Math.min(best, performance.now() - startedAt);
  }
  return best;
}

describe("uniqueItems (uniqueness_quadratic_blowup)", () => {
  it("refuses duplicates with ajv's own error shape: keyword, path, params {i, j} of two equal items, message", () => {
    const scalar = { type: "object", properties: { ids: { type: "array", items: { type: "integer" }, uniqueItems: true } } };
    const plain = plainAjv().compile(scalar);
    for (const [kind, validate] of validators(scalar)) {
      expect(validate({ ids: [3, 1, 4, 1, 5] }), kind).toBe(false);
      expect(plain({ ids: [3, 1, 4, 1, 5] })).toBe(false);
      // For scalar items ajv scans as the host does: the very same error.
      expect(validate.errors, kind).toEqual(plain.errors);
    }
    for (const [kind, validate] of validators(OBJECTS)) {
      const data = { rows: [{ a: 1, b: [1, { c: 2 }] }, { x: 0 }, { b: [1, { c: 2 }], a: 1 }] };
      expect(validate(data), kind).toBe(false);
      expect(validate.errors, kind).toEqual([
        {
          instancePath: "/rows",
          schemaPath: "#/properties/rows/uniqueItems",
          keyword: "uniqueItems",
          params: { i: 0, j: 2 },
          message: "must NOT have duplicate items (items ## 2 and 0 are identical)",
        },
      ]);
      expect(describeValidationErrors(validate.errors)).toEqual(['"rows" must NOT have duplicate items (items ## 2 and 0 are identical)']);
    }
  });

  it("calls equal exactly what ajv's deep equality calls equal, for JSON values", () => {
    const plain = plainAjv().compile({ type: "array", uniqueItems: true });
    const cases: unknown[][] = [
      [1, "1"],
      [0, -0],
      [1, 1.0],
      [null, "null"],
      [[], {}],
      [
        [1, 2],
        [2, 1],
      ],
      [{ "0": 1 }, [1]],
      [
        { a: 1, b: 2 },
        { b: 2, a: 1 },
      ],
      [{ a: { b: [1, { c: null }] } }, { a: { b: [1, { c: null }] } }],
      [{ a: 1 }, { a: 1, b: 2 }],
      [true, 1],
      ["a", "a "],
      JSON.parse('[{"__proto__": 1}, {"__proto__": 1}]') as unknown[],
    ];
    for (const items of cases) expect(duplicatePair(items) !== undefined, JSON.stringify(items)).toBe(!plain(items));
  });

  it("keeps honest schemas working: unique arrays pass, and the draft-07 meta-schema's own uniqueItems still checks schemas", () => {
    for (const [kind, validate] of validators(OBJECTS)) {
      expect(validate({ rows: rows(1_000) }), kind).toBe(true);
      expect(validate({ rows: [] }), kind).toBe(true);
    }
    expect(schemaProblems({ type: "object", required: ["a", "a"] })).toEqual([
      'at "required": must NOT have duplicate items (items ## 1 and 0 are identical) (got ["a","a"])',
    ]);
    expect(schemaProblems({ type: "array", uniqueItems: "yes" })).toEqual(['at "uniqueItems": must be boolean (got "yes")']);
    expect(schemaProblems({ type: "array", uniqueItems: false })).toEqual([]);
  });

  it("checks a 30,000-object argument in time linear in its size, not quadratic (as a call's arguments are checked)", () => {
    const check = checkToolSchemas("t", [{ name: "t_run", input_schema: OBJECTS }], null);
    if (!check.ok) throw new Error(check.problems.join("; "));
    const schema = { ...check.schemas[0]!, validatorSource: validatorSource(compileSchema(check.schemas[0]!.parameters)) };
    const small = { rows: rows(3_000) };
    const large = { rows: rows(30_000) };
    checkArguments(schema, small); // compiles and warms up
    const smallMs = fastestMs(() => checkArguments(schema, small));
    const largeMs = fastestMs(() => checkArguments(schema, large), 2);
    // 10 × the items: ≈ 10 × the time when linear (3–8 × measured: fixed costs), ≈ 100 × when every pair
    // is compared (61 × measured with ajv's own keyword, the copy of the arguments diluting it). The bound
    // is generous for a busy machine, and well below the quadratic ratio.
    expect(largeMs / Math.max(smallMs, 0.5)).toBeLessThan(35);
    // A duplicate at the far ends is still found.
    expect(() => checkArguments(schema, { rows: [...large.rows, { ...large.rows[0]! }] })).toThrow(/items ## 30000 and 0 are identical/);
  }, 120_000);
});
