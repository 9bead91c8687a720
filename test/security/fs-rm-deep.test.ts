import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FsCapability } from "../../src/capabilities/fs.js";
import { DEFAULT_FS_LIMITS } from "../../src/fs-limits.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * Attack: a recursive fs.rm of a tree hundreds of levels deep. Removal held one descriptor per level, so
 * a 604-level tree (sunk by renames before they were bounded; trees put there by other means can still
 * be that deep) failed with EMFILE under `ulimit -n 400`, and at a lower limit starves the host's other
 * calls of descriptors. Removal now holds at most the path depth limit's worth, whatever the depth.
 */
const MAX_HELD = DEFAULT_FS_LIMITS.maxPathDepth;
/** Descriptors the test's own process may open meanwhile (vitest's channels, the removal's parent folder). */
const SLACK = 8;

/** The most descriptors this process held while `work` ran, sampled on every turn of the event loop. */
async function mostDescriptorsDuring(work: () => Promise<void>): Promise<number> {
  const count = (): number => readdirSync("/proc/self/fd").length;
  let most = count();
  let running = true;
  const sample = (): void => {
    if (!running) return;
    most = Math.max(most, count());
    setImmediate(sample);
  };
  sample();
  try {
    await work();
  } finally {
    running = false;
  }
  return most;
}

let data: TempDataDir;
afterEach(() => data.cleanup());

describe("recursive rm of a very deep tree (descriptor exhaustion)", () => {
  it("removes a 604-level tree holding at most the depth limit's descriptors; the rest of the folder is untouched and the Anima keeps working", async () => {
    data = makeDataDir({ "animas/eve2/secret.txt": "eve2's secret" });
    const eve = data.anima("eve");
    const deepest = join(eve, ...Array.from({ length: 604 }, () => "d"));
    mkdirSync(deepest, { recursive: true });
    writeFileSync(join(deepest, "bottom.txt"), "x");
    writeFileSync(join(eve, "d", "d", "side.txt"), "x"); // files along the way are removed too
    writeFileSync(join(eve, "keep.txt"), "kept");
    const fs = new FsCapability(eve);
    const before = readdirSync("/proc/self/fd").length;
    const most = await mostDescriptorsDuring(() => fs.rm("d", true));
    expect(most - before).toBeLessThanOrEqual(MAX_HELD + SLACK);
    expect(existsSync(join(eve, "d"))).toBe(false);
    expect(readdirSync(eve).sort()).toEqual(["keep.txt", "tools"]);
    expect(readFileSync(join(data.dir, "animas", "eve2", "secret.txt"), "utf8")).toBe("eve2's secret");
    await fs.writeFile("after.txt", "still serving");
    expect(await fs.readFile("after.txt")).toBe("still serving");
  });

  it("removes a tree at the maximum depth tools can make", async () => {
    data = makeDataDir();
    const eve = data.anima("eve");
    const fs = new FsCapability(eve);
    const chain = Array.from({ length: MAX_HELD - 1 }, () => "n").join("/");
    await fs.mkdir(chain);
    await fs.writeFile(`${chain}/bottom.txt`, "x"); // MAX_HELD levels: as deep as a path may be
    const before = readdirSync("/proc/self/fd").length;
    const most = await mostDescriptorsDuring(() => fs.rm("n", true));
    expect(most - before).toBeLessThanOrEqual(MAX_HELD + SLACK);
    expect(readdirSync(eve)).toEqual(["tools"]);
  });
});
