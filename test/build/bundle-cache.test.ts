import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type BuildResult, ToolBundler } from "../../src/build/bundler.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { installFixtures } from "../helpers/tools.js";

/** Bundles are cached on disk by content; a record is trusted only while every input file is unchanged. */
describe("bundle cache", () => {
  let data: TempDataDir;
  let folder: string;
  let cacheDir: string;

  beforeEach(() => {
    data = makeDataDir();
    folder = join(data.dir, "common_tools");
    cacheDir = join(data.dir, "cache");
    installFixtures("imports", folder, ["uses_helper", "_strings", "_table", "lib"]);
  });
  afterEach(() => data.cleanup());

  const source = { get path() { return join(folder, "uses_helper.ts"); }, get folder() { return folder; }, displayName: "shared/uses_helper.ts" };

  function ok(result: BuildResult) {
    if (!result.ok) throw new Error(result.error.message);
    return result;
  }

  it("writes one record per tool and serves it to a new bundler (a new process) without rebuilding", async () => {
    const first = ok(await new ToolBundler(cacheDir).build(source));
    expect(first.fromCache).toBe(false);
    const records = readdirSync(cacheDir).filter((f) => f.endsWith(".bundle.json"));
    expect(records).toHaveLength(1);
    const record = JSON.parse(readFileSync(join(cacheDir, records[0]!), "utf8")) as { inputs: Array<{ path: string }> };
    // Every file the bundle was made from is recorded, helpers included.
    expect(record.inputs.map((i) => i.path.slice(i.path.lastIndexOf("/") + 1)).sort()).toEqual(["_pad.ts", "_strings.ts", "_table.json", "uses_helper.ts"]);

    const second = ok(await new ToolBundler(cacheDir).build(source));
    expect(second.fromCache).toBe(true);
    expect(second.bundle.hash).toBe(first.bundle.hash);
    expect(second.bundle.code).toBe(first.bundle.code);
  });

  it("rebuilds when an imported helper changes, even though the tool file did not", async () => {
    const first = ok(await new ToolBundler(cacheDir).build(source));
    writeFileSync(join(folder, "lib", "_pad.ts"), 'export function pad(text: string, width: number): string {\n  return text.padStart(width, "*");\n}\n');
    const second = ok(await new ToolBundler(cacheDir).build(source));
    expect(second.fromCache).toBe(false);
    expect(second.bundle.hash).not.toBe(first.bundle.hash);
    expect(second.bundle.code).toContain("padStart");
    expect(ok(await new ToolBundler(cacheDir).build(source)).fromCache).toBe(true);
  });

  it("rebuilds (and reports the error) when a helper was deleted", async () => {
    ok(await new ToolBundler(cacheDir).build(source));
    rmSync(join(folder, "_strings.ts"));
    const result = await new ToolBundler(cacheDir).build(source);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error.message).toContain('import "./_strings" was not found');
  });

  it("ignores a corrupt or tampered record", async () => {
    const first = ok(await new ToolBundler(cacheDir).build(source));
    const file = join(cacheDir, readdirSync(cacheDir).find((f) => f.endsWith(".bundle.json"))!);
    const record = JSON.parse(readFileSync(file, "utf8")) as { bundle: { code: string } };
    record.bundle.code += "\nglobalThis.injected = true;";
    writeFileSync(file, JSON.stringify(record));
    const second = ok(await new ToolBundler(cacheDir).build(source));
    expect(second.fromCache).toBe(false);
    expect(second.bundle.code).toBe(first.bundle.code);
    writeFileSync(file, "{ not json");
    expect(ok(await new ToolBundler(cacheDir).build(source)).fromCache).toBe(false);
  });

  it("still builds when the cache folder cannot be written", async () => {
    writeFileSync(join(data.dir, "blocked"), "a file where the cache folder should be");
    const result = ok(await new ToolBundler(join(data.dir, "blocked", "cache")).build(source));
    expect(result.fromCache).toBe(false);
    expect(result.bundle.code).toContain("toUpperCase");
  });
});
