import * as real from "node:fs/promises";
import { mkdtempSync, rmSync, writeFileSync, symlinkSync, mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";

// The CLI bundle (scripts/bundle-cli.mjs) reaches node:fs/promises through a generated stand-in that
// runs most functions over node:fs's callback API. It must behave as the real module for everything
// the host does with it. `npm test` builds first, so the stand-in is there.
const SHIM = join(PROJECT_ROOT, "dist", "cli-shims", "fs-promises.js");

type FsPromises = typeof real;
let shim: FsPromises;
let dir: string;

beforeAll(async () => {
  shim = (await import(pathToFileURL(SHIM).href)) as FsPromises;
  dir = mkdtempSync(join(tmpdir(), "awt-shim-"));
  mkdirSync(join(dir, "sub"));
  writeFileSync(join(dir, "sub", "a.txt"), "alpha");
  symlinkSync(join(dir, "sub"), join(dir, "link"));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function outcome<T>(work: Promise<T>): Promise<{ value?: T; code?: string; message?: string }> {
  try {
    return { value: await work };
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    return { code: e.code, message: e.message };
  }
}

describe("the CLI bundle's node:fs/promises stand-in", () => {
  it("exports every function of node:fs/promises", () => {
    for (const [name, value] of Object.entries(real)) {
      if (typeof value === "function") expect(typeof (shim as Record<string, unknown>)[name], name).toBe("function");
    }
    expect(shim.constants).toBe(real.constants);
  });

  it("gives the same values as the real module", async () => {
    const file = join(dir, "sub", "a.txt");
    expect(await shim.readFile(file, "utf8")).toBe(await real.readFile(file, "utf8"));
    expect(await shim.readFile(file)).toEqual(await real.readFile(file));
    const shimEntries = (await shim.readdir(dir, { withFileTypes: true })).map((d) => [d.name, d.isDirectory(), d.isSymbolicLink()]);
    const realEntries = (await real.readdir(dir, { withFileTypes: true })).map((d) => [d.name, d.isDirectory(), d.isSymbolicLink()]);
    expect(shimEntries.sort()).toEqual(realEntries.sort());
    expect((await shim.stat(file)).size).toBe(5);
    expect((await shim.lstat(join(dir, "link"))).isSymbolicLink()).toBe(true);
    expect(await shim.realpath(join(dir, "link", "a.txt"))).toBe(await real.realpath(join(dir, "link", "a.txt")));
    expect(await shim.readlink(join(dir, "link"))).toBe(join(dir, "sub"));
    expect(await shim.mkdir(join(dir, "x", "y"), { recursive: true })).toBe(join(dir, "x"));
  });

  it("writes, renames and removes as the real module", async () => {
    const target = join(dir, "w.txt");
    await shim.writeFile(target, "one", { flag: "wx" });
    await shim.appendFile(target, "+two");
    expect(readFileSync(target, "utf8")).toBe("one+two");
    await shim.rename(target, join(dir, "w2.txt"));
    await shim.rm(join(dir, "w2.txt"));
    await shim.rm(join(dir, "x"), { recursive: true });
    expect(await outcome(real.stat(join(dir, "x")))).toMatchObject({ code: "ENOENT" });
  });

  it("rejects with the same error codes and messages", async () => {
    const missing = join(dir, "missing.txt");
    const fromShim = await outcome(shim.readFile(missing, "utf8"));
    const fromReal = await outcome(real.readFile(missing, "utf8"));
    expect(fromShim.code).toBe("ENOENT");
    expect(fromShim).toEqual(fromReal);
    expect(await outcome(shim.writeFile(join(dir, "sub", "a.txt"), "x", { flag: "wx" }))).toMatchObject({ code: "EEXIST" });
    expect(readFileSync(join(dir, "sub", "a.txt"), "utf8")).toBe("alpha");
  });

  it("leaves FileHandles to the real module", async () => {
    const handle = await shim.open(join(dir, "sub", "a.txt"), "r");
    try {
      expect(await shim.readFile(handle, "utf8")).toBe("alpha");
    } finally {
      await handle.close();
    }
  });
});
