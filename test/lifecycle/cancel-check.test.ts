import { describe, expect, it } from "vitest";
import { validateSource } from "../../src/lifecycle/validate.js";

// isCancelled() is a plain boolean: `if (isCancelled())` and `await isCancelled()` are right; a draft
// still written for the Promise it once was (`isCancelled().then(…)`) would fail when its job runs.

const SCHEMAS = 'export function get_tool_schemas() { return [{ name: "t_run", description: "Runs.", input_schema: { type: "object", properties: {} } }]; }';

function cancellationFindings(lines: string[]): string[] {
  const source = ['import { isCancelled, sleep } from "@animaworks/tool";', SCHEMAS, ...lines].join("\n");
  return validateSource("t.ts", source)
    .filter((f) => f.check === "cancellation")
    .map((f) => `${f.level} ${f.line}:${f.column} ${f.message}`);
}

describe("validate: isCancelled() used as a Promise", () => {
  it("warns at .then/.catch/.finally on it, and nowhere else", () => {
    expect(
      cancellationFindings([
        /* 3 */ "export async function dispatch() {",
        /* 4 */ "  if (isCancelled()) return 'stopped';",
        /* 5 */ "  if (await isCancelled()) return 'stopped';",
        /* 6 */ "  isCancelled().then((c) => c);",
        /* 7 */ "  // isCancelled().then(…) in a comment, and in a string:",
        /* 8 */ "  const text = 'isCancelled().then(x)';",
        /* 9 */ "  return isCancelled()?.finally(() => 1);",
        /* 10 */ "}",
      ]),
    ).toEqual([
      "warning 6:3 isCancelled() returns a boolean, not a Promise: .then() on it fails when the job runs; write if (isCancelled()) { … }",
      "warning 9:10 isCancelled() returns a boolean, not a Promise: .finally() on it fails when the job runs; write if (isCancelled()) { … }",
    ]);
  });
});
