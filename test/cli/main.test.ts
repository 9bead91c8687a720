import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI_MODES, type CliRunner, cliRunner } from "../helpers/cli-modes.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { NOTES_TOOL } from "./notes-tool.js";

const CLI_TOOL = `
export function get_tool_schemas() { return [{ name: "raw_echo", description: "echo" }]; }
export function dispatch() { return "dispatch"; }
export function cli_main(argv) { return "argv=" + JSON.stringify(argv); }
`;

// The whole suite runs twice: in-process (no host running) and through a running host's endpoint (the
// thin client), which must be indistinguishable to the caller.
describe.each(CLI_MODES)("animaworks-tool CLI (%s)", (mode) => {
  let data: TempDataDir;
  let runner: CliRunner;

  /** Invocations that the running host declined (daemon mode), which the client then ran in-process. */
  const declined: string[][] = [];
  const cli = async (...argv: string[]) => {
    const run = await runner.run(["--data-dir", data.dir, ...argv]);
    if (mode === "daemon" && run.ranBy === "in-process") declined.push(argv);
    return run;
  };

  beforeAll(async () => {
    data = makeDataDir({
      "animas/alice/tools/notes.ts": NOTES_TOOL,
      "animas/alice/tools/raw.mjs": CLI_TOOL,
      "animas/alice/tools/broken.ts": "export function get_tool_schemas() { return [{ name: 'wrong_name' }]; }",
      "animas/bob/tools/.keep": "",
    });
    runner = await cliRunner(mode, data.dir);
  });
  afterAll(async () => {
    await runner.close();
    data.cleanup();
  });

  it("calls <tool> <action> with positional required strings and typed flags", async () => {
    const r = await cli("--anima", "alice", "notes", "add", "T", "B", "--tags", "x", "--tags", "y", "--priority", "3", "--pinned");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ saved: { title: "T", body: "B", tags: ["x", "y"], priority: 3, pinned: true }, anima: "alice" });
  });

  it("takes --os-sandbox: an unknown mode is InvalidArguments (exit 2), a known one is accepted", async () => {
    const bad = await cli("--anima", "alice", "--os-sandbox", "maybe", "notes", "add", "T", "B");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^Error \(InvalidArguments\): --os-sandbox must be auto, required or off/);
    const accepted = await cli("--anima", "alice", "--os-sandbox", "off", "notes", "add", "T", "B");
    expect(accepted.code).toBe(0);
  });

  it("takes --args-json, with flags overriding its keys, and prints a JSON envelope with -j", async () => {
    const r = await cli("--anima", "alice", "-j", "notes", "add", "--args-json", '{"title":"a","body":"b","priority":2}', "--priority", "5");
    expect(r.code).toBe(0);
    const envelope = JSON.parse(r.stdout);
    expect(envelope.status).toBe("ok");
    expect(envelope.output.saved).toEqual({ title: "a", body: "b", priority: 5 }); // an object result is JSON in the envelope, not a string
  });

  it("takes --args-file", async () => {
    const file = data.write("args.json", JSON.stringify({ title: "f", body: "g" }));
    const r = await cli("--anima", "alice", "notes", "add", "--args-file", file);
    expect(JSON.parse(r.stdout).saved).toEqual({ title: "f", body: "g" });
    const bad = await cli("--anima", "alice", "notes", "add", "--args-file", data.write("bad.json", "[1]"));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("must be a JSON object");
  });

  it("cannot override anima_dir", async () => {
    const r = await cli("--anima", "alice", "notes", "add", "--args-json", '{"title":"a","body":"b","anima_dir":"/etc"}');
    expect(JSON.parse(r.stdout).anima).toBe("alice");
  });

  it("exits 2 with every argument problem named, and 1 with the tool's message when it raises", async () => {
    const invalid = await cli("--anima", "alice", "notes", "add", "only-title", "--priority", "high");
    expect(invalid.code).toBe(2);
    expect(invalid.stderr).toMatch(/^Error \(InvalidArguments\): .*--priority expects integer/);
    const missing = await cli("--anima", "alice", "notes", "add", "only-title");
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('missing required parameter "body"');
    const raised = await cli("--anima", "alice", "-j", "notes", "fail");
    expect(raised.code).toBe(1);
    // The envelope names the call in the audit trail (`audit events --call`).
    expect(JSON.parse(raised.stdout)).toEqual({
      status: "error",
      error_type: "ExecutionError",
      fault: "tool",
      message: "disk is full",
      call_id: expect.stringMatching(/^[0-9a-z]+-[0-9a-z]+-[0-9a-z]+$/),
    });
  });

  it("exits 5 for an unknown tool or action, listing what exists", async () => {
    const tool = await cli("--anima", "alice", "nope", "x");
    expect(tool.code).toBe(5);
    expect(tool.stderr).toMatch(/available tools: .*broken, .*notes, raw/);
    const action = await cli("--anima", "alice", "notes", "delete");
    expect(action.code).toBe(5);
    expect(action.stderr).toContain("actions: add, fail, big");
  });

  it("exits 6 for a tool that fails to load, saying what to fix", async () => {
    const r = await cli("--anima", "alice", "broken", "x");
    expect(r.code).toBe(6);
    expect(r.stderr).toContain("LoadError");
    expect(r.stderr).toContain("broken_<action>");
  });

  it("exits 2 for an unknown Anima, listing the known ones, and when no Anima is given", async () => {
    const unknown = await cli("--anima", "carol", "notes", "add", "a", "b");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("known Animas: alice, bob");
    const none = await cli("notes", "add", "a", "b");
    expect(none.code).toBe(5); // without an Anima, personal tools are not visible
  });

  it("truncates output over 50,000 bytes with a notice of the original size", async () => {
    const r = await cli("--anima", "alice", "notes", "big");
    expect(r.code).toBe(0);
    expect(Buffer.byteLength(r.stdout.split("\n\n[Output truncated")[0] as string)).toBeLessThanOrEqual(50_000);
    expect(r.stdout).toContain("Original size: 80000 bytes");
  });

  it("passes the raw argv to cli_main", async () => {
    const r = await cli("--anima", "alice", "raw", "echo", "--weird", "-x", "positional");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('argv=["echo","--weird","-x","positional"]');
  });

  it("generates help at three levels", async () => {
    const top = await cli("--anima", "alice", "--help");
    expect(top.code).toBe(0);
    expect(top.stdout).toContain("notes");
    expect(top.stdout).toMatch(/broken\s+\[unavailable:/);
    const tool = await cli("--anima", "alice", "notes", "--help");
    expect(tool.stdout).toMatch(/add\s+Add a note\./);
    const action = await cli("--anima", "alice", "notes", "add", "--help");
    expect(action.stdout).toContain("Usage: animaworks-tool notes add <title> <body> [options]");
    expect(action.stdout).toContain("--pinned / --no-pinned");
    expect(action.stdout).toContain("default: 1");
    const bare = await cli("--anima", "alice");
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain("Usage: animaworks-tool");
  });

  it("refuses a data dir that does not exist, and creates nothing", async () => {
    const missing = join(data.dir, "no", "such", "dir");
    const run = await runner.run(["--data-dir", missing, "--anima", "alice", "list"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^Error \(NotFound\): the data dir .*no\/such\/dir does not exist — check --data-dir/);
    const help = await runner.run(["--data-dir", missing, "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: animaworks-tool");
    expect((await runner.run(["--data-dir", missing, "--version"])).code).toBe(0);
    expect(existsSync(join(data.dir, "no"))).toBe(false);
  });

  it("treats unknown global options and extra words as usage errors; prints its version and a tool's help", async () => {
    const bogus = await cli("--anima", "alice", "--bogus", "list");
    expect(bogus.code).toBe(2);
    expect(bogus.stderr).toBe("Error (InvalidArguments): unknown option --bogus — animaworks-tool --help lists the options");
    const extra = await cli("--anima", "alice", "list", "everything");
    expect(extra.code).toBe(2);
    expect(extra.stderr).toContain('unexpected argument "everything"');
    const version = await cli("--version");
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^animaworks-tool \d+\.\d+\.\d+$/);
    const help = await cli("--anima", "alice", "help", "notes");
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: animaworks-tool notes <action>/);
    const top = await cli("--help");
    for (const option of ["--data-dir", "--anima", "--no-daemon", "--version", "--jobs-url"]) expect(top.stdout).toContain(option);
  });

  it("lists and describes tools, as text and JSON", async () => {
    const list = await cli("--anima", "alice", "list");
    expect(list.stdout).toMatch(/notes\s+add, fail, big\s+\(personal\)/);
    const json = JSON.parse((await cli("--anima", "alice", "list", "--json")).stdout);
    const personal = json.tools.filter((t: { origin: string }) => t.origin === "personal");
    expect(personal.map((t: { name: string }) => t.name)).toEqual(["broken", "notes", "raw"]);
    expect(json.tools.find((t: { name: string }) => t.name === "broken").error.type).toBe("LoadError");
    const described = await cli("--anima", "alice", "describe", "notes");
    expect(described.stdout).toContain("notes_add: Add a note.");
    expect(described.stdout).toContain('"required"');
  });

  it("refresh reports loaded, changed, removed and failed tools", async () => {
    const first = await cli("--anima", "bob", "refresh");
    expect(first.stdout).toContain("Refreshed tools");
    data.write("animas/bob/tools/extra.ts", "export function get_tool_schemas(){return [{name:'extra_x'}]}\nexport function dispatch(){return 1}");
    data.write("animas/bob/tools/bad.ts", "export function get_tool_schemas(){return [{name:'nope'}]}");
    data.write("animas/bob/tools/web_fetch.ts", "export function get_tool_schemas(){return []}");
    const second = await cli("--anima", "bob", "refresh");
    expect(second.code).toBe(6);
    expect(second.stdout).toMatch(/skipped {2}web_fetch: personal tool "web_fetch" has the name of a core tool/);
    rmSync(join(data.dir, "animas/bob/tools/web_fetch.ts"));
    expect(second.stdout).toContain("loaded   extra");
    // Every finding validate gives for the file, each at its place (path:line:col first).
    expect(second.stdout).toMatch(
      /failed {3}bad: 3 errors, 1 warning \(tools\/bad\.ts\)\n {2}tools\/bad\.ts:1:\d+: error \[schemas\] schema "nope" must be named bad_<action>/,
    );
    data.write("animas/bob/tools/extra.ts", "export function get_tool_schemas(){return [{name:'extra_y'}]}\nexport function dispatch(){return 2}");
    const third = await cli("--anima", "bob", "refresh");
    expect(third.stdout).toContain("changed  extra");
    rmSync(join(data.dir, "animas/bob/tools/extra.ts"));
    rmSync(join(data.dir, "animas/bob/tools/bad.ts"));
    const fourth = await cli("--anima", "bob", "refresh");
    expect(fourth.code).toBe(0);
    expect(fourth.stdout).toContain("removed  extra");
  });

  it("validate prints one line per finding and exits non-zero on errors", async () => {
    const good = await cli("validate", join(data.dir, "animas/alice/tools/notes.ts"));
    expect(good.code).toBe(0);
    const bad = await cli(
      "validate",
      data.write(
        "elsewhere/leaky.ts",
        'import fs from "node:fs";\nconst API_KEY = "sk-abcdefghijklmnopqrstuvwxyz123456";\nexport function get_tool_schemas(){return [{name:"leaky_x",description:"x"}]}\nexport function dispatch(){}',
      ),
    );
    expect(bad.code).toBe(6);
    expect(bad.stdout).toMatch(/error \[.*\].*node:fs/);
    expect(bad.stdout).toMatch(/secret/i);
  });

  it("validate loads a draft anywhere (here: in the data dir, outside a tools folder) and sets it against the installed tools", async () => {
    const draft = (schema: string) =>
      `export function get_tool_schemas() { return [{ name: "${schema}", description: "Adds.", input_schema: { type: "object", properties: {} } }]; }\nexport function dispatch() { return 1; }\n`;
    const path = data.write("animas/alice/scratch/draft.ts", draft("wrongprefix_b"));
    const cwd = join(data.dir, "animas", "alice");
    const bad = await runner.run(["--data-dir", data.dir, "validate", "scratch/draft.ts"], { cwd });
    expect(bad.ranBy).toBe(mode === "daemon" ? "host" : "in-process"); // the relative path is the client's
    expect(bad.code).toBe(6);
    expect(bad.stdout).toBe(
      `${path}:1:48: error [schemas] schema "wrongprefix_b" must be named draft_<action> (the file is draft; e.g. draft_query)\n${path}: 1 error, 0 warnings`,
    );
    data.write("animas/alice/scratch/draft.ts", draft("notes_add"));
    // --name: checked as tool "notes", which alice already has (a warning); without an Anima, no such tool.
    const named = await runner.run(["--data-dir", data.dir, "--anima", "alice", "validate", "scratch/draft.ts", "--name", "notes"], { cwd });
    expect(named.code).toBe(0);
    expect(named.stdout).toBe(
      `${path}: warning [shadowing] Anima "alice" already has a personal tool named "notes": installing this one as its personal tool would replace it\n${path}: 0 errors, 1 warning (loaded in the sandbox)`,
    );
    expect((await cli("validate", path, "--name=notes")).stdout).toBe(`${path}: OK, no problems found (loaded in the sandbox)`);
    const badName = await cli("validate", path, "--name", "list");
    expect(badName.code).toBe(2);
    expect(badName.stderr).toMatch(/^Error \(InvalidArguments\): --name: "list" is an animaworks-tool command/);
    // Named like a core tool: shadowing is an error.
    const core = await cli("--anima", "alice", "validate", data.write("elsewhere/text_stats.ts", draft("text_stats_words")));
    expect(core.code).toBe(6);
    expect(core.stdout).toMatch(/error \[shadowing\] a core tool named "text_stats" exists: a shared or personal tool of that name would be skipped/);
  });

  it("share needs the shared-tool permission and never overwrites", async () => {
    const denied = await cli("--anima", "alice", "share", "notes");
    expect(denied.code).toBe(4);
    data.write("animas/alice/permissions.md", "## Tool creation\n- Personal tools: yes\n- Shared tools: yes\n");
    const shared = await cli("--anima", "alice", "share", "notes");
    expect(shared.stdout).toBe("Shared tool 'notes' to common_tools/. All animas can now use it after refresh_tools.");
    const again = await cli("--anima", "alice", "share", "notes");
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain("notes");
    // the audit report flags a shared tool edited after it was shared
    expect((await cli("audit", "--anima", "alice")).stdout).not.toContain("do not match");
    data.write("common_tools/notes.ts", `${NOTES_TOOL}\n// edited in place`);
    const audit = await cli("audit", "--anima", "alice");
    expect(audit.stdout).toMatch(
      /^Audit trails: verified, every chain whole \(\d+ trails\)\n\nSummary: 1 Anima, [^\n]*\n( {2}.*\n)+\nConfiguration \(flag > environment > "animaworks_tool" in .*config\.json > default\):\n( {2}.*\n)+\nIsolation layers \(long-running hosts: serve, mcp\):\n {2}runtime: Node\.js .*, isolated-vm \d+\.\d+\.\d+.*\n( {2}WARNING: .*\n)* {2}isolate: isolated-vm, \d+ MB heap, \d+ ms per call\n {2}sandbox processes: \d+/,
    );
    expect(audit.stdout).toMatch(/\n {2}OS sandbox: (bubblewrap \(namespaces user, pid, net|OFF \()/);
    expect(audit.stdout).toMatch(/\n {2}warm pool: .*least recently used disposed first; an idle isolate may hold up to 4 JavaScript tools of one Anima/);
    const auditJson = JSON.parse((await cli("audit", "--anima", "alice", "--json")).stdout) as { isolation: { osSandbox: { mode: string; enabled: boolean } } };
    expect(auditJson.isolation.osSandbox.mode).toBe("auto");
    const offJson = JSON.parse((await cli("--os-sandbox", "off", "audit", "--anima", "alice", "--json")).stdout) as {
      isolation: { osSandbox: { enabled: boolean; reason: string } };
    };
    expect(offJson.isolation.osSandbox).toMatchObject({ enabled: false, reason: expect.stringContaining("disabled by configuration") });
    expect(audit.stdout).toMatch(/Shared tools that do not match their share record:\n {2}notes: modified \(shared by alice\)/);
  });

  it.runIf(mode === "daemon")("ran every invocation on the host but those asking for other host options", () => {
    // The host runs with OS sandbox mode "auto": the calls with --os-sandbox off ran in-process (an invalid
    // mode is the host's to report).
    expect(declined.map((argv) => argv.join(" "))).toEqual(["--anima alice --os-sandbox off notes add T B", "--os-sandbox off audit --anima alice --json"]);
  });
});
