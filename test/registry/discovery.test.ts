import { mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { homedir } from "node:os";
import { afterEach, describe, expect, it, vi } from "vitest";
import { resolveConfig } from "../../src/config.js";
import { RESERVED_NAMES, discoverFolder } from "../../src/registry/discovery.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

const TOOL = "export function get_tool_schemas() { return []; }\n";

describe("discoverFolder (one tools folder)", () => {
  let data: TempDataDir;
  afterEach(() => data?.cleanup());

  function folderWith(files: string[]): string {
    data = makeDataDir();
    for (const file of files) data.write(`tools/${file}`, TOOL);
    return join(data.dir, "tools");
  }

  it("finds top-level .ts/.mts/.js/.mjs/.py files, sorted by file name, with absolute paths (ref 1, 2, 10)", async () => {
    const folder = folderWith(["zeta.ts", "alpha.js", "Mid.mjs", "beta.mts", "gamma.py"]);
    const { tools, problems } = await discoverFolder(folder, "personal");
    expect(problems).toEqual([]);
    // Code-unit order, like Python's sorted(): upper case sorts before lower case.
    expect(tools.map((t) => t.name)).toEqual(["Mid", "alpha", "beta", "gamma", "zeta"]);
    for (const tool of tools) {
      expect(tool.origin).toBe("personal");
      expect(tool.folder).toBe(folder);
      expect(tool.path.startsWith(`${folder}/`)).toBe(true);
    }
    expect(tools.find((t) => t.name === "alpha")?.path).toBe(join(folder, "alpha.js"));
  });

  it("skips helpers starting with `_`, type declarations, hidden files and other extensions (ref 1, 6)", async () => {
    const folder = folderWith(["_helper.ts", "__init__.ts", "types.d.ts", "more.d.mts", ".hidden.ts", "notes.md", "data.json", "script.pyc", "real.ts"]);
    const { tools, problems } = await discoverFolder(folder, "shared");
    expect(tools.map((t) => t.name)).toEqual(["real"]);
    expect(problems).toEqual([]);
  });

  it("finds Python tools by the same rules: not helpers (AnimaWorks' __init__.py), hidden files, folders or sub-folders", async () => {
    const folder = folderWith(["web_search.py", "__init__.py", "_helpers.py", ".hidden.py", "real.ts", "pkg/inner.py"]);
    mkdirSync(join(folder, "dir_tool.py"));
    const { tools, problems } = await discoverFolder(folder, "shared");
    expect(tools.map((t) => [t.name, t.path])).toEqual([
      ["real", join(folder, "real.ts")],
      ["web_search", join(folder, "web_search.py")],
    ]);
    expect(problems).toEqual([]);
  });

  it("does not look into sub-folders, even one named like a tool file (ref 3, 11)", async () => {
    const folder = folderWith(["top.ts", "pkg/inner.ts", "pkg/index.ts"]);
    mkdirSync(join(folder, "dir_tool.ts"));
    const { tools, problems } = await discoverFolder(folder, "core");
    expect(tools.map((t) => t.name)).toEqual(["top"]);
    expect(problems).toEqual([]);
  });

  it("returns nothing, without an error, for a missing folder (ref 7)", async () => {
    data = makeDataDir();
    await expect(discoverFolder(join(data.dir, "no", "such", "tools"), "personal")).resolves.toEqual({ tools: [], problems: [] });
  });

  it("reports invalid tool names instead of loading them (ref 12 is AS-IS in Python; names are validated here)", async () => {
    const folder = folderWith(["my-tool.ts", "a.b.ts", "1st.ts", "ok_name.ts", `${"x".repeat(65)}.ts`]);
    const { tools, problems } = await discoverFolder(folder, "personal");
    expect(tools.map((t) => t.name)).toEqual(["ok_name"]);
    expect(problems.map((p) => p.name).sort()).toEqual(["1st", "a.b", "my-tool", "x".repeat(65)]);
    const dash = problems.find((p) => p.name === "my-tool");
    expect(dash?.message).toMatch(/not a valid tool name/);
    expect(dash?.message).toMatch(/letters, digits and "_"/);
    expect(dash?.file).toBe("my-tool.ts");
  });

  it("names a refused file with its control characters escaped (file_name_fakes_report_lines)", async () => {
    // The attack: a file name that, printed raw, ends refresh's line and starts a line of its own.
    const forged = "new\nskipped  fine: looks harmless\r\u001b[2K\u202e";
    const folder = folderWith([`${forged}.ts`, `${forged}.js`, `tab\tname.ts`]);
    const { tools, problems } = await discoverFolder(folder, "personal");
    expect(tools).toEqual([]);
    for (const problem of problems) expect(`${problem.name} ${problem.message}`).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    const escaped = "new\\u000askipped  fine: looks harmless\\u000d\\u001b[2K\\u202e";
    expect(problems.map((p) => p.name).sort()).toEqual([escaped, "tab\\u0009name"]);
    expect(problems.find((p) => p.name === escaped)?.message).toBe(`more than one file defines tool "${escaped}" (${escaped}.js, ${escaped}.ts); keep one`);
    expect(problems.find((p) => p.name === "tab\\u0009name")?.message).toMatch(/^"tab\\u0009name\.ts" is not a valid tool name/);
    // `file` stays the real name: what the folder holds.
    expect(problems.find((p) => p.name === "tab\\u0009name")?.file).toBe("tab\tname.ts");
  });

  it("reports CLI command names as reserved, for every origin", async () => {
    const folder = folderWith(["list.ts", "submit.js", "audit.ts", "lister.ts"]);
    for (const origin of ["core", "shared", "personal"] as const) {
      const { tools, problems } = await discoverFolder(folder, origin);
      expect(tools.map((t) => t.name)).toEqual(["lister"]);
      expect(problems.map((p) => p.name).sort()).toEqual(["audit", "list", "submit"]);
      for (const problem of problems) expect(problem.message).toMatch(/animaworks-tool command and cannot be a tool name/);
    }
    // The set is the CLI's management commands (docs/design.md §4).
    for (const name of ["list", "describe", "refresh", "share", "validate", "submit", "jobs", "serve", "mcp", "audit"]) {
      expect(RESERVED_NAMES.has(name)).toBe(true);
    }
  });

  it("refuses two files with the same stem and loads neither", async () => {
    const folder = folderWith(["twin.ts", "twin.js", "solo.ts"]);
    const { tools, problems } = await discoverFolder(folder, "personal");
    expect(tools.map((t) => t.name)).toEqual(["solo"]);
    expect(problems).toHaveLength(1);
    expect(problems[0]?.name).toBe("twin");
    expect(problems[0]?.message).toMatch(/more than one file defines tool "twin" \(twin\.js, twin\.ts\)/);
  });

  it("refuses a TypeScript and a Python file of one name alike (a tool ported to Python with its original left beside it)", async () => {
    const folder = folderWith(["port.ts", "port.py", "solo.py"]);
    const { tools, problems } = await discoverFolder(folder, "shared");
    expect(tools.map((t) => t.name)).toEqual(["solo"]);
    expect(problems).toEqual([
      { name: "port", origin: "shared", file: "port.py", message: 'more than one file defines tool "port" (port.py, port.ts); keep one' },
    ]);
  });

  it("lists a symlinked file (the bundler decides whether its target is allowed) and ignores a dangling link or a link to a folder", async () => {
    const folder = folderWith(["_real.ts"]);
    symlinkSync(join(folder, "_real.ts"), join(folder, "linked.ts"));
    symlinkSync(join(folder, "missing.ts"), join(folder, "dangling.ts"));
    mkdirSync(join(folder, "_dir"));
    symlinkSync(join(folder, "_dir"), join(folder, "to_folder.ts"));
    const { tools } = await discoverFolder(folder, "personal");
    expect(tools.map((t) => t.name)).toEqual(["linked"]);
  });
});

describe("where tools are looked for", () => {
  afterEach(() => vi.unstubAllEnvs());

  it("takes the data dir from ANIMAWORKS_DATA_DIR when set and non-empty, else ~/.animaworks (ref 14)", () => {
    vi.stubEnv("ANIMAWORKS_DATA_DIR", "/srv/aw-data");
    expect(resolveConfig().dataDir).toBe("/srv/aw-data");
    vi.stubEnv("ANIMAWORKS_DATA_DIR", "  ");
    expect(resolveConfig().dataDir).toBe(join(homedir(), ".animaworks"));
    vi.stubEnv("ANIMAWORKS_DATA_DIR", "/srv/aw-data");
    expect(resolveConfig({ dataDir: "/explicit" }).dataDir).toBe("/explicit"); // an explicit option wins
  });
});
