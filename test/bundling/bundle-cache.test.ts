import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type BuildResult, ToolBundler } from "../../src/bundling/bundler.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { installFixtures } from "../helpers/tools.js";

/**
 * Bundles are cached on disk, one record per tool; a record is trusted only while every input file is
 * unchanged: by its status once settled, else by its content.
 */
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

  const source = {
    get path() {
      return join(folder, "uses_helper.ts");
    },
    get folder() {
      return folder;
    },
    displayName: "shared/uses_helper.ts",
  };

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
    const file = join(
      cacheDir,
      readdirSync(cacheDir).find((f) => f.endsWith(".bundle.json"))!,
    );
    const record = JSON.parse(readFileSync(file, "utf8")) as { bundle: { code: string } };
    record.bundle.code += "\nglobalThis.injected = true;";
    writeFileSync(file, JSON.stringify(record));
    const second = ok(await new ToolBundler(cacheDir).build(source));
    expect(second.fromCache).toBe(false);
    expect(second.bundle.code).toBe(first.bundle.code);
    writeFileSync(file, "{ not json");
    expect(ok(await new ToolBundler(cacheDir).build(source)).fromCache).toBe(false);
  });

  function recordFile(): string {
    return join(
      cacheDir,
      readdirSync(cacheDir).find((f) => f.endsWith(".bundle.json"))!,
    );
  }

  /** Rewrites the record so that it claims other content for every input, keeping their status. */
  function falsifyRecordedContent(): void {
    const record = JSON.parse(readFileSync(recordFile(), "utf8")) as { inputs: Array<{ sha256: string }> };
    for (const input of record.inputs) input.sha256 = "0".repeat(64);
    writeFileSync(recordFile(), JSON.stringify(record));
  }

  it("trusts an input whose status is as recorded and settled, without reading it", async () => {
    ok(await new ToolBundler(cacheDir, { racyWindowMs: 0 }).build(source));
    falsifyRecordedContent();
    // Status unchanged and not racy: the (falsified) content hashes are never consulted.
    expect(ok(await new ToolBundler(cacheDir, { racyWindowMs: 0 }).build(source)).fromCache).toBe(true);
  });

  it("checks by content an input changed close to when its record was written (same-tick edits)", async () => {
    ok(await new ToolBundler(cacheDir).build(source));
    falsifyRecordedContent();
    // Within the racy window the status alone is not believed: the content decides, and differs.
    expect(ok(await new ToolBundler(cacheDir).build(source)).fromCache).toBe(false);
  });

  it("sees an in-place edit of the same size made right after the build", async () => {
    const first = ok(await new ToolBundler(cacheDir).build(source));
    const helper = join(folder, "lib", "_pad.ts");
    const text = readFileSync(helper, "utf8");
    const edited = text.replace('"."', '"*"');
    expect(edited).not.toBe(text);
    writeFileSync(helper, edited); // same size, same inode, possibly the same timestamp tick
    const second = await new ToolBundler(cacheDir).build(source);
    expect(second.ok && second.fromCache).toBe(false);
    expect(second.ok && second.bundle.hash).not.toBe(first.bundle.hash);
  });

  it("writes a record again after checking it by content, so that it settles", async () => {
    ok(await new ToolBundler(cacheDir).build(source));
    const before = (JSON.parse(readFileSync(recordFile(), "utf8")) as { recordedAtMs: number }).recordedAtMs;
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(ok(await new ToolBundler(cacheDir).build(source)).fromCache).toBe(true); // racy: read and verified
    const after = (JSON.parse(readFileSync(recordFile(), "utf8")) as { recordedAtMs: number }).recordedAtMs;
    expect(after).toBeGreaterThan(before);
  });

  it("still builds when the cache folder cannot be written", async () => {
    writeFileSync(join(data.dir, "blocked"), "a file where the cache folder should be");
    const result = ok(await new ToolBundler(join(data.dir, "blocked", "cache")).build(source));
    expect(result.fromCache).toBe(false);
    expect(result.bundle.code).toContain("toUpperCase");
  });
});
