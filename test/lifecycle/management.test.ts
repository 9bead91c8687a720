import { existsSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AuditRecord } from "../../src/audit/audit-log.js";
import { ManagementService, formatRefresh, managementOf } from "../../src/lifecycle/management.js";
import { countFindings, findingLocation } from "../../src/lifecycle/findings.js";
import { hostLoader } from "../../src/lifecycle/load-check.js";
import { MAX_REFRESH_FINDINGS } from "../../src/lifecycle/refresh-findings.js";
import { validateToolFile } from "../../src/lifecycle/validate.js";
import { formatLogRecord } from "../../src/config.js";
import { ToolHostError } from "../../src/errors.js";
import { FolderFreshness, InvocationHost } from "../../src/endpoint/invocation-host.js";
import type { ToolHost } from "../../src/host-api.js";
import { type TestHost, simpleTool, useTestHost } from "../helpers/tools.js";

// The management service: what MCP's management tools and the CLI's refresh/share run, on the host's
// capability path and audit log.

type CapabilityRecord = Extract<AuditRecord, { kind: "capability" }>;

let t: TestHost;
beforeEach(() => {
  t = useTestHost();
});
afterEach(() => t.close());

async function rejectsWith(work: Promise<unknown>, type: ToolHostError["type"]): Promise<void> {
  const error = await work.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ToolHostError);
  expect((error as ToolHostError).type).toBe(type);
}

async function capabilityRecords(): Promise<CapabilityRecord[]> {
  await t.host.audit.flush();
  return (await t.host.audit.read({ anima: "alice" })).filter((record): record is CapabilityRecord => record.kind === "capability");
}

describe("read_memory_file", () => {
  it("reads through the host's capability path, audited as an fs.readFile of the Anima", async () => {
    t.data.write("animas/alice/notes/today.md", "remember the milk");
    expect(await managementOf(t.host).readMemory("alice", "notes/today.md")).toBe("remember the milk");
    expect(await capabilityRecords()).toMatchObject([
      { anima: "alice", tool: "read_memory_file", operation: "fs.readFile", target: "notes/today.md", outcome: "ok" },
    ]);
  });

  it("is held to the same policy as a tool: a path out of the Anima's directory is denied, and the denial recorded", async () => {
    t.data.anima("bob");
    t.data.write("animas/bob/secret.md", "bob's");
    await rejectsWith(managementOf(t.host).readMemory("alice", "../bob/secret.md"), "SandboxViolation");
    expect(await capabilityRecords()).toMatchObject([
      { tool: "read_memory_file", operation: "fs.readFile", outcome: "denied", reason: expect.stringMatching(/^SandboxViolation: /) },
    ]);
    expect(t.logs.some((line) => line.level === "warn" && line.message.startsWith("denied fs.readFile"))).toBe(true);
    expect(t.logs.some((line) => line.message.includes("fs.readFile: fs.readFile"))).toBe(false); // the operation said once
  });

  it("names an unknown Anima", async () => {
    await rejectsWith(managementOf(t.host).readMemory("nobody", "x.md"), "NotFound");
  });

  it("is refused by a service without the host's capability path (a host not made by the composition root)", async () => {
    t.data.write("animas/alice/notes.md", "x");
    await rejectsWith(new ManagementService(t.host).readMemory("alice", "notes.md"), "PermissionDenied");
    // Another ToolHost in front of the host (as a CLI invocation's view of a running host is) has no path.
    const view: ToolHost = { config: t.host.config, audit: t.host.audit, list: (anima) => t.host.list(anima) } as Partial<ToolHost> as ToolHost;
    await rejectsWith(managementOf(view).readMemory("alice", "notes.md"), "PermissionDenied");
    expect(await capabilityRecords()).toEqual([]);
  });
});

describe("write_memory_file", () => {
  it("writes in the Anima's directory and records it", async () => {
    expect(await managementOf(t.host).writeMemory("alice", { path: "notes/a.md", content: "hello" })).toBe("Wrote notes/a.md (5 bytes).");
    expect(readFileSync(join(t.data.dir, "animas", "alice", "notes", "a.md"), "utf8")).toBe("hello");
    expect(await capabilityRecords()).toMatchObject([{ tool: "write_memory_file", operation: "write_memory_file", target: "notes/a.md", outcome: "ok" }]);
  });

  it("records a refusal as denied, and bad arguments as errors", async () => {
    const service = managementOf(t.host);
    await rejectsWith(service.writeMemory("alice", { path: "permissions.json", content: "{}" }), "PermissionDenied");
    await rejectsWith(service.writeMemory("alice", { path: "a.md", content: 5 }), "InvalidArguments");
    // (A denial is kept in the security trail, the error in the ordinary one: within one millisecond their order is not kept.)
    const records = await capabilityRecords();
    expect(records).toHaveLength(2);
    expect(records).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          operation: "write_memory_file",
          target: "permissions.json",
          outcome: "denied",
          reason: expect.stringMatching(/^PermissionDenied: /),
        }),
        expect.objectContaining({ operation: "write_memory_file", target: "a.md", outcome: "error", reason: expect.stringMatching(/^InvalidArguments: /) }),
      ]),
    );
  });

  it("records through the host's audit writer, which a CLI invocation's view hands on; a host without one records nothing", async () => {
    const invocation = new InvocationHost(t.host, t.host.config, new FolderFreshness(t.host));
    await managementOf(invocation).writeMemory("alice", { path: "a.md", content: "a" });
    const double = { config: t.host.config, audit: t.host.audit } as Partial<ToolHost> as ToolHost;
    await managementOf(double).writeMemory("alice", { path: "b.md", content: "b" });
    expect(readFileSync(join(t.data.dir, "animas", "alice", "b.md"), "utf8")).toBe("b");
    expect((await capabilityRecords()).map((record) => record.target)).toEqual(["a.md"]);
  });
});

describe("refresh", () => {
  it("reports what changed since the last refresh, for the CLI and MCP alike", async () => {
    t.personal("alpha.ts", simpleTool("alpha"));
    const service = managementOf(t.host);
    expect(await service.refresh("alice")).toMatchObject({ anima: "alice", loaded: ["alpha"], changed: [], tools: ["alpha"] });
    t.personal("alpha.ts", simpleTool("alpha", ["run", "stop"]));
    const report = await service.refresh("alice");
    expect(report).toMatchObject({ loaded: [], changed: ["alpha"] });
    expect(formatRefresh(report)).toBe("changed  alpha\nRefreshed tools (1 discovered): alpha\nThese tools are now available for use.");
    // With a tool that does not load, the closing line never says that everything is available (issue #35).
    const withFailure = { ...report, failed: [{ name: "halfdone", error: 'halfdone.ts:1:43: Expected "}"' }] };
    expect(formatRefresh(withFailure).split("\n").slice(-2)).toEqual([
      "Refreshed tools (1 discovered): alpha",
      'These tools are available for use; halfdone does not load: fix it (see "failed" above) and refresh again.',
    ]);
    expect(
      formatRefresh({ ...withFailure, tools: [] })
        .split("\n")
        .at(-1),
    ).toBe('halfdone does not load: fix it (see "failed" above) and refresh again.');
  });

  it("refresh_other_animas: an Anima's refresh rebuilds its own view only, not every Anima's", async () => {
    t.personal("alpha.ts", simpleTool("alpha"));
    t.data.anima("eve");
    const views = (t.host as unknown as { views: { views: Map<string, unknown> } }).views;
    expect(await managementOf(t.host).refresh("alice")).toMatchObject({ loaded: ["alpha"] });
    const aliceView = views.views.get("alice");
    expect(aliceView).toBeDefined();
    // eve refreshes (any Anima may, as often as she likes), in the host and through a daemon's view of it,
    // and validates an installed tool of hers: alice's view, and her loaded tools, stay.
    expect(await managementOf(t.host).refresh("eve")).toMatchObject({ anima: "eve" });
    const invocation = new InvocationHost(t.host, t.host.config, new FolderFreshness(t.host));
    expect(await managementOf(invocation).refresh("eve")).toMatchObject({ anima: "eve" });
    t.data.write("animas/eve/tools/mine.ts", simpleTool("mine"));
    expect((await hostLoader(invocation)(join(t.data.dir, "animas/eve/tools/mine.ts"), undefined)).ok).toBe(true);
    expect(views.views.get("alice")).toBe(aliceView);
    // alice's own refresh still sees a change of her tools.
    t.personal("alpha.ts", simpleTool("alpha", ["run", "stop"]));
    expect(await managementOf(t.host).refresh("alice")).toMatchObject({ changed: ["alpha"] });
  });

  it("lists, for a tool that does not load, the findings validate gives for its file, each once, path:line:col first", async () => {
    const source = [
      'import { existsSync, readFileSync, symlinkSync } from "node:fs";',
      'const API_KEY = "sk-abcdefghijklmnopqrstuvwxyz123456";',
      "export function get_tool_schemas() {",
      "  return [",
      '    { name: "multi_go", description: "", input_schema: { type: "object" } },',
      '    { name: "other_x", description: "x", input_schema: { type: "strin" } },',
      "  ];",
      "}",
      'export async function multi_go() { return fetch("https://example.com"); }',
    ].join("\n");
    const path = t.personal("multi.ts", source);
    const report = await managementOf(t.host).refresh("alice");
    const failure = report.failed.find((f) => f.name === "multi");
    const validated = await validateToolFile(path, { load: hostLoader(t.host) });
    expect(validated.findings.length).toBeGreaterThanOrEqual(5);
    expect(failure).toMatchObject({ path: "tools/multi.ts", findings: validated.findings });
    const text = formatRefresh(report).split("\n");
    const head = text.findIndex((line) => line.startsWith("failed   multi: "));
    expect(text[head]).toBe(`failed   multi: ${validated.errors} errors, ${validated.warnings} warning${validated.warnings === 1 ? "" : "s"} (tools/multi.ts)`);
    const listed = text.slice(head + 1, head + 1 + validated.findings.length);
    expect(listed).toEqual(validated.findings.map((f) => `  ${findingLocation("tools/multi.ts", f)}: ${f.level} [${f.check}] ${f.message}`));
    expect(listed.filter((line) => /^ {2}tools\/multi\.ts:\d+(:\d+)?: /.test(line)).length).toBeGreaterThanOrEqual(4);
    // No line repeats the tool's name before its message (the load error's own "multi: " prefix).
    expect(text.some((line) => line.includes("multi: multi:"))).toBe(false);
  });

  it("bounds a long list of findings, pointing at validate for the rest; says a bare load error once", async () => {
    const schemas = Array.from({ length: 14 }, (_, i) => `    { name: "bad_a${i}", description: "", input_schema: { type: "object" } },`);
    const wide = t.personal(
      "wide.ts",
      ["export function get_tool_schemas() {", "  return [", ...schemas, "  ];", "}", "export function dispatch() { return 1; }"].join("\n"),
    );
    const report = await managementOf(t.host).refresh("alice");
    const failure = report.failed.find((f) => f.name === "wide")!;
    // The report keeps the findings it lists and one per level counting the rest: its totals stay whole.
    const validated = await validateToolFile(wide, { load: hostLoader(t.host) });
    const total = validated.errors + validated.warnings;
    expect(total).toBeGreaterThan(MAX_REFRESH_FINDINGS);
    expect(failure.findings!.length).toBeLessThanOrEqual(MAX_REFRESH_FINDINGS + 2);
    expect(countFindings(failure.findings!)).toEqual({ errors: validated.errors, warnings: validated.warnings });
    const text = formatRefresh(report).split("\n");
    const head = text.findIndex((line) => line.startsWith("failed   wide: "));
    expect(text[head + MAX_REFRESH_FINDINGS + 1]).toBe(`  ${total - MAX_REFRESH_FINDINGS} more: run animaworks-tool validate tools/wide.ts`);
    // Without the file's findings (a core tool, a file gone since), the load error is said once, not after the name twice.
    const bare = formatRefresh({ ...report, failed: [{ name: "gone", error: 'gone: schema "x" must be named gone_<action>' }] });
    expect(bare).toContain('failed   gone: schema "x" must be named gone_<action>');
  });

  it("refuses a tool file linked out of its folder without reading the target (symlinked_tool_file_to_config)", async () => {
    // The attack: an Anima links a "tool" to the operator's config.json, then asks refresh (or validate) to
    // report on it: the secrets check quoted the start of each key it found there, its lines their numbers.
    const secrets = ["sk-ant-api03-OPERATORSECRET0123456789abcdefghij", "Zq8xK2mP9vL4nR7tY1wE5uI3oA6sD0fG"];
    const config = JSON.stringify({ credentials: { svc: { api_key: secrets[0] }, db: { api_key: secrets[1] } } }, null, 2);
    t.data.write("outside/config.json", config);
    t.personal("alpha.ts", simpleTool("alpha"));
    const link = join(t.data.dir, "animas", "alice", "tools", "cfg.ts");
    symlinkSync("../../../outside/config.json", link);

    const report = await managementOf(t.host).refresh("alice");
    expect(report.tools).toEqual(["alpha"]); // the other tools are served
    // Neither a secret, nor its masked start, nor any line of the target, nor a finding at its lines.
    const fragments = [...secrets, ...secrets.map((secret) => secret.slice(0, 4)), ...config.split("\n").filter((line) => line.trim().length > 2)];
    const revealsNothing = (output: string): void => {
      for (const fragment of fragments) expect(output).not.toContain(fragment);
      expect(output).not.toMatch(/\[secrets\]|cfg\.ts:\d/);
    };
    revealsNothing(formatRefresh(report));
    revealsNothing(JSON.stringify(report));

    const refused = await validateToolFile(link, { load: hostLoader(t.host) }).then(
      () => expect.unreachable("validate read through the link"),
      (error: unknown) => error as ToolHostError,
    );
    expect(refused).toMatchObject({ type: "InvalidArguments", fault: "caller", message: expect.stringMatching(/link to a file outside its folder/) });
    revealsNothing(JSON.stringify(refused.toInfo()));
  });

  it("validates a link as the loader loads it: one to a file of the same folder is read, a self-link refused", async () => {
    t.personal("alpha_source.txt", simpleTool("alpha"));
    const tools = join(t.data.dir, "animas", "alice", "tools");
    symlinkSync("alpha_source.txt", join(tools, "alpha.ts"));
    symlinkSync("loop.ts", join(tools, "loop.ts"));
    expect(await validateToolFile(join(tools, "alpha.ts"), { load: hostLoader(t.host) })).toMatchObject({ loaded: true, errors: 0 });
    await expect(validateToolFile(join(tools, "loop.ts"))).rejects.toMatchObject({
      type: "InvalidArguments",
      message: expect.stringMatching(/leads back to itself/),
    });
  });

  it("prints a refused file's name on one line, in its skipped line and the host's warning (file_name_fakes_report_lines)", async () => {
    t.personal("alpha.ts", simpleTool("alpha"));
    t.personal("new\nskipped  alpha: forged.ts", simpleTool("x"));
    const text = formatRefresh(await managementOf(t.host).refresh("alice")).split("\n");
    expect(text.filter((line) => line.startsWith("skipped  "))).toEqual([
      'skipped  new\\u000askipped  alpha: forged: "new\\u000askipped  alpha: forged.ts" is not a valid tool name; use letters, digits and "_" (snake_case), starting with a letter',
    ]);
    const warnings = t.logs.filter((record) => record.level === "warn").map(formatLogRecord);
    expect(warnings.some((line) => line.includes("new\\u000askipped"))).toBe(true);
    for (const line of warnings) expect(line).not.toContain("\n");
  });

  it("keeps nothing of its own: a new service of the host compares with the last refresh of any other", async () => {
    t.personal("alpha.ts", simpleTool("alpha"));
    expect(await managementOf(t.host).refresh("alice")).toMatchObject({ loaded: ["alpha"] });
    t.personal("alpha.ts", simpleTool("alpha", ["run", "stop"]));
    expect(await managementOf(t.host).refresh("alice")).toMatchObject({ loaded: [], changed: ["alpha"] });
  });
});

describe("Python tools", () => {
  const PY_TOOL = [
    "from __future__ import annotations",
    "",
    "def get_tool_schemas():",
    '    return [{"name": "x_run", "description": "d", "input_schema": {"type": "object", "properties": {}}}]',
    "",
    "def dispatch(name, args):",
    '    args.pop("anima_dir", None)',
    '    return "ran"',
    "",
  ].join("\n");

  // Each load boots the Python interpreter (seconds), hence the timeouts.
  it("write_memory_file of tools/x.py loads it at once (or says why not); share_tool copies it; a .ts beside it is two files for one tool", async () => {
    const py = useTestHost({ loadTimeoutMs: 60_000 });
    try {
      py.data.write("animas/alice/permissions.json", JSON.stringify({ tool_creation: { personal: true, shared: true } }));
      const service = managementOf(py.host);
      const written = await service.writeMemoryAndLoad("alice", { path: "tools/x.py", content: PY_TOOL });
      expect(written).toEqual({ text: `Wrote tools/x.py (${Buffer.byteLength(PY_TOOL)} bytes). Loaded "x": x_run.` });
      const broken = await service.writeMemoryAndLoad("alice", { path: "tools/y.py", content: "def get_tool_schemas(:\n    return []\n" });
      expect(broken.isError).toBe(true);
      expect(broken.text).toMatch(/^Wrote tools\/y\.py \(\d+ bytes\)\. The tool "y" does not load:/);
      // Each problem as validate gives it, at the file's path (refresh-findings.ts), as for a TypeScript tool.
      expect(broken.text).toMatch(/\n {2}tools\/y\.py(:\d+)*: error \[load\] .*SyntaxError/);

      expect(await service.share("alice", "x")).toBe("Shared tool 'x' to common_tools/. All animas can now use it after refresh_tools.");
      expect(readFileSync(join(py.data.dir, "common_tools", "x.py"), "utf8")).toBe(PY_TOOL);
      expect(existsSync(join(py.data.dir, "common_tools", "x.ts"))).toBe(false);

      const twin = await service.writeMemoryAndLoad("alice", { path: "tools/x.ts", content: simpleTool("x") });
      expect(twin.isError).toBe(true);
      expect(twin.text).toMatch(/It is not loaded: more than one file defines tool "x" \(x\.py, x\.ts\); keep one\.$/);
    } finally {
      await py.close();
    }
  }, 120_000);
});
