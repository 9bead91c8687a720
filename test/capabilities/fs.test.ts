import { execFileSync } from "node:child_process";
import { linkSync, mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FsCapability } from "../../src/capabilities/fs.js";
import { DEFAULT_FS_LIMITS } from "../../src/fs-limits.js";
import { ToolHostError } from "../../src/errors.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

let data: TempDataDir;
let alice: string;
let fs: FsCapability;
const SECRET = "bob's secret token";

async function denied(promise: Promise<unknown>, type: string): Promise<ToolHostError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ToolHostError);
    expect((error as ToolHostError).type).toBe(type);
    // messages never reveal host paths
    expect((error as ToolHostError).message).not.toContain(data.dir);
    return error as ToolHostError;
  }
  throw new Error(`expected ${type}`);
}

beforeEach(() => {
  data = makeDataDir({ "animas/bob/secret.txt": SECRET, "animas/alice2/x.txt": "sibling" });
  alice = data.anima("alice");
  fs = new FsCapability(alice, { ...DEFAULT_FS_LIMITS, maxReadBytes: 1_000, maxWriteBytes: 2_000, quotaBytes: 10_000, maxFiles: 50 });
});
afterEach(() => data.cleanup());

describe("fs capability: ordinary use", () => {
  it("makes a folder that concurrent calls make too (two jobs of one Anima), without an error", async () => {
    // Separate capability instances, as two calls have: each checks, then creates.
    const other = new FsCapability(alice, { ...DEFAULT_FS_LIMITS, quotaBytes: 10_000, maxFiles: 50 });
    for (let round = 0; round < 8; round++) {
      await Promise.all([fs.mkdir(`race${round}/sub`, true), other.mkdir(`race${round}/sub`, true), fs.mkdir(`race${round}`, true)]);
    }
    await denied(fs.mkdir("race0", false), "ExecutionError"); // without recursive, an existing folder is still an error
  });

  it("writes, reads, appends, lists, stats, renames and removes inside the Anima's directory", async () => {
    await fs.mkdir("notes/2026");
    await fs.writeFile("notes/2026/a.txt", "hello");
    await fs.appendFile("notes/2026/a.txt", " world");
    expect(await fs.readFile("notes/2026/a.txt")).toBe("hello world");
    expect(await fs.readFile(join(alice, "notes/2026/a.txt"))).toBe("hello world"); // absolute inside is fine
    expect(await fs.readdir("notes/2026")).toEqual([{ name: "a.txt", type: "file" }]);
    expect((await fs.stat("notes/2026/a.txt")).size).toBe(11);
    await fs.rename("notes/2026/a.txt", "notes/b.txt");
    expect(await fs.exists("notes/2026/a.txt")).toBe(false);
    expect(await fs.readFile("notes/b.txt", "base64")).toBe(Buffer.from("hello world").toString("base64"));
    await fs.writeFile("bin.dat", Buffer.from([0, 255, 1]).toString("base64"), "base64");
    expect(readFileSync(join(alice, "bin.dat"))).toEqual(Buffer.from([0, 255, 1]));
    await denied(fs.rm("notes"), "ExecutionError");
    await fs.rm("notes", true);
    expect(await fs.exists("notes")).toBe(false);
    await denied(fs.readFile("missing.txt"), "NotFound");
  });
});

describe("fs capability: escapes are refused", () => {
  it("refuses .., absolute paths outside, and a sibling that shares the name prefix", async () => {
    await denied(fs.readFile("../bob/secret.txt"), "SandboxViolation");
    await denied(fs.readFile(join(data.dir, "animas", "bob", "secret.txt")), "SandboxViolation");
    await denied(fs.readFile(`${alice}2/x.txt`), "SandboxViolation");
    await denied(fs.readFile("notes/../../bob/secret.txt"), "SandboxViolation");
    await denied(fs.writeFile("../bob/secret.txt", "pwned"), "SandboxViolation");
    await denied(fs.readdir(".."), "SandboxViolation");
    await denied(fs.rename("x", "../bob/x"), "SandboxViolation");
    await denied(fs.readFile("/proc/self/environ"), "SandboxViolation");
    expect(readFileSync(join(data.dir, "animas", "bob", "secret.txt"), "utf8")).toBe(SECRET);
  });

  it("refuses NUL bytes and non-string paths", async () => {
    await denied(fs.readFile("a.txt\0../../bob/secret.txt"), "SandboxViolation");
    await denied(fs.readFile({ toString: () => "../bob/secret.txt" }), "InvalidArguments");
    await denied(fs.readFile(["../bob/secret.txt"]), "InvalidArguments");
  });

  it("does not follow symlinks planted inside the directory", async () => {
    symlinkSync(join(data.dir, "animas", "bob", "secret.txt"), join(alice, "link.txt"));
    symlinkSync(join(data.dir, "animas", "bob"), join(alice, "bobdir"));
    await denied(fs.readFile("link.txt"), "SandboxViolation");
    await denied(fs.appendFile("link.txt", "x"), "SandboxViolation");
    await denied(fs.readFile("bobdir/secret.txt"), "SandboxViolation");
    await denied(fs.writeFile("bobdir/new.txt", "x"), "SandboxViolation");
    await denied(fs.readdir("bobdir"), "SandboxViolation");
    await denied(fs.mkdir("bobdir/sub"), "SandboxViolation");
    await denied(fs.rm("bobdir/secret.txt"), "SandboxViolation");
    // writing over the link replaces the link itself; the target outside is untouched
    await fs.writeFile("link.txt", "mine");
    expect(readFileSync(join(data.dir, "animas", "bob", "secret.txt"), "utf8")).toBe(SECRET);
    expect((await fs.stat("bobdir")).type).toBe("symlink");
    await fs.rm("bobdir");
    expect(readFileSync(join(data.dir, "animas", "bob", "secret.txt"), "utf8")).toBe(SECRET);
  });

  it("refuses hard links (they may be another Anima's file)", async () => {
    linkSync(join(data.dir, "animas", "bob", "secret.txt"), join(alice, "hard.txt"));
    await denied(fs.readFile("hard.txt"), "SandboxViolation");
    await denied(fs.appendFile("hard.txt", "x"), "SandboxViolation");
    expect(readFileSync(join(data.dir, "animas", "bob", "secret.txt"), "utf8")).toBe(SECRET);
  });

  it("never reads outside while a directory is swapped for a symlink (check what was opened, not the string)", async () => {
    mkdirSync(join(alice, "real"));
    writeFileSync(join(alice, "real", "secret.txt"), "alice's own");
    symlinkSync(join(data.dir, "animas", "bob"), join(alice, "evil"));
    let swapping = true;
    const swapper = (async () => {
      let flip = false;
      while (swapping) {
        // swap "dir" between a real directory and a link to Bob's directory
        try {
          renameSync(join(alice, flip ? "real" : "evil"), join(alice, "dir"));
          await new Promise((resolve) => setImmediate(resolve));
          renameSync(join(alice, "dir"), join(alice, flip ? "real" : "evil"));
        } catch {
          // a rename lost the race with the reader: fine
        }
        await new Promise((resolve) => setImmediate(resolve));
        flip = !flip;
      }
    })();
    const seen = new Set<string>();
    for (let i = 0; i < 300; i++) {
      try {
        seen.add(await fs.readFile("dir/secret.txt"));
      } catch (error) {
        // losing the race may look like a missing or non-directory path; it must never be the secret
        expect(["SandboxViolation", "NotFound", "ExecutionError"], (error as Error).message).toContain((error as ToolHostError).type);
      }
    }
    swapping = false;
    await swapper;
    expect(seen.has(SECRET)).toBe(false);
  });

  it("refuses FIFOs and devices without blocking", async () => {
    execFileSync("mkfifo", [join(alice, "pipe")]);
    const started = Date.now();
    await denied(fs.readFile("pipe"), "SandboxViolation");
    await denied(fs.appendFile("pipe", "x"), "SandboxViolation");
    expect(Date.now() - started).toBeLessThan(1_000);
    execFileSync("mknod", [join(alice, "null"), "c", "1", "3"]);
    await denied(fs.readFile("null"), "SandboxViolation");
  });
});

describe("fs capability: the host's files and limits", () => {
  it("write-protects permissions, state, tool sources and identity files", async () => {
    data.write("animas/alice/tools/t.ts", "export {}");
    for (const path of ["permissions.json", "permissions.md", "tools/t.ts", "tools/new.ts", "state/x.json", "identity.md", "./tools//t.ts"]) {
      await denied(fs.writeFile(path, "x"), "PermissionDenied");
    }
    await denied(fs.rm("tools", true), "PermissionDenied");
    await denied(fs.rename("a", "tools/a.ts"), "PermissionDenied");
    await denied(fs.rm("."), "PermissionDenied");
    expect(await fs.readFile("tools/t.ts")).toBe("export {}"); // reading is fine
  });

  it("enforces read and write sizes, quota, file count, path length and depth", async () => {
    writeFileSync(join(alice, "big.txt"), "x".repeat(1_001));
    await denied(fs.readFile("big.txt"), "PermissionDenied");
    await denied(fs.writeFile("w.txt", "x".repeat(2_001)), "PermissionDenied");
    // 1,001 bytes already there + 4 × 1,900 = 8,601; one more would pass the 10,000-byte quota
    for (let i = 0; i < 4; i++) await fs.writeFile(`q${i}.txt`, "y".repeat(1_900));
    await denied(fs.writeFile("q4.txt", "y".repeat(1_900)), "PermissionDenied");
    await fs.rm("q0.txt");
    await fs.writeFile("q4.txt", "y".repeat(1_900)); // freed space is usable again
    await denied(fs.readFile("a".repeat(1_100)), "InvalidArguments");
    await denied(fs.mkdir(Array.from({ length: 40 }, () => "d").join("/")), "InvalidArguments");
  });

  it("renames a folder only where its deepest entry stays within the path depth limit", async () => {
    await fs.mkdir("a/b/c");
    await fs.writeFile("a/b/c/f.txt", "deep"); // 3 levels below "a"
    const chain = (levels: number): string => Array.from({ length: levels }, () => "n").join("/");
    await fs.mkdir(chain(30));
    await fs.rename("a", `${chain(28)}/a`); // f.txt at 28 + 1 + 3 = 32 levels: the limit
    expect(await fs.readFile(`${chain(28)}/a/b/c/f.txt`)).toBe("deep");
    const error = await denied(fs.rename(`${chain(28)}/a`, `${chain(29)}/a`), "PermissionDenied"); // 33 levels
    expect(error.message).toContain("32-level limit");
    expect(await fs.readFile(`${chain(28)}/a/b/c/f.txt`)).toBe("deep"); // left where it was
    await fs.rename(`${chain(28)}/a/b/c/f.txt`, `${chain(30)}/f.txt`); // a file goes wherever a path can name it
  });
});
