import { readdirSync } from "node:fs";
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
