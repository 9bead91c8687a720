import { describe, expect, it } from "vitest";
import { loadFindings } from "../../src/lifecycle/load-findings.js";
import { findingLocation } from "../../src/lifecycle/findings.js";

describe("loadFindings: a load's problem as validate findings", () => {
  it("splits a build failure into one finding per located error, the place out of the message", () => {
    const problem = 'personal/x.ts could not be built: x.ts:3:7: Unexpected ";"; _lib.ts:1:2: Expected "}" but found ";" (and 2 more)';
    expect(loadFindings(problem, ["x.ts"])).toEqual([
      { level: "error", check: "load", line: 3, column: 7, message: 'build error: Unexpected ";"' },
      { level: "error", check: "load", line: 1, column: 2, file: "_lib.ts", message: 'build error: Expected "}" but found ";"' },
      { level: "error", check: "load", message: "2 more build errors, shown once these are fixed" },
    ]);
  });

  it("keeps any other problem whole, without a place", () => {
    expect(loadFindings("x: EXECUTION_PROFILE.y is not an object", ["x.ts"])).toEqual([
      { level: "error", check: "load", message: "x: EXECUTION_PROFILE.y is not an object" },
    ]);
    expect(loadFindings("personal/x.ts could not be built", ["x.ts"])).toEqual([
      { level: "error", check: "load", message: "personal/x.ts could not be built" },
    ]);
  });

  it("prints a location as path:line:col, a helper's beside the file", () => {
    expect(findingLocation("tools/x.ts", { level: "error", check: "load", line: 3, column: 7, message: "m" })).toBe("tools/x.ts:3:7");
    expect(findingLocation("tools/x.ts", { level: "error", check: "load", line: 3, message: "m" })).toBe("tools/x.ts:3");
    expect(findingLocation("tools/x.ts", { level: "error", check: "load", line: 1, column: 2, file: "_lib.ts", message: "m" })).toBe("tools/_lib.ts:1:2");
    expect(findingLocation("tools/x.ts", { level: "error", check: "load", message: "m" })).toBe("tools/x.ts");
  });
});
