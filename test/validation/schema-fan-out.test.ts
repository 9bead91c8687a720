import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_SCHEMA_FAN_OUT, schemaFanOut } from "../../src/validation/schema-fan-out.js";
import { fuzzParameters } from "../property/settings.js";

/** Definitions d0…d(levels-1), each an anyOf of `width` $refs to the one before (d0 a string), the top one at `a`. */
function chain(levels: number, width: number): Record<string, unknown> {
  const definitions: Record<string, unknown> = { d0: { type: "string" } };
  for (let level = 1; level < levels; level++)
    definitions[`d${level}`] = { anyOf: Array.from({ length: width }, () => ({ $ref: `#/definitions/d${level - 1}` })) };
  return { type: "object", definitions, properties: { a: { $ref: `#/definitions/d${levels - 1}` } } };
}

describe("a schema's fan-out (applications along one path of a value)", () => {
  it("is small for the schemas tools declare: properties, items, a few anyOf branches", () => {
    expect(schemaFanOut({ type: "object", properties: { q: { type: "string" }, n: { type: "integer" } } })).toBe(2);
    expect(schemaFanOut({ type: "object", properties: { xs: { type: "array", items: { anyOf: [{ type: "string" }, { type: "number" }] } } } })).toBe(5);
    const wide = Object.fromEntries(Array.from({ length: 2_500 }, (_, i) => [`p${i}`, { type: "string" }]));
    expect(schemaFanOut({ type: "object", properties: wide })).toBe(2);
  });

  it("schema_fan_out: multiplies through nested anyOf and $ref, and stops counting past the bound", () => {
    // d0: 1; a {$ref} to it: 2; d1: 1 + 10 × 2 = 21; d2: 1 + 10 × 22 = 221; a: 222; the root: 223.
    expect(schemaFanOut(chain(3, 10))).toBe(223);
    expect(schemaFanOut(chain(6, 10))).toBe(MAX_SCHEMA_FAN_OUT + 1);
    expect(schemaFanOut(chain(40, 10))).toBe(MAX_SCHEMA_FAN_OUT + 1);
  });

  it("counts a recursive structure once per level, and a schema that applies itself forever as past the bound", () => {
    const tree = { type: "object", properties: { name: { type: "string" }, children: { type: "array", items: { $ref: "#" } } } };
    expect(schemaFanOut(tree)).toBeLessThan(10);
    expect(schemaFanOut({ type: "object", anyOf: [{ $ref: "#" }] })).toBe(MAX_SCHEMA_FAN_OUT + 1);
    expect(
      schemaFanOut({
        type: "object",
        definitions: { a: { $ref: "#/definitions/b" }, b: { allOf: [{ $ref: "#/definitions/a" }] } },
        properties: { x: { $ref: "#/definitions/a" } },
      }),
    ).toBe(MAX_SCHEMA_FAN_OUT + 1);
  });

  it("ends, and stays within the bound plus one, for any schema-like value", () => {
    const schemaLike = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: "small" },
        fc.record({ type: fc.constantFrom("string", "object") }),
        fc.record({ anyOf: fc.array(tie("node"), { maxLength: 4 }) }),
        fc.record({ properties: fc.dictionary(fc.string({ maxLength: 3 }), tie("node"), { maxKeys: 3 }) }),
        fc.record({ $ref: fc.constantFrom("#", "#/definitions/a", "#/nope", "#/definitions/%zz") }),
      ),
    })).node;
    fc.assert(
      fc.property(schemaLike, schemaLike, (a, root) => {
        const fanOut = schemaFanOut({ ...(root as object), definitions: { a } });
        expect(fanOut).toBeGreaterThanOrEqual(1);
        expect(fanOut).toBeLessThanOrEqual(MAX_SCHEMA_FAN_OUT + 1);
      }),
      fuzzParameters(300),
    );
  });
});
