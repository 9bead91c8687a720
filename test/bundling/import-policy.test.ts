import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type BuildResult, ToolBundler } from "../../src/bundling/bundler.js";
import { TOOL_API_EXPORTS } from "../../src/contract/tool-api.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { type TestHost, installFixtures, okOutput, useTestHost } from "../helpers/tools.js";

/**
 * The import policy (docs/design.md §3): relative files inside the tool's own folder and `@animaworks/tool`,
 * nothing else, and every refusal names the import and why.
 */
describe("import policy", () => {
  let data: TempDataDir;
  let folder: string;
  let bundler: ToolBundler;

  beforeEach(() => {
    data = makeDataDir();
    folder = join(data.dir, "animas", "alice", "tools");
    installFixtures("imports", folder);
    bundler = new ToolBundler(join(data.dir, "cache"));
  });
  afterEach(() => data.cleanup());

  const build = (file: string): Promise<BuildResult> => bundler.build({ path: join(folder, file), folder, displayName: `personal/${file}` });

  async function refusal(file: string): Promise<string> {
    const result = await build(file);
    if (result.ok) throw new Error(`${file} was built, but should have been refused`);
    expect(result.error.type).toBe("LoadError");
    expect(result.error.message).toMatch(new RegExp(`^personal/${file.replace(".", "\\.")} could not be built: `));
    return result.error.message;
  }

  const GUIDANCE = 'Tools may import only relative files in their own folder and "@animaworks/tool"';

  it.each([
    ["imp_node_fs.ts", 'import "node:fs" is not allowed: Node built-ins are not available in the sandbox'],
    ["imp_fs.ts", 'import "fs" is not allowed: Node built-ins are not available in the sandbox'],
    ["imp_require_fs.js", 'import "fs" is not allowed: Node built-ins are not available in the sandbox'],
    ["imp_lodash.ts", 'import "lodash" is not allowed: npm packages are not available in the sandbox'],
    ["imp_scoped.ts", 'import "@acme/schema" is not allowed: npm packages are not available in the sandbox'],
    ["imp_url.ts", 'import "https://example.com/evil.js" is not allowed: URL imports are not allowed'],
    ["imp_absolute.ts", 'import "/etc/hostname" is not allowed: absolute paths are not allowed'],
  ])("refuses %s, naming the import and why", async (file, expected) => {
    const message = await refusal(file);
    expect(message).toContain(expected);
    expect(message).toContain(GUIDANCE);
    expect(message).toMatch(new RegExp(`${file.replace(".", "\\.")}:\\d+:\\d+: `)); // with its location
  });

  it("refuses a ../ import out of the folder, whether or not the target exists", async () => {
    expect(await refusal("imp_escape.ts")).toContain('import "../outside" leaves the tool\'s folder; tools may import only files in their own folder');
    data.write("animas/alice/outside.ts", 'export const secret = "alice\'s notes";\n');
    expect(await refusal("imp_escape.ts")).toContain('import "../outside" leaves the tool\'s folder');
  });

  it("refuses a helper that is a symlink to a file outside the folder", async () => {
    const outside = data.write("elsewhere/_secret.ts", 'export const secret = "host file";\n');
    symlinkSync(outside, join(folder, "_link.ts"));
    writeFileSync(
      join(folder, "via_link.ts"),
      'import { secret } from "./_link";\nexport function get_tool_schemas() { return [{ name: "via_link_x" }]; }\nexport function dispatch() { return secret; }\n',
    );
    expect(await refusal("via_link.ts")).toContain('import "./_link" leaves the tool\'s folder');
  });

  it("refuses a sub-folder that is a symlink to a folder outside", async () => {
    mkdirSync(join(data.dir, "elsewhere"), { recursive: true });
    data.write("elsewhere/_x.ts", 'export const x = "outside";\n');
    symlinkSync(join(data.dir, "elsewhere"), join(folder, "linked_dir"));
    writeFileSync(
      join(folder, "via_dir.ts"),
      'import { x } from "./linked_dir/_x";\nexport function get_tool_schemas() { return [{ name: "via_dir_x" }]; }\nexport function dispatch() { return x; }\n',
    );
    expect(await refusal("via_dir.ts")).toContain('import "./linked_dir/_x" leaves the tool\'s folder');
  });

  it("refuses a tool file that is itself a symlink to a file outside the folder", async () => {
    const outside = data.write(
      "elsewhere/tool.ts",
      'export function get_tool_schemas() { return [{ name: "linked_x" }]; }\nexport function dispatch() { return 1; }\n',
    );
    symlinkSync(outside, join(folder, "linked.ts"));
    const result = await build("linked.ts");
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error.message).toBe("personal/linked.ts is a link to a file outside its tools folder");
  });

  it("allows a symlink that stays inside the folder", async () => {
    symlinkSync(join(folder, "_strings.ts"), join(folder, "_alias.ts"));
    writeFileSync(
      join(folder, "via_alias.ts"),
      'import { shout } from "./_alias";\nexport function get_tool_schemas() { return [{ name: "via_alias_x" }]; }\nexport function dispatch() { return shout("ok"); }\n',
    );
    expect((await build("via_alias.ts")).ok).toBe(true);
  });

  it("refuses run-time loading: import() and require() of a computed name", async () => {
    const dynamic = await refusal("imp_dynamic.ts");
    expect(dynamic).toContain('This "import" expression will not be bundled because the argument is not a string literal');
    expect(dynamic).toContain("the sandbox cannot load code at run time");
    const required = await refusal("imp_require.js");
    expect(required).toContain('This call to "require" will not be bundled because the argument is not a string literal');
  });

  it("refuses URL schemes of every kind", async () => {
    for (const specifier of ["data:text/javascript,export default 1", "file:///etc/passwd"]) {
      writeFileSync(
        join(folder, "url_kind.ts"),
        `import x from ${JSON.stringify(specifier)};\nexport function get_tool_schemas() { return [{ name: "url_kind_x" }]; }\nexport function dispatch() { return x; }\n`,
      );
      expect(await refusal("url_kind.ts")).toContain(`import ${JSON.stringify(specifier)} is not allowed: URL imports are not allowed`);
    }
  });

  it("imports only code and JSON from the folder (no CSS, text or native addons)", async () => {
    for (const file of ["_style.css", "_notes.txt", "_addon.node"]) {
      writeFileSync(join(folder, file), "x");
      writeFileSync(
        join(folder, "odd_import.ts"),
        `import x from "./${file}";\nexport function get_tool_schemas() { return [{ name: "odd_import_x" }]; }\nexport function dispatch() { return String(x); }\n`,
      );
      expect(await refusal("odd_import.ts")).toContain(
        `import "./${file}" is not allowed: tools may import only .ts, .mts, .cts, .js, .mjs, .cjs and .json files`,
      );
    }
  });

  it("says when a relative import does not exist", async () => {
    // (The import must be used: TypeScript drops imports whose bindings are never used.)
    writeFileSync(
      join(folder, "missing_helper.ts"),
      'import { x } from "./_nope";\nexport function get_tool_schemas() { return [{ name: "missing_helper_x" }]; }\nexport function dispatch() { return x; }\n',
    );
    expect(await refusal("missing_helper.ts")).toContain('import "./_nope" was not found next to personal/missing_helper.ts');
  });

  it("prefers a file over a folder of the same name (./helper → helper.ts even beside helper/)", async () => {
    mkdirSync(join(folder, "_strings"));
    expect((await build("uses_helper.ts")).ok).toBe(true);
  });

  it("bundles relative helpers (a `_` file, a sub-folder, JSON) and the virtual module", async () => {
    const result = await build("uses_helper.ts");
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.bundle.code).toContain("toUpperCase"); // the helper's code is inside the bundle
    expect(result.bundle.code).toContain('"kg"');
    expect(result.bundle.displayName).toBe("personal/uses_helper.ts");

    const source = `import { ${TOOL_API_EXPORTS.join(", ")} } from "@animaworks/tool";
export function get_tool_schemas() { return [{ name: "api_user_x" }]; }
export function dispatch() { return [${TOOL_API_EXPORTS.map((name) => `typeof ${name}`).join(", ")}]; }
`;
    writeFileSync(join(folder, "api_user.ts"), source);
    expect((await build("api_user.ts")).ok).toBe(true);
  });

  it("says which names @animaworks/tool provides when a tool imports one it does not", async () => {
    writeFileSync(
      join(folder, "wants_spawn.ts"),
      'import { spawn } from "@animaworks/tool";\nexport function get_tool_schemas() { return [{ name: "wants_spawn_x" }]; }\nexport function dispatch() { return spawn("ls"); }\n',
    );
    expect(await refusal("wants_spawn.ts")).toContain(
      `wants_spawn.ts:1:10: "@animaworks/tool" has no export "spawn" (it provides: ${TOOL_API_EXPORTS.join(", ")})`,
    );
  });
});

describe("import policy through the host", () => {
  let t: TestHost;
  afterEach(async () => t?.close());

  it("runs a tool with relative helpers and reports a forbidden import as a LoadError", async () => {
    t = useTestHost();
    const folder = join(t.data.dir, "animas", "alice", "tools");
    installFixtures("imports", folder, ["uses_helper", "_strings", "_table", "lib", "imp_node_fs", "imp_dynamic"]);
    expect(okOutput(await t.host.call("alice", "uses_helper_run"))).toBe("HI!...|kg");
    const fs = await t.host.call("alice", "imp_node_fs_x");
    expect(fs).toMatchObject({ status: "error", error_type: "LoadError" });
    expect(fs.status === "error" && fs.message).toContain('import "node:fs" is not allowed');
    const listing = await t.host.list("alice");
    expect(listing.tools.find((tool) => tool.name === "imp_dynamic")?.status).toBe("error");
  });
});
