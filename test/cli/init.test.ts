import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, lstatSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join, relative } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runThroughHost } from "../../src/cli/client.js";
import { main } from "../../src/cli/main.js";
import { readBuildInfo } from "../../src/endpoint/paths.js";
import { parseOperatorFile, SETTINGS } from "../../src/operator-config.js";
import { parsePermissionsJson } from "../../src/policy/permissions.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { guideBlocks, readGuide, toolNameOf } from "../docs/guide-blocks.js";

/*
 * `animaworks-tool init [DIR]`: makes a working data dir, or completes an AnimaWorks one without
 * changing anything that is there. Run through the CLI's `main` (as the launcher does in-process), and
 * once through the built launcher, which must find the skill in the install.
 */
const SKILL = readFileSync(join(PROJECT_ROOT, "docs", "tool-creator.md"), "utf8");
const dirs: TempDataDir[] = [];
const scratch = (files: Record<string, string> = {}): TempDataDir => {
  const data = makeDataDir(files);
  dirs.push(data);
  return data;
};
afterEach(() => {
  for (const data of dirs.splice(0)) {
    chmodSync(data.dir, 0o700);
    data.cleanup();
  }
});

async function cli(argv: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = { stdout: [] as string[], stderr: [] as string[] };
  const code = await main(argv, { stdout: (t) => out.stdout.push(t), stderr: (t) => out.stderr.push(t) }, { env, cwd: PROJECT_ROOT });
  return { code, stdout: out.stdout.join("\n"), stderr: out.stderr.join("\n") };
}

/** Every entry under `dir`: folders, and files with their content hash, mode and change time. */
function snapshot(dir: string): Record<string, string> {
  const entries: Record<string, string> = {};
  const walk = (folder: string): void => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      const info = lstatSync(path);
      if (entry.isDirectory()) {
        entries[`${relative(dir, path)}/`] = "dir";
        walk(path);
      } else {
        const hash = createHash("sha256").update(readFileSync(path)).digest("hex");
        entries[relative(dir, path)] = `${hash} ${info.mode.toString(8)} ${info.mtimeMs} ${info.ino}`;
      }
    }
  };
  walk(dir);
  return entries;
}

/** A data dir as AnimaWorks makes it: other config sections and credentials, an Anima, skills, a skill of ours edited by the operator. */
const ANIMAWORKS_CONFIG = JSON.stringify({ version: 1, credentials: { anthropic: { api_key: "sk-test-not-real" } }, system: { mode: "server" } }, null, 2);
function animaworksDataDir(): TempDataDir {
  return scratch({
    "config.json": ANIMAWORKS_CONFIG,
    "animas/alice/permissions.json": JSON.stringify({ version: 1, tool_creation: { personal: true, shared: true } }),
    "animas/alice/identity.md": "# alice\n",
    "animas/bob/permissions.md": "## Tool Creation\n- personal: no\n",
    "common_skills/other/SKILL.md": "---\nname: other\n---\n# other\n",
    "common_skills/tool-creator/SKILL.md": "---\nname: tool-creator\n---\n# the operator's own edition\n",
    "shared/credentials.json": "{}",
  });
}

describe("animaworks-tool init", () => {
  it("makes a working data dir in an empty folder: layout, skill, commented config, an example Anima", async () => {
    const data = scratch();
    const run = await cli(["init", data.dir]);
    expect(run).toMatchObject({ code: 0, stderr: "" });
    for (const folder of ["animas", "common_tools", "common_skills", "animas/example/tools"])
      expect(lstatSync(join(data.dir, folder)).isDirectory()).toBe(true);
    expect(readFileSync(join(data.dir, "common_skills/tool-creator/SKILL.md"), "utf8")).toBe(SKILL);
    // The host reads what init wrote: no setting is on, every setting has its note.
    const configText = readFileSync(join(data.dir, "config.json"), "utf8");
    expect(parseOperatorFile("config.json", configText).settings).toEqual({});
    const section = (JSON.parse(configText) as { animaworks_tool: Record<string, string> }).animaworks_tool;
    for (const spec of SETTINGS) expect(section[`//${spec.key}`], spec.key).toContain(spec.description);
    expect(section["//timeout_ms"]).toContain("default: 30000");
    // Notes are ignored; a misspelt setting is still refused.
    expect(() => parseOperatorFile("config.json", JSON.stringify({ animaworks_tool: { ...section, timeout_msec: 1 } }))).toThrow(
      /timeout_msec is not a setting/,
    );
    expect(lstatSync(join(data.dir, "config.json")).mode & 0o777).toBe(0o600);
    expect(parsePermissionsJson(readFileSync(join(data.dir, "animas/example/permissions.json"), "utf8")).toolCreation).toEqual({
      personal: true,
      shared: false,
    });
    expect(run.stdout).toContain(`Initialised the data dir ${data.dir}:`);
    expect(run.stdout).toMatch(/created {2}common_skills\/tool-creator\/SKILL\.md/);
    expect(run.stdout).toContain("--anima example list");
  });

  it("makes the folder, with its parents, when it does not exist", async () => {
    const data = scratch();
    const target = join(data.dir, "new", "data");
    const run = await cli(["init", target, "--anima", "alice", "--json"]);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as { status: string; data_dir: string; anima: string; steps: Array<{ path: string; outcome: string }> };
    expect(report).toMatchObject({ status: "ok", data_dir: target, anima: "alice" });
    expect(report.steps.every((step) => step.outcome === "created")).toBe(true);
    expect(report.steps.map((step) => step.path)).toContain("animas/alice/permissions.json");
    expect(existsSync(join(target, "animas/example"))).toBe(false);
  });

  it("uses the data dir the other commands use when no DIR is given", async () => {
    const data = scratch();
    expect((await cli(["init"], { ANIMAWORKS_DATA_DIR: data.dir })).code).toBe(0);
    expect(existsSync(join(data.dir, "common_skills/tool-creator/SKILL.md"))).toBe(true);
  });

  it("completes an AnimaWorks data dir, adding only what is missing and changing nothing that is there", async () => {
    const data = animaworksDataDir();
    const before = snapshot(data.dir);
    const run = await cli(["init", data.dir]);
    expect(run).toMatchObject({ code: 0, stderr: "" });
    const after = snapshot(data.dir);
    // Everything that was there is untouched (same bytes, mode, time and inode: never rewritten).
    for (const [path, state] of Object.entries(before)) expect(after[path], path).toBe(state);
    // Added: only the missing shared tools folder. No Anima is invented where Animas exist.
    expect(Object.keys(after).filter((path) => !(path in before))).toEqual(["common_tools/"]);
    expect(run.stdout).toMatch(/kept {5}config\.json {2}\(it has no "animaworks_tool" section, so the host uses its defaults; to change a setting, add one/);
    // The operator's (or AnimaWorks' Python) edition of the skill stays; init says how to get this host's.
    expect(run.stdout).toMatch(/kept {5}common_skills\/tool-creator\/SKILL\.md {2}\(it is not this host's guide .*move it aside and run init again\)/);
    // The data dir serves as before, with the operator's configuration.
    expect((await cli(["--data-dir", data.dir, "--anima", "alice", "list"])).code).toBe(0);
  });

  it("adds a named Anima's folders and permissions, but never a permissions.json beside a permissions.md", async () => {
    const data = animaworksDataDir();
    const bob = await cli(["init", data.dir, "--anima", "bob"]);
    expect(bob.code).toBe(0);
    expect(existsSync(join(data.dir, "animas/bob/permissions.json"))).toBe(false);
    expect(lstatSync(join(data.dir, "animas/bob/tools")).isDirectory()).toBe(true);
    expect(bob.stdout).toMatch(/kept {5}animas\/bob\/permissions\.md/);
    expect((await cli(["init", data.dir, "--anima", "carol"])).code).toBe(0);
    expect(existsSync(join(data.dir, "animas/carol/permissions.json"))).toBe(true);
  });

  it("is a no-op the second time", async () => {
    const data = scratch();
    expect((await cli(["init", data.dir])).code).toBe(0);
    const before = snapshot(data.dir);
    const again = await cli(["init", data.dir]);
    expect(again.code).toBe(0);
    expect(snapshot(data.dir)).toEqual(before);
    expect(again.stdout).toContain("has everything init adds; nothing was changed");
    // Nothing created, and nothing kept that needs a word (its own skill and config are as it made them).
    expect(again.stdout).not.toMatch(/created |^ {2}kept .*\(/m);
  });

  it("makes a data dir that serves the guide's template tool", async () => {
    const data = scratch();
    expect((await cli(["init", data.dir])).code).toBe(0);
    const template = guideBlocks(readGuide()).find((block) => toolNameOf(block) === "my_tool");
    writeFileSync(join(data.dir, "animas/example/tools/my_tool.ts"), template?.code ?? "");
    const call = await cli(["--data-dir", data.dir, "--anima", "example", "my_tool", "action", "hello", "-j"]);
    expect(call.code).toBe(0);
    expect(JSON.parse(call.stdout)).toMatchObject({ status: "ok", output: { result: "Processed hello with 10", length: 5 } });
    // The Anima may write tools (init's permissions), through the host's own write path.
    expect((await cli(["--data-dir", data.dir, "--anima", "example", "refresh"])).code).toBe(0);
  });

  it("refuses a DIR that is a file, or has a file where a folder must be, and changes nothing", async () => {
    const data = scratch({ "a-file": "x", "dd/animas": "not a folder" });
    const file = await cli(["init", join(data.dir, "a-file")]);
    expect(file.code).toBe(2);
    expect(file.stderr).toMatch(/^Error \(InvalidArguments\): .*a-file is not a folder/);
    const through = await cli(["init", join(data.dir, "a-file", "x"), "-j"]);
    expect(JSON.parse(through.stdout)).toMatchObject({ status: "error", error_type: "InvalidArguments", fault: "caller" });
    const blocked = await cli(["init", join(data.dir, "dd")]);
    expect(blocked.code).toBe(2);
    expect(blocked.stderr).toMatch(/animas is in the way: the data dir needs a folder there/);
    expect(readdirSync(join(data.dir, "dd"))).toEqual(["animas"]);
  });

  it.skipIf(process.getuid?.() === 0)("says clearly when the folder cannot be written (exit 4)", async () => {
    const data = scratch();
    chmodSync(data.dir, 0o555);
    const run = await cli(["init", data.dir]);
    expect(run.code).toBe(4);
    expect(run.stderr).toMatch(/^Error \(PermissionDenied\): cannot .*animas: permission denied \(EACCES\)/);
  });

  it("refuses extra arguments and the demo data dir; shows its help", async () => {
    expect((await cli(["init", "a", "b"])).code).toBe(2);
    expect((await cli(["--demo", "init"])).stderr).toMatch(/init does not change the bundled demo data dir/);
    const help = await cli(["init", "--help"]);
    expect(help).toMatchObject({ code: 0 });
    expect(help.stdout).toMatch(/^Usage: animaworks-tool init \[DIR\]/);
    expect((await cli(["--help"])).stdout).toMatch(/init \[DIR\] +make a data dir/);
  });

  it("installs the skill from the built package, through the launcher", () => {
    const data = scratch();
    const bin = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");
    const run = spawnSync(process.execPath, [bin, "init", join(data.dir, "fresh")], { encoding: "utf8", env: { ...process.env, ANIMAWORKS_NO_DAEMON: "1" } });
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: "" });
    expect(readFileSync(join(data.dir, "fresh/common_skills/tool-creator/SKILL.md"), "utf8")).toBe(SKILL);
    // The install ships the guide (package.json "files"), so that an npm install can run init too.
    expect((JSON.parse(readFileSync(join(PROJECT_ROOT, "package.json"), "utf8")) as { files: string[] }).files).toContain("docs/tool-creator.md");
  });

  it("always runs in the calling process: the launcher's client neither forwards it to a host nor starts a daemon", async () => {
    const data = scratch();
    const io = { write: () => {}, readStdin: async () => "", isTerminal: () => false };
    const setup = { ...readBuildInfo(PROJECT_ROOT), env: {}, cwd: PROJECT_ROOT, hostname: hostname() };
    expect(await runThroughHost(["init", data.dir], io, setup)).toEqual({ served: false, reason: '"init" runs in the calling process' });
    expect(readdirSync(data.dir)).toEqual([]);
  });

  it("reserves its name: a tool file named init is skipped", async () => {
    const data = scratch();
    expect((await cli(["init", data.dir])).code).toBe(0);
    writeFileSync(join(data.dir, "animas/example/tools/init.ts"), "export function get_tool_schemas() { return []; }");
    const list = await cli(["--data-dir", data.dir, "--anima", "example", "list"]);
    expect(list.stdout).toMatch(/init.*is an animaworks-tool command and cannot be a tool name/);
  });
});
