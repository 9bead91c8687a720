import { expect } from "vitest";
import { ToolHostError } from "../../src/errors.js";

/** The `ToolHostError` that `fn` throws (the test fails if it throws nothing or something else). */
export function thrownToolError(fn: () => unknown): ToolHostError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ToolHostError);
    return error as ToolHostError;
  }
  throw new Error("expected a ToolHostError");
}
