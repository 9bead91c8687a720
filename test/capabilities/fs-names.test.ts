import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemoryAuditLog } from "../../src/audit/memory-audit-log.js";
import { FsCapability } from "../../src/capabilities/fs.js";
import { DEFAULT_FS_LIMITS } from "../../src/fs-limits.js";
import { CapabilityService } from "../../src/capabilities/service.js";
import type { LogRecord } from "../../src/host-options.js";
import type { CredentialSources } from "../../src/credentials/store.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { type TestHost, okOutput, useTestHost } from "../helpers/tools.js";

/**
 * File names that are not valid UTF-8 (written by something other than a tool). As a string such a name
 * reads with U+FFFD in place of its bytes, and that string opens nothing: readdir leaves the entry out and
 * says so in the host's log, while the walks that must reach it (recursive rm, quota) go by bytes.
 */
const BAD_NAME = Buffer.from([0x66, 0xff, 0x2e, 0x74, 0x78, 0x74]); // "f", 0xff, ".txt"
const SHOWN = String.raw`"f\xff.txt"`;

/** `relative` (a folder inside `dir`, created) joined with the byte name `name`, as node:fs takes it. */
function bytePath(dir: string, relative: string, name: Buffer): Buffer {
  mkdirSync(join(dir, relative), { recursive: true });
  return Buffer.concat([Buffer.from(`${join(dir, relative)}/`), name]);
}

let data: TempDataDir;
let alice: string;
beforeEach(() => {
  data = makeDataDir();
  alice = data.anima("alice");
});
afterEach(() => data.cleanup());

describe("fs capability: names that are not valid UTF-8", () => {
  it("readdir leaves them out and reports them; every listed name opens", async () => {
    writeFileSync(bytePath(alice, "notes", BAD_NAME), "hidden");
    writeFileSync(join(alice, "notes", "ok.txt"), "fine");
    // Valid UTF-8 stays listed, even a name that holds U+FFFD itself or starts with a BOM.
    writeFileSync(join(alice, "notes", "\uFFFD.txt"), "replacement char");
    writeFileSync(join(alice, "notes", "\uFEFFbom.txt"), "bom");
    mkdirSync(bytePath(alice, "notes", Buffer.from([0x64, 0xc3]))); // a folder with a truncated sequence

    const fs = new FsCapability(alice);
    const notices: string[] = [];
    const entries = await fs.readdir("notes", (message) => notices.push(message));
    expect(entries).toEqual([
      { name: "ok.txt", type: "file" },
      { name: "\uFEFFbom.txt", type: "file" },
      { name: "\uFFFD.txt", type: "file" },
    ]);
    for (const entry of entries) await expect(fs.stat(`notes/${entry.name}`)).resolves.toMatchObject({ type: "file" });
    expect(await fs.readFile("notes/\uFEFFbom.txt")).toBe("bom");
    expect(notices).toHaveLength(1);
    expect(notices[0]).toContain('"notes"');
    expect(notices[0]).toContain("2 entries");
    expect(notices[0]).toContain(SHOWN);
    expect(notices[0]).toContain(String.raw`"d\xc3"`);
    expect(notices[0]).not.toContain(alice); // no host path

    // Nothing left out: no notice.
    const quiet: string[] = [];
    await fs.readdir(".", (message) => quiet.push(message));
    expect(quiet).toEqual([]);
  });

  it("the notice goes to the host's log for the call that listed", async () => {
    writeFileSync(bytePath(alice, "notes", BAD_NAME), "hidden");
    const logs: LogRecord[] = [];
    const service = new CapabilityService({ credentials: {} as CredentialSources, audit: new MemoryAuditLog(), log: (record) => logs.push(record) });
    const reply = await service.invoke({ anima: "alice", animaDir: alice, tool: "lister" }, "fs.readdir", JSON.stringify(["notes"]));
    expect(reply).toEqual({ ok: true, value: [] });
    expect(logs).toEqual([expect.objectContaining({ level: "warn", logger: "animaworks.host", anima: "alice", tool: "lister" })]);
    expect(logs[0]?.message).toContain(SHOWN);
  });

  it("rm -r removes a folder holding them, also a folder so named and what it holds", async () => {
    writeFileSync(bytePath(alice, "notes", BAD_NAME), "hidden");
    writeFileSync(bytePath(alice, "notes/sub", BAD_NAME), "deeper");
    const badFolder = bytePath(alice, "notes", Buffer.from([0x64, 0xff]));
    mkdirSync(badFolder);
    writeFileSync(Buffer.concat([badFolder, Buffer.from("/inner.txt")]), "inside");
    const fs = new FsCapability(alice);
    await fs.rm("notes", true);
    expect(existsSync(join(alice, "notes"))).toBe(false);
    expect(readdirSync(alice)).toEqual(["tools"]);
  });

  it("the quota counts them: their bytes and entries, also inside a folder so named", async () => {
    const limits = { ...DEFAULT_FS_LIMITS, quotaBytes: 1_000, maxFiles: 6 };
    writeFileSync(bytePath(alice, "notes", BAD_NAME), "x".repeat(500));
    const badFolder = bytePath(alice, "notes", Buffer.from([0x64, 0xff]));
    mkdirSync(badFolder);
    writeFileSync(Buffer.concat([badFolder, Buffer.from("/inner.txt")]), "y".repeat(400));
    // Used: 900 bytes; entries tools, notes, f\xff.txt, d\xff, inner.txt = 5 of 6.
    const fs = new FsCapability(alice, limits);
    await expect(fs.writeFile("big.txt", "z".repeat(200))).rejects.toMatchObject({ type: "PermissionDenied", message: expect.stringContaining("900 used") });
    await fs.writeFile("small.txt", "z".repeat(50));
    await expect(fs.mkdir("one-more")).rejects.toMatchObject({ type: "PermissionDenied", message: expect.stringContaining("files and folders") });
  });
});

describe("fs capability: names that are not valid UTF-8, through a tool", () => {
  let t: TestHost;
  beforeEach(() => {
    t = useTestHost();
    t.personal(
      "lister.ts",
      `import { fs } from "@animaworks/tool";
export function get_tool_schemas() {
  return [{ name: "lister_run", description: "lists, reads each entry, then removes the folder", input_schema: { type: "object", properties: {} } }];
}
export async function dispatch() {
  const entries = await fs.readdir("notes");
  const read = [];
  for (const entry of entries) read.push(await fs.readFile("notes/" + entry.name));
  await fs.rm("notes", { recursive: true });
  return { names: entries.map((e) => e.name), read, gone: !(await fs.exists("notes")) };
}
`,
    );
  });
  afterEach(() => t.close());

  it("a tool lists only names it can open, the log says what was left out, and rm -r still removes them", async () => {
    const animaDir = join(t.data.dir, "animas", "alice");
    writeFileSync(bytePath(animaDir, "notes", BAD_NAME), "hidden");
    writeFileSync(join(animaDir, "notes", "ok.txt"), "fine");
    const output = JSON.parse(okOutput(await t.host.call("alice", "lister_run", {})));
    expect(output).toEqual({ names: ["ok.txt"], read: ["fine"], gone: true });
    const notice = t.logs.find((record) => record.logger === "animaworks.host" && record.message.startsWith("fs.readdir:"));
    expect(notice).toMatchObject({ level: "warn", anima: "alice", tool: "lister" });
    expect(notice?.message).toContain(SHOWN);
  });
});
