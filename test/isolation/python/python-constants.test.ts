import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_FETCH_LIMITS } from "../../../src/capabilities/fetch.js";
import { PROJECT_ROOT } from "../../../src/project-root.js";

/** Figures the Python runtime keeps as its own constants are the host's (sandbox/python/ cannot import them). */
describe("the Python runtime's constants", () => {
  it("bounds an httpx or urllib timeout at the fetch capability's longest (a longer one would be refused)", () => {
    const source = readFileSync(join(PROJECT_ROOT, "sandbox", "python", "httpx.py"), "utf8");
    const bound = /^MAX_FETCH_TIMEOUT_MS = ([\d_]+)$/m.exec(source)?.[1];
    expect(Number(bound?.replace(/_/g, ""))).toBe(DEFAULT_FETCH_LIMITS.maxTimeoutMs);
    expect(readFileSync(join(PROJECT_ROOT, "sandbox", "python", "_animaworks_runtime.py"), "utf8")).toContain("min(MAX_FETCH_TIMEOUT_MS,");
  });
});
