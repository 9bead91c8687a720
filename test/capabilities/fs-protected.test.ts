import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FsCapability } from "../../src/capabilities/fs.js";
import { DEFAULT_FS_LIMITS } from "../../src/fs-limits.js";
import { ToolHostError } from "../../src/errors.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/** Files whose presence grants a capability in AnimaWorks (the newstaff skill → create_anima). */
let data: TempDataDir;
let alice: string;
let fs: FsCapability;

beforeEach(() => {
  data = makeDataDir();
  alice = data.anima("alice");
  fs = new FsCapability(alice, DEFAULT_FS_LIMITS);
});
afterEach(() => data.cleanup());

async function refused(promise: Promise<unknown>): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, "expected a PermissionDenied").toBeInstanceOf(ToolHostError);
  expect((error as ToolHostError).type).toBe("PermissionDenied");
  expect((error as ToolHostError).message).toMatch(/create_anima/);
}

describe("the newstaff skill cannot be created, changed, moved or removed by tools", () => {
  it.each(["skills/newstaff/SKILL.md", "skills/newstaff.md", "./skills//newstaff/SKILL.md", "skills/x/../newstaff/SKILL.md", "skills/newstaff/other.md"])(
    "writeFile and appendFile of %s",
    async (path) => {
      await fs.mkdir("skills");
      await refused(fs.writeFile(path, "# newstaff"));
      await refused(fs.appendFile(path, "# newstaff"));
      expect(existsSync(join(alice, "skills", "newstaff"))).toBe(false);
      expect(existsSync(join(alice, "skills", "newstaff.md"))).toBe(false);
    },
  );

  it("mkdir of the folder, rename into either name, and rename of a folder holding it onto skills/", async () => {
    await fs.mkdir("drafts/newstaff");
    await fs.writeFile("drafts/newstaff/SKILL.md", "# newstaff");
    await fs.writeFile("drafts/n.md", "# newstaff");
    await refused(fs.mkdir("skills/newstaff"));
    await refused(fs.rename("drafts/newstaff", "skills/newstaff"));
    await refused(fs.rename("drafts/n.md", "skills/newstaff.md"));
    await refused(fs.rename("drafts", "skills"));
    expect(existsSync(join(alice, "skills", "newstaff"))).toBe(false);
  });

  it("an operator-made grant cannot be changed, moved or removed, nor skills/ with it", async () => {
    mkdirSync(join(alice, "skills", "newstaff"), { recursive: true });
    writeFileSync(join(alice, "skills", "newstaff", "SKILL.md"), "granted by the operator");
    await refused(fs.writeFile("skills/newstaff/SKILL.md", "changed"));
    await refused(fs.rm("skills/newstaff/SKILL.md"));
    await refused(fs.rm("skills/newstaff", true));
    await refused(fs.rm("skills", true));
    await refused(fs.rename("skills/newstaff", "away"));
    await refused(fs.rename("skills", "away"));
    expect(existsSync(join(alice, "skills", "newstaff", "SKILL.md"))).toBe(true);
    // Reading it stays allowed.
    expect(await fs.readFile("skills/newstaff/SKILL.md")).toBe("granted by the operator");
  });

  it("ordinary skill files stay writable", async () => {
    await fs.mkdir("skills/research");
    await fs.writeFile("skills/research/SKILL.md", "# research");
    await fs.writeFile("skills/newstaffing.md", "a different skill");
    await fs.rename("skills/research", "skills/research2");
    await fs.rm("skills/research2", true);
    expect(await fs.readFile("skills/newstaffing.md")).toBe("a different skill");
  });
});
