import { mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FsCapability } from "../../src/capabilities/fs.js";
import { DEFAULT_FS_LIMITS } from "../../src/fs-limits.js";
import { ToolHostError } from "../../src/errors.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * Attack: fill the entry quota with writes, then keep creating files with empty appends (which once
 * reserved no entry when they created a file) or folders. Every create counts, whatever call makes it.
 */
describe("entry quota", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it("an empty appendFile that creates a file counts as an entry; appending to an existing file does not", async () => {
    data = makeDataDir();
    const eve = data.anima("eve");
    const fs = new FsCapability(eve, { ...DEFAULT_FS_LIMITS, maxFiles: 20 });
    let refusedAt = -1;
    for (let i = 0; i < 100; i++) {
      try {
        await (i % 2 === 0 ? fs.appendFile(`a${i}.txt`, "") : fs.mkdir(`d${i}`));
      } catch (error) {
        expect(error).toBeInstanceOf(ToolHostError);
        expect((error as ToolHostError).type).toBe("PermissionDenied");
        refusedAt = i;
        break;
      }
    }
    expect(refusedAt).toBeGreaterThan(0);
    // The Anima's folder holds at most the limit (its tools/ folder included).
    expect(readdirSync(eve).length).toBeLessThanOrEqual(20);
    // Appending to a file that exists needs no new entry.
    const existing = readdirSync(eve).find((name) => name.endsWith(".txt")) as string;
    await fs.appendFile(existing, "more");
    await expect(fs.appendFile("one-more.txt", "")).rejects.toMatchObject({ type: "PermissionDenied" });
    expect(readdirSync(eve)).not.toContain("one-more.txt");
  });
});

const QUOTA_BYTES = 1024 * 1024;
const CHUNK = "x".repeat(200 * 1024);

/** What the Anima's folder really holds, walked without any depth limit: file bytes and the deepest entry's levels. */
function onDisk(dir: string): { bytes: number; deepest: number } {
  let bytes = 0;
  let deepest = 0;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name);
    deepest = Math.max(deepest, relative(dir, path).split(sep).length);
    if (entry.isFile()) bytes += statSync(path).size;
  }
  return { bytes, deepest };
}

/**
 * Attack: fill most of the quota, then move the folder holding the files under a chain of 30 folders,
 * and that chain under another, again and again (every path the tool names stays within 32 levels).
 * Past the quota walk's 256 levels the files were no longer measured: 9.2 MB stored against 1 MiB.
 */
describe("quota: files sunk deeper than tools can name (deep renames)", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it("refuses to rename a folder deeper than the path limit; nothing is stored past the quota, and the Anima keeps working", async () => {
    data = makeDataDir();
    const eve = data.anima("eve");
    const fs = new FsCapability(eve, { ...DEFAULT_FS_LIMITS, quotaBytes: QUOTA_BYTES });
    await fs.mkdir("p");
    for (let i = 0; i < 4; i++) await fs.writeFile(`p/f${i}`, CHUNK);
    let top = "p";
    let refused: unknown;
    for (let k = 0; k < 12 && refused === undefined; k++) {
      const chain = Array.from({ length: 30 }, () => `s${k}`).join("/");
      await fs.mkdir(chain);
      try {
        await fs.rename(top, `${chain}/${top}`);
        await fs.rename(`s${k}`, `u${k}`);
        top = `u${k}`;
      } catch (error) {
        refused = error;
      }
    }
    expect(refused).toBeInstanceOf(ToolHostError);
    expect((refused as ToolHostError).type).toBe("PermissionDenied");
    expect((refused as ToolHostError).message).toContain("32-level limit");
    // Every entry stays where a tool can name it, so the quota's walk measures all of it.
    expect(onDisk(eve).deepest).toBeLessThanOrEqual(DEFAULT_FS_LIMITS.maxPathDepth);
    // More writes fill the quota and no further.
    for (let i = 0; i < 10; i++) await fs.writeFile(`more${i}`, CHUNK).catch(() => undefined);
    expect(onDisk(eve).bytes).toBeLessThanOrEqual(QUOTA_BYTES);
    // The Anima keeps working: its files read back, and space freed is usable again.
    expect(await fs.readFile(["u0", ...Array.from({ length: 29 }, () => "s0"), "p", "f0"].join("/"))).toBe(CHUNK);
    await fs.rm("u0", true);
    await fs.writeFile("after.txt", CHUNK);
  });

  it("a folder nested deeper than the quota's walk (put there by other means) counts as over quota, never as one entry", async () => {
    data = makeDataDir();
    const eve = data.anima("eve");
    const sunk = join(eve, ...Array.from({ length: 300 }, () => "d"));
    mkdirSync(sunk, { recursive: true });
    writeFileSync(join(sunk, "hidden.bin"), Buffer.alloc(2 * QUOTA_BYTES));
    const fs = new FsCapability(eve, { ...DEFAULT_FS_LIMITS, quotaBytes: QUOTA_BYTES });
    const refused = await fs.writeFile("small.txt", "x").catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ToolHostError);
    expect((refused as ToolHostError).type).toBe("PermissionDenied");
    expect((refused as ToolHostError).message).toContain("nested deeper than 256 levels");
    await expect(fs.mkdir("folder")).rejects.toMatchObject({ type: "PermissionDenied" });
    expect(readdirSync(eve)).not.toContain("small.txt");
    // Removing the deep folder re-measures: the Anima may store files again.
    await fs.rm("d", true);
    await fs.writeFile("small.txt", "x");
    expect(onDisk(eve).bytes).toBe(1);
  });
});

/**
 * Attack: in one call, replace a 900 KiB file with another and, at the same time, rename it away. The
 * write credited back the old file's size, but the rename had kept those bytes under a new name: ten
 * such pairs stored 10 MB against 1 MiB. Changes to one Anima's folder now run one at a time.
 */
describe("quota: a writeFile racing a rename of the file it replaces", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it("stores no more than the quota, whatever the pairs' order; refused writes say why, and the Anima keeps working", async () => {
    data = makeDataDir();
    const eve = data.anima("eve");
    const fs = new FsCapability(eve, { ...DEFAULT_FS_LIMITS, quotaBytes: QUOTA_BYTES });
    const big = "z".repeat(900 * 1024);
    await fs.writeFile("X", big);
    const refusals: string[] = [];
    for (let k = 0; k < 10; k++) {
      const outcomes = await Promise.allSettled([fs.writeFile("X", big), fs.rename("X", `Y${k}`)]);
      for (const outcome of outcomes) {
        if (outcome.status === "fulfilled") continue;
        expect(outcome.reason).toBeInstanceOf(ToolHostError);
        refusals.push((outcome.reason as ToolHostError).type);
      }
    }
    expect(onDisk(eve).bytes).toBeLessThanOrEqual(QUOTA_BYTES);
    // Only quota refusals, and renames of a file no longer there: nothing else went wrong.
    expect(new Set(refusals)).toEqual(new Set(["PermissionDenied", "NotFound"]));
    // The Anima keeps working: after removing its files it can store them again.
    for (const name of readdirSync(eve)) if (/^[XY]/.test(name)) await fs.rm(name);
    await fs.writeFile("X", big);
    expect(onDisk(eve).bytes).toBe(big.length);
  });
});
