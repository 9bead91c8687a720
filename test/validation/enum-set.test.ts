import { createRequire } from "node:module";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Ajv as AjvType } from "ajv";
import { compileSchema, describeValidationErrors, loadValidator, schemaProblems, validatorSource } from "../../src/validation/ajv.js";
import { inEnum } from "../../src/validation/enum-set.js";
import { fuzzParameters } from "../property/settings.js";

// enum by lookup (src/validation/enum-set.ts): ajv's own compares a value with each allowed one, and an
// enum of 5,000 names against 30,000 items held the host's thread ≈ 0.5 s a call (44 s at 7 MB).

const require = createRequire(import.meta.url);
/** ajv as it comes: the verdicts and error shape the host's keyword keeps. */
const plainAjv = (): AjvType => new (require("ajv") as { Ajv: typeof AjvType }).Ajv({ allErrors: true, strict: true });

describe("enum by lookup", () => {
  it("agrees with ajv's own enum on any JSON values, compiled here and as cached code", () => {
    const json = fc.jsonValue({ maxDepth: 2 });
    fc.assert(
      fc.property(fc.array(json, { minLength: 1, maxLength: 6 }), json, fc.boolean(), (allowed, value, pickOne) => {
        const candidate = pickOne ? allowed[0] : value;
        const schema = { type: "object", properties: { v: { enum: allowed } } };
        let expected: boolean;
        try {
          expected = plainAjv().compile(schema)({ v: candidate });
        } catch {
          // ajv's own enum throws on an object with a "toString" (or "valueOf") member that is not a function
          // (fast-deep-equal calls it); the lookup has no such case.
          return fc.pre(false);
        }
        const here = compileSchema(schema);
        expect(here({ v: candidate })).toBe(expected);
        expect(loadValidator(validatorSource(here))({ v: candidate })).toBe(expected);
        expect(inEnum(allowed, candidate)).toBe(expected);
      }),
      fuzzParameters(200),
    );
  });

  it("keeps ajv's error and its message", () => {
    const validate = compileSchema({ type: "object", properties: { unit: { enum: ["m", "km"] } } });
    expect(validate({ unit: "mi" })).toBe(false);
    expect(validate.errors?.[0]).toMatchObject({
      keyword: "enum",
      params: { allowedValues: ["m", "km"] },
      message: "must be equal to one of the allowed values",
    });
    expect(describeValidationErrors(validate.errors)).toEqual(['"unit" must be one of ["m","km"]']);
    // Schemas are still checked against the meta-schema's own enums.
    expect(schemaProblems({ type: "objekt" }).join()).toMatch(/type/);
  });

  it("enum_scan: 30,000 items against 5,000 names are checked by lookup, with ajv's verdicts", () => {
    const names = Array.from({ length: 5_000 }, (_, i) => `name${i}`);
    const validate = compileSchema({ type: "object", properties: { picks: { type: "array", items: { enum: names } } } });
    const picks = Array.from({ length: 30_000 }, (_, i) => `name${(i * 7) % 5_000}`);
    expect(validate({ picks })).toBe(true);
    expect(validate({ picks: [...picks, "nobody"] })).toBe(false);
  });
});
