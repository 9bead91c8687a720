import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_FS_LIMITS, FsCapability } from "../../src/capabilities/fs.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/** readFile decodes chunk by chunk: characters and base64 groups split across chunks come out whole. */
describe("readFile decodes across chunk boundaries", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it.each([0, 1, 2, 3, 256 * 1024 - 1, 256 * 1024, 256 * 1024 + 1, 3 * 256 * 1024 + 2])("%i bytes of mixed text, as UTF-8 and base64", async (size) => {
    data = makeDataDir();
    const alice = data.anima("alice");
    const text = "aé😀€".repeat(Math.ceil(size / 10) + 1);
    const bytes = Buffer.from(text).subarray(0, size);
    writeFileSync(join(alice, "f.bin"), bytes);
    const fs = new FsCapability(alice, DEFAULT_FS_LIMITS);
    expect(await fs.readFile("f.bin", "utf8")).toBe(bytes.toString("utf8"));
    expect(await fs.readFile("f.bin", "base64")).toBe(bytes.toString("base64"));
  });
});
