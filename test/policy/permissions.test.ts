import { afterEach, describe, expect, it } from "vitest";
import { loadPermissions, parsePermissionsJson, parsePermissionsMarkdown } from "../../src/policy/permissions.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { thrownToolError } from "../helpers/errors.js";

describe("permissions.json", () => {
  it("defaults to personal tools allowed and shared tools denied", () => {
    expect(parsePermissionsJson("{}").toolCreation).toEqual({ personal: true, shared: false });
  });

  it("reads AnimaWorks' shape and ignores unknown keys", () => {
    const p = parsePermissionsJson(JSON.stringify({ version: 1, file_roots: ["/"], tool_creation: { personal: false, shared: true }, other: 1 }));
    expect(p.toolCreation).toEqual({ personal: false, shared: true });
    expect(p.source).toBe("permissions.json");
  });

  it("reads allowlist entries with ports, and refuses bad ports instead of widening", () => {
    expect(parsePermissionsJson('{"sandbox":{"network":{"allow":["api.example.com:443","*.example.org:8443"]}}}').sandbox.network).toEqual({
      mode: "allowlist",
      hosts: ["api.example.com:443", "*.example.org:8443"],
    });
    for (const entry of ["api.example.com:0", "api.example.com:70000", "api.example.com:", "api.example.com:x"]) {
      expect(() => parsePermissionsJson(JSON.stringify({ sandbox: { network: { allow: [entry] } } }))).toThrow(/ports 1-65535/);
    }
  });

  it("reads the sandbox network policy", () => {
    expect(parsePermissionsJson('{"sandbox":{"network":"none"}}').sandbox.network).toEqual({ mode: "none" });
    expect(parsePermissionsJson('{"sandbox":{"network":{"allow":["API.example.com","*.example.org"]}}}').sandbox.network).toEqual({
      mode: "allowlist",
      hosts: ["api.example.com", "*.example.org"],
    });
  });

  it("fails closed on broken files, naming the file and the problem", () => {
    for (const text of ["{", "[]", '{"tool_creation":{"personal":"yes"}}', '{"tool_creation":[]}', '{"sandbox":{"network":{"allow":["a b"]}}}']) {
      const error = thrownToolError(() => parsePermissionsJson(text));
      expect(error.type).toBe("PermissionDenied");
      expect(error.message).toMatch(/^permissions\.json is invalid: /);
    }
  });

  it("does not take inherited keys as settings", () => {
    expect(parsePermissionsJson('{"__proto__":{"tool_creation":{"shared":true}}}').toolCreation.shared).toBe(false);
  });
});

describe("legacy permissions.md", () => {
  it("accepts the seed's form: ## Tool creation / - Personal tools: yes", () => {
    const p = parsePermissionsMarkdown("# Perms\n\n## Tool creation\n- Personal tools: yes\n- Shared tools: yes\n");
    expect(p.toolCreation).toEqual({ personal: true, shared: true });
  });

  it("accepts AnimaWorks' keys, any heading case, any value case", () => {
    expect(parsePermissionsMarkdown("## TOOL CREATION\n* Shared: OK\n- personal: Disabled").toolCreation).toEqual({ personal: false, shared: true });
    expect(parsePermissionsMarkdown("## ツール作成\n- 個人ツール: no\n- 共有ツール: ENABLED").toolCreation).toEqual({ personal: false, shared: true });
    expect(parsePermissionsMarkdown("### Tool Creation permissions\n- shared: true\n- shared: deny").toolCreation.shared).toBe(false);
  });

  it("only reads lines under the tool-creation heading", () => {
    const p = parsePermissionsMarkdown("## External tools\n- shared: yes\n\n## Tool creation\n- personal: no\n\n## Other\n- shared: yes");
    expect(p.toolCreation).toEqual({ personal: false, shared: false });
  });

  it("fails closed on an unknown value in the section", () => {
    const error = thrownToolError(() => parsePermissionsMarkdown("## Tool creation\n- Shared tools: maybe"));
    expect(error.type).toBe("PermissionDenied");
    expect(error.message).toContain('permissions.md is invalid: line 2: "maybe"');
  });
});

describe("loadPermissions", () => {
  let data: TempDataDir | undefined;
  afterEach(() => data?.cleanup());

  it("prefers permissions.json, then permissions.md, then defaults, and never rewrites files", async () => {
    data = makeDataDir();
    const dir = data.anima("a");
    expect((await loadPermissions(dir)).source).toBe("defaults");
    data.write("animas/a/permissions.md", "## Tool creation\n- Shared tools: yes\n");
    expect((await loadPermissions(dir)).toolCreation.shared).toBe(true);
    data.write("animas/a/permissions.json", '{"tool_creation":{"shared":false}}');
    const p = await loadPermissions(dir);
    expect(p.source).toBe("permissions.json");
    expect(p.toolCreation.shared).toBe(false);
  });
});
