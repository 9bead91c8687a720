import { copyFileSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { hostFromConfig } from "../../src/host.js";
import { hostLoader, scratchLoader } from "../../src/lifecycle/load-check.js";
import { shareTool } from "../../src/lifecycle/share.js";
import { errorsForShare, formatValidation, validateToolFile } from "../../src/lifecycle/validate.js";
import { writeMemoryFile } from "../../src/lifecycle/write-memory.js";
import { type TestHost, REPO_ROOT, okOutput, simpleTool, useTestHost } from "../helpers/tools.js";

// Real loads: bundle with esbuild and describe in an isolate (in this process). Needs `npm run build`.
const FIXTURES = join(REPO_ROOT, "test", "fixtures", "lifecycle");
const fixture = (file: string): string => join(FIXTURES, file);

describe("scratchLoader: any file, loaded in a throwaway host", () => {
  let t: TestHost;
  beforeEach(() => {
    t = useTestHost(); // only for its temporary folders: an empty core tools folder and a temp dir
  });
  afterEach(() => t.close());

  it("loads good tools, resolving helpers beside them, and writes nothing next to the file", async () => {
    const before = readdirSync(FIXTURES).sort();
    const load = scratchLoader({ hostFactory: hostFromConfig, coreToolsDir: t.coreDir, tempDir: t.data.dir });
    for (const file of ["good_tool.ts", "named_handlers.mjs", "cjs_tool.js", "uses_helper.ts"]) {
      const report = await validateToolFile(fixture(file), { load });
      expect(report.loaded, file).toBe(true);
      expect(report.findings, file).toEqual([]);
      expect(formatValidation(report).text).toMatch(/OK, no problems found \(loaded in the sandbox\)$/);
    }
    expect(readdirSync(FIXTURES).sort()).toEqual(before);
    expect(readdirSync(t.data.dir).filter((entry) => entry.startsWith("awt-validate-"))).toEqual([]); // scratch dirs removed
  });

  it("reports what only a real load finds: a throwing top level, a missing handler behind computed schemas", async () => {
    const load = scratchLoader({ hostFactory: hostFromConfig, coreToolsDir: t.coreDir, tempDir: t.data.dir });
    const throwing = await validateToolFile(fixture("throws_at_load.ts"), { load });
    expect(throwing.loaded).toBe(false);
    expect(throwing.findings).toMatchObject([{ level: "error", check: "load", message: expect.stringContaining("configuration missing at load time") }]);
    const dynamic = await validateToolFile(fixture("dynamic_schemas.ts"), { load });
    expect(dynamic.findings).toMatchObject([{ level: "error", check: "load", message: expect.stringContaining("no handler for dynamic_schemas_b") }]);
    expect(formatValidation(dynamic).exitCode).toBe(6);
  });

  it("reports a tool shadowed by a core tool of the same name", async () => {
    t.core("good_tool.ts", simpleTool("good_tool"));
    const report = await validateToolFile(fixture("good_tool.ts"), {
      load: scratchLoader({ hostFactory: hostFromConfig, coreToolsDir: t.coreDir, tempDir: t.data.dir }),
    });
    expect(report.findings).toMatchObject([
      { check: "load", message: 'a core tool named "good_tool" takes precedence, so this file would never be used; rename it' },
    ]);
  });

  it("loads a file under another tool name (its helpers still resolve), and without core tools when asked", async () => {
    const load = scratchLoader({ hostFactory: hostFromConfig, coreToolsDir: t.coreDir, tempDir: t.data.dir });
    // uses_helper.ts declares uses_helper_run: as tool "shouter" that schema no longer fits the name.
    expect(await load(fixture("uses_helper.ts"), "uses_helper")).toEqual({ ok: true, problems: [], schemas: ["uses_helper_run"] });
    expect((await load(fixture("uses_helper.ts"), "shouter")).problems).toEqual([
      'shouter: schema "uses_helper_run" must be named shouter_<action> (the file is shouter; e.g. shouter_query)',
    ]);
    // coreToolsDir null: a core tool of the same name does not hide the file, which is loaded itself.
    t.core("good_tool.ts", simpleTool("good_tool"));
    expect(await scratchLoader({ hostFactory: hostFromConfig, coreToolsDir: null, tempDir: t.data.dir })(fixture("good_tool.ts"))).toEqual({
      ok: true,
      problems: [],
      schemas: ["good_tool_action"],
    });
  });
});

describe("hostLoader and the write → validate → share → use lifecycle", () => {
  let t: TestHost;
  let alice: string;
  beforeEach(() => {
    t = useTestHost();
    alice = t.data.anima("alice");
    t.data.anima("bob");
    t.data.write("animas/alice/permissions.json", JSON.stringify({ tool_creation: { personal: true, shared: true } }));
  });
  afterEach(() => t.close());

  it("checks a file as it is now, in the folder it is in", async () => {
    const load = hostLoader(t.host);
    const path = join(alice, "tools", "my_tool.ts");
    await writeMemoryFile({ animaDir: alice, path: "tools/my_tool.ts", content: simpleTool("my_tool") });
    expect(await load(path)).toEqual({ ok: true, problems: [], schemas: ["my_tool_run"] });
    await writeMemoryFile({ animaDir: alice, path: "tools/my_tool.ts", content: `${simpleTool("my_tool")}\nthrow new Error("broken on purpose");\n` });
    const broken = await load(path);
    expect(broken.ok).toBe(false);
    expect(broken.problems.join("\n")).toContain("broken on purpose");
    // Files the host would not load as tools say why.
    await writeMemoryFile({ animaDir: alice, path: "tools/list.ts", content: simpleTool("list") });
    expect((await load(join(alice, "tools", "list.ts"))).problems).toEqual(['"list" is an animaworks-tool command and cannot be a tool name; rename the file']);
    expect((await load(fixture("good_tool.ts"))).problems[0]).toMatch(/not in a tools folder of the host's data dir/);
    // It is loaded under its own name only: another name is a draft's (scratchLoader).
    expect((await load(path, "other_tool")).problems).toEqual([
      'the host loads this file as tool "my_tool", not "other_tool"; check it as a draft outside the tools folder',
    ]);
  });

  it("a shared tool passes validation with a real load, and another Anima can use it", async () => {
    copyFileSync(fixture("good_tool.ts"), join(alice, "tools", "good_tool.ts"));
    const validate = errorsForShare({ load: hostLoader(t.host) });
    expect(await shareTool({ dataDir: t.data.dir, animaDir: alice, anima: "alice", toolName: "good_tool", validate })).toBe(
      "Shared tool 'good_tool' to common_tools/. All animas can now use it after refresh_tools.",
    );
    t.host.refresh();
    expect(await t.host.describe("bob", "good_tool")).toMatchObject({ origin: "shared", status: "ok" });
    expect(JSON.parse(okOutput(await t.host.call("bob", "good_tool_action", { param1: "x" })))).toMatchObject({ result: "Processed x with 10" });
    // And the shared copy loads on its own too.
    expect(await hostLoader(t.host)(join(t.data.dir, "common_tools", "good_tool.ts"))).toEqual({ ok: true, problems: [], schemas: ["good_tool_action"] });
  });

  it("a tool that fails its real load or the static checks is not shared", async () => {
    mkdirSync(join(alice, "tools"), { recursive: true });
    copyFileSync(fixture("throws_at_load.ts"), join(alice, "tools", "throws_at_load.ts"));
    const validate = errorsForShare({ load: hostLoader(t.host) });
    const share = (toolName: string) => shareTool({ dataDir: t.data.dir, animaDir: alice, anima: "alice", toolName, validate });
    await expect(share("throws_at_load")).rejects.toMatchObject({ type: "LoadError", message: expect.stringContaining("[load]") });
    await writeMemoryFile({ animaDir: alice, path: "tools/leaky.ts", content: `const api_key = "hunter2hunter2";\n${simpleTool("leaky")}` });
    await expect(share("leaky")).rejects.toMatchObject({
      type: "LoadError",
      message: expect.stringMatching(/\[secrets\] line 1: "api_key" is set to a literal \("hunt\*\*\*\*"\)/),
    });
    expect(readdirSync(t.data.dir)).not.toContain("common_tools");
  });
});
