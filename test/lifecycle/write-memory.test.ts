import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PathConfinement } from "../../src/capabilities/paths.js";
import { ToolHostError } from "../../src/errors.js";
import { withExactDir } from "../../src/lifecycle/safe-dir.js";
import { type WriteMemoryOptions, writeMemoryFile } from "../../src/lifecycle/write-memory.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";

let data: TempDataDir;
let alice: string;

beforeEach(() => {
  data = makeDataDir({ "animas/bob/secret.txt": "bob's", "animas/alice2/x.txt": "sibling" });
  alice = join(data.dir, "animas", "alice");
  mkdirSync(alice, { recursive: true }); // no tools/ folder yet: a refused write must not create it
});
afterEach(() => data.cleanup());

const write = (path: unknown, content: unknown = "x", extra: Partial<WriteMemoryOptions> = {}): Promise<string> =>
  writeMemoryFile({ animaDir: alice, path, content, ...extra });

async function refused(promise: Promise<unknown>, type: string, message?: RegExp): Promise<ToolHostError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, "expected a refusal").toBeInstanceOf(ToolHostError);
  const hostError = error as ToolHostError;
  expect(hostError.type).toBe(type);
  if (message) expect(hostError.message).toMatch(message);
  expect(hostError.message).not.toContain(data.dir); // never a host path
  return hostError;
}

/** Every file and folder under the Anima's directory, to prove a refusal wrote nothing. */
function tree(dir = alice, prefix = ""): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const rel = `${prefix}${entry.name}`;
    return entry.isDirectory() ? [`${rel}/`, ...tree(join(dir, entry.name), `${rel}/`)] : [rel];
  });
}

describe("write_memory_file: ordinary writes", () => {
  it("overwrites, appends, creates folders and normalises paths; an absolute path inside is fine", async () => {
    expect(await write("notes/2026/a.md", "hello")).toBe("Wrote notes/2026/a.md (5 bytes).");
    expect(await write("./notes//2026/a.md", " world", { mode: "append" })).toBe("Appended 6 bytes to notes/2026/a.md (now 11 bytes).");
    expect(await write(join(alice, "notes", "2026", "a.md"), "!", { mode: "append" })).toMatch(/now 12 bytes/);
    expect(readFileSync(join(alice, "notes/2026/a.md"), "utf8")).toBe("hello world!");
    expect(await write("new.md", "first", { mode: "append" })).toBe("Appended 5 bytes to new.md (now 5 bytes).");
    // What the host then did with a tool file is said by the management service (writeMemoryAndLoad).
    expect(await write("tools/my_tool.ts", "export {}")).toBe("Wrote tools/my_tool.ts (9 bytes).");
    expect(tree().filter((entry) => entry.includes(".tmp"))).toEqual([]); // no temporary files left behind
  });

  it("refuses bad arguments, folders and files over the size limit", async () => {
    await refused(write("a.md", "x", { mode: "truncate" }), "InvalidArguments", /mode/);
    await refused(write("a.md", 42), "InvalidArguments", /content must be a string/);
    await refused(write("notes/"), "InvalidArguments", /names a folder/);
    await refused(write("."), "InvalidArguments");
    mkdirSync(join(alice, "dir"));
    await refused(write("dir"), "InvalidArguments", /is a folder/);
    await refused(write("big.md", "x".repeat(11), { maxFileBytes: 10 }), "PermissionDenied", /at most 10 bytes/);
    await write("grow.md", "x".repeat(8), { maxFileBytes: 10 });
    await refused(write("grow.md", "xxx", { mode: "append", maxFileBytes: 10 }), "PermissionDenied");
    expect(readFileSync(join(alice, "grow.md"), "utf8")).toBe("x".repeat(8));
  });
});

describe("write_memory_file: the tool-creation permission", () => {
  const deny = (): string => data.write("animas/alice/permissions.json", JSON.stringify({ tool_creation: { personal: false, shared: true } }));
  const toolPaths = (): string[] => [
    "tools/my_tool.ts",
    "tools/my_tool.mts",
    "tools/my_tool.js",
    "tools/my_tool.mjs",
    "tools/my_tool.py",
    "tools/_helper.ts",
    "tools/data.json",
    "tools/sub/deep.ts",
    "./tools//my_tool.ts",
    join(alice, "tools", "my_tool.ts"),
  ];

  it("without a permissions file, personal tools may be written (the AnimaWorks default)", async () => {
    for (const path of toolPaths()) await write(path, "export {}");
    expect(existsSync(join(alice, "tools/sub/deep.ts"))).toBe(true);
  });

  it("denied in permissions.json: every write under tools/ is refused and nothing is written", async () => {
    deny();
    const before = tree();
    for (const path of toolPaths()) {
      const error = await refused(write(path, "export {}"), "PermissionDenied", /^Tool creation is not permitted\. Writing "tools\//);
      expect(error.message).toContain('"tool_creation.personal" in permissions.json');
      expect(error.hint).toBe('an operator can set "tool_creation": {"personal": true} in the Anima\'s permissions.json');
      // Only the operator can grant it (#35 item 4), and only the file in force is named (#35 item 8).
      expect(error.fault).toBe("host");
      expect(`${error.message} ${error.hint}`).not.toContain("permissions.md");
    }
    expect(tree()).toEqual(before);
    expect(await write("notes.md", "other files are still fine")).toMatch(/^Wrote/);
  });

  it("reads the seed's markdown form: no denies, yes allows", async () => {
    data.write("animas/alice/permissions.md", "# Permissions\n\n## Tool creation\n- Personal tools: no\n- Shared tools: no\n");
    const error = await refused(write("tools/my_tool.ts"), "PermissionDenied");
    expect(error.hint).toBe('an operator can add "- Personal tools: yes" under "## Tool creation" in the Anima\'s permissions.md');
    expect(error.message).toContain('"Personal tools: yes" in permissions.md');
    expect(`${error.message} ${error.hint}`).not.toContain("permissions.json");
    expect(existsSync(join(alice, "tools"))).toBe(false);
    data.write("animas/alice/permissions.md", "## Tool creation\n- Personal tools: yes\n");
    expect(await write("tools/my_tool.ts")).toMatch(/^Wrote tools\/my_tool.ts/);
  });

  it("a broken permissions.json fails closed, naming the file", async () => {
    data.write("animas/alice/permissions.json", "{ not json");
    const error = await refused(write("tools/my_tool.ts"), "PermissionDenied", /permissions\.json is invalid/);
    expect([error.fault, error.hint]).toEqual(["host", "an operator must fix permissions.json in the Anima's folder"]);
    data.write("animas/alice/permissions.json", JSON.stringify({ tool_creation: { personal: "yes" } }));
    await refused(write("tools/my_tool.ts"), "PermissionDenied", /permissions\.json is invalid/);
    expect(existsSync(join(alice, "tools"))).toBe(false);
  });
});

describe("write_memory_file: host files are never writable", () => {
  it.each([
    "permissions.json",
    "permissions.md",
    "permissions.md.bak",
    "state/jobs.db",
    "state/background_notifications/x.md",
    "identity.md",
    "status.json",
    "activity_log/x.jsonl",
    join("ALICE", "state", "x"),
  ])("refuses %s", async (path) => {
    const target = path.replace("ALICE", alice);
    data.write("animas/alice/permissions.json", JSON.stringify({ tool_creation: { personal: false } }));
    const error = await refused(write(target, JSON.stringify({ tool_creation: { personal: true, shared: true } })), "PermissionDenied", /belongs to the host/);
    expect(error.fault).toBe("caller"); // the caller's own request: no tool involved (#35 item 4)
    expect(readFileSync(join(alice, "permissions.json"), "utf8")).toContain('"personal":false');
    expect(existsSync(join(alice, "state"))).toBe(false);
  });
});

describe("write_memory_file: confinement", () => {
  it("refuses .., absolute paths outside, a sibling sharing the name prefix, and NUL", async () => {
    // Into another Anima's folder: the caller's doing, never a tool's (#35 item 4).
    expect((await refused(write("../bob/secret.txt", "pwned"), "SandboxViolation")).fault).toBe("caller");
    await refused(write("notes/../../bob/secret.txt", "pwned"), "SandboxViolation");
    await refused(write(join(data.dir, "animas", "bob", "secret.txt"), "pwned"), "SandboxViolation");
    await refused(write(`${alice}2/x.txt`, "pwned"), "SandboxViolation");
    await refused(write("a\0.md"), "SandboxViolation");
    expect(readFileSync(join(data.dir, "animas/bob/secret.txt"), "utf8")).toBe("bob's");
    expect(readFileSync(join(data.dir, "animas/alice2/x.txt"), "utf8")).toBe("sibling");
  });

  it("follows no symbolic link: not out of the directory, not to a host folder inside it, not as the file itself", async () => {
    symlinkSync(join(data.dir, "animas", "bob"), join(alice, "bobdir"));
    await refused(write("bobdir/secret.txt", "pwned"), "SandboxViolation", /symbolic link/);
    await refused(write("bobdir/new/file.txt", "pwned"), "SandboxViolation");
    // A link that stays inside but leads to host files or to tools/ must not bypass their rules.
    mkdirSync(join(alice, "state", "sub"), { recursive: true });
    symlinkSync(join(alice, "state"), join(alice, "notes"));
    await refused(write("notes/sub/x.md", "pwned"), "SandboxViolation");
    data.write("animas/alice/permissions.json", JSON.stringify({ tool_creation: { personal: false } }));
    mkdirSync(join(alice, "tools", "pkg"), { recursive: true });
    symlinkSync(join(alice, "tools"), join(alice, "code"));
    await refused(write("code/pkg/x.ts", "pwned"), "SandboxViolation");
    // The file itself is a link: replaced neither the link nor its target.
    symlinkSync(join(data.dir, "animas", "bob", "secret.txt"), join(alice, "link.txt"));
    await refused(write("link.txt", "pwned"), "SandboxViolation", /symbolic link/);
    await refused(write("link.txt", "pwned", { mode: "append" }), "SandboxViolation");
    expect(lstatSync(join(alice, "link.txt")).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(data.dir, "animas/bob/secret.txt"), "utf8")).toBe("bob's");
    expect(readdirSync(join(alice, "state", "sub"))).toEqual([]);
    expect(readdirSync(join(alice, "tools", "pkg"))).toEqual([]);
  });
});

describe("verified folders (safe-dir)", () => {
  it("refuse a folder reached through a link further up, even one that stays inside (a link swapped in after the walk)", async () => {
    mkdirSync(join(alice, "state", "sub"), { recursive: true });
    symlinkSync(join(alice, "state"), join(alice, "notes"));
    const paths = new PathConfinement(alice);
    const visited: string[] = [];
    await refused(
      withExactDir(paths, "notes/sub", "test", { create: false }, async (fd) => void visited.push(fd)),
      "SandboxViolation",
      /goes through a symbolic link/,
    );
    expect(visited).toEqual([]);
    await withExactDir(paths, "state/sub", "test", { create: false }, async (fd) => void visited.push(fd));
    expect(visited).toHaveLength(1);
  });
});

describe("write_memory_file: atomicity", () => {
  /**
   * A reader in another thread reads the file in a tight loop while this thread rewrites and appends to
   * it. Each version is uniform (all "A", all "B", …) and every append adds whole blocks, so any torn
   * read shows up as mixed or partial content.
   */
  it("a concurrent reader never sees a partial file while large files are rewritten and appended to", async () => {
    const path = join(alice, "notes", "big.txt");
    const blockBytes = 512 * 1024;
    await write("notes/big.txt", "A".repeat(blockBytes * 4));
    // [0]: stop flag set by this thread; [1]: number of reads done by the reader.
    const control = new Int32Array(new SharedArrayBuffer(8));
    const reader = new Worker(
      `const { workerData, parentPort } = require("node:worker_threads");
       const { readFileSync } = require("node:fs");
       const control = new Int32Array(workerData.control);
       const { path, blockBytes } = workerData;
       const versions = new Set(); const bad = [];
       while (Atomics.load(control, 0) === 0) {
         const text = readFileSync(path, "latin1");
         const uniformBlocks = text.length > 0 && text.length % blockBytes === 0 && new Set(text).size === 1;
         if (uniformBlocks) versions.add(text[0] + ":" + text.length); else if (bad.length < 5) bad.push(text.length + " bytes, first " + text.slice(0, 1) + ", last " + text.slice(-1));
         Atomics.add(control, 1, 1);
       }
       parentPort.postMessage({ reads: Atomics.load(control, 1), versions: [...versions], bad });`,
      { eval: true, workerData: { control: control.buffer, path, blockBytes } },
    );
    const done = new Promise<{ reads: number; versions: string[]; bad: string[] }>((resolve, reject) => {
      reader.once("message", resolve);
      reader.once("error", reject);
    });
    const reads = (): number => Atomics.load(control, 1);
    await waitFor(() => reads() > 0);
    const rounds = 12;
    for (let round = 0; round < rounds; round++) {
      const letter = String.fromCharCode(66 + round); // B, C, D, …
      await write("notes/big.txt", letter.repeat(blockBytes * (2 + (round % 3))));
      await write("notes/big.txt", letter.repeat(blockBytes), { mode: "append" });
      // The reader keeps reading through every write; wait until it has read this version too.
      const seen = reads();
      await waitFor(() => reads() >= seen + 2);
    }
    Atomics.store(control, 0, 1);
    const result = await done;
    await reader.terminate();
    expect(result.bad).toEqual([]);
    expect(result.reads).toBeGreaterThanOrEqual(rounds * 2);
    expect(result.versions.length).toBeGreaterThanOrEqual(rounds); // one final version per round at least
  });

  it("appends from concurrent callers are all kept", async () => {
    const lines = Array.from({ length: 40 }, (_, i) => `line ${i}\n`);
    await Promise.all(lines.map((line) => write("log.md", line, { mode: "append" })));
    expect(readFileSync(join(alice, "log.md"), "utf8").split("\n").filter(Boolean).sort()).toEqual(lines.map((l) => l.trim()).sort());
  });

  it("keeps the mode of a file it replaces", async () => {
    writeFileSync(join(alice, "run.sh"), "old", { mode: 0o600 });
    await write("run.sh", "new");
    expect(lstatSync(join(alice, "run.sh")).mode & 0o777).toBe(0o600);
  });
});
