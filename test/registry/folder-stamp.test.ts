import * as fs from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { FolderFreshness } from "../../src/endpoint/invocation-host.js";
import { createHost } from "../../src/host.js";
import { MAX_STAMP_ENTRIES, folderStamp } from "../../src/registry/folder-stamp.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { simpleTool } from "../helpers/tools.js";

// Counts the directory entries handed to the stamp, however it reads them.
const read = vi.hoisted(() => ({ entries: 0 }));
vi.mock("node:fs", async (importOriginal) => {
  const original = await importOriginal<typeof import("node:fs")>();
  const readdirSync = ((...args: Parameters<typeof original.readdirSync>) => {
    const entries = original.readdirSync(...args);
    read.entries += entries.length;
    return entries;
  }) as typeof original.readdirSync;
  const opendirSync = (...args: Parameters<typeof original.opendirSync>) => {
    const dir = original.opendirSync(...args);
    const readSync = dir.readSync.bind(dir);
    dir.readSync = () => {
      const entry = readSync();
      if (entry !== null) read.entries++;
      return entry;
    };
    return dir;
  };
  return { ...original, default: { ...original, readdirSync, opendirSync }, readdirSync, opendirSync };
});

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const FLOOD = 30_000;

function dataWithHugeToolsFolder(): TempDataDir {
  const data = makeDataDir({ "animas/alice/tools/alpha.ts": simpleTool("alpha"), "animas/eve/tools/evetool.ts": simpleTool("evetool") });
  cleanups.push(() => data.cleanup());
  const tools = join(data.dir, "animas/eve/tools");
  for (let i = 0; i < FLOOD; i++) fs.writeFileSync(join(tools, `f${i}.txt`), "");
  fs.mkdirSync(join(data.dir, "core-tools"));
  return data;
}

describe("stamp_huge_folder: a tools folder of very many names", () => {
  it("is read only up to the stamp's bound, not whole, before each of the daemon's calls", () => {
    const data = dataWithHugeToolsFolder();
    read.entries = 0;
    const stamp = folderStamp([join(data.dir, "animas/eve/tools")]);
    expect(read.entries).toBeLessThanOrEqual(MAX_STAMP_ENTRIES);
    expect(stamp.split("\n")).toHaveLength(MAX_STAMP_ENTRIES);
    // Within the bound, a change still shows.
    const small = join(data.dir, "animas/alice/tools");
    const before = folderStamp([small]);
    fs.writeFileSync(join(small, "beta.ts"), simpleTool("beta"));
    expect(folderStamp([small])).not.toBe(before);
  });

  it("lets the host go on serving: eve's invocations are checked within the bound, alice's calls are served", async () => {
    const data = dataWithHugeToolsFolder();
    const host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "core-tools"), isolation: "in-process", onLog: () => {} });
    cleanups.push(() => host.close());
    const freshness = new FolderFreshness(host);
    read.entries = 0;
    for (let i = 0; i < 5; i++) freshness.check("eve");
    expect(read.entries).toBeLessThanOrEqual(5 * MAX_STAMP_ENTRIES);
    expect(await host.call("eve", "evetool_run")).toMatchObject({ status: "ok" });
    freshness.check("alice");
    expect(await host.call("alice", "alpha_run")).toMatchObject({ status: "ok" });
  });

  it("stamp_shared_flood: a shared folder at the bound does not leave an Anima's own folder unstamped", () => {
    const data = makeDataDir({ "animas/alice/tools/alpha.ts": simpleTool("alpha") });
    cleanups.push(() => data.cleanup());
    const shared = join(data.dir, "common_tools");
    fs.mkdirSync(shared);
    for (let i = 0; i < MAX_STAMP_ENTRIES + 10; i++) fs.writeFileSync(join(shared, `s${i}.txt`), "");
    const folders = [shared, join(data.dir, "animas/alice/tools")];
    const before = folderStamp(folders);
    fs.writeFileSync(join(data.dir, "animas/alice/tools/beta.ts"), simpleTool("beta"));
    expect(folderStamp(folders)).not.toBe(before);
  });
});
