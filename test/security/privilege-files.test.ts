import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/data-dir.js";
import { type Harness, assertNoLeak, expectError, expectHealthy, startHost } from "./harness.js";
import { auditRecords } from "../helpers/audit-files.js";

/**
 * A tool must not grant its Anima a capability by writing a file whose presence AnimaWorks reads as a
 * grant (skills/newstaff → create_anima). The denial is a PermissionDenied, audited, and nothing is left.
 */
describe("privilege files", () => {
  let h: Harness;
  beforeAll(() => {
    h = startHost({ mode: "process", timeoutMs: 3_000 });
    h.install("mallory", "grants_create_anima");
  });
  afterAll(() => h.close());

  it.each(["grants_create_anima_write", "grants_create_anima_rename"])("%s: PermissionDenied, audited, nothing planted", async (schema) => {
    const result = await h.call("mallory", schema);
    expectError(result, "PermissionDenied", /create_anima/);
    assertNoLeak(result, h.data);
    const skills = join(h.data.dir, "animas", "mallory", "skills");
    expect(existsSync(join(skills, "newstaff"))).toBe(false);
    expect(existsSync(join(skills, "newstaff.md"))).toBe(false);
    const denials = () =>
      auditRecords(join(h.data.dir, "logs", "animaworks-tool", "audit")).filter(
        (r) => r["anima"] === "mallory" && r["outcome"] === "denied" && String(r["target"]).includes("newstaff"),
      );
    await waitFor(() => denials().length > 0, 2_000);
    await expectHealthy(h, "mallory");
  });
});
