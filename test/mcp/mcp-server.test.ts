import { readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { jobPaths } from "../../src/jobs/service.js";
import { liveWorkers } from "../../src/jobs/workers.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";

const NOTE_TOOL = (reply: string) => `
export function get_tool_schemas() {
  return [
    { name: "note_echo", description: "Echo text", input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } },
    { name: "note_fail", description: "Always fails" },
  ];
}
export function dispatch(name, args) {
  if (name === "note_fail") throw new Error("no disk");
  return "${reply}:" + args.text;
}
`;

let data: TempDataDir;
let client: Client;
let listChanged = 0;

beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/note.ts": NOTE_TOOL("v1") });
  client = new Client({ name: "test", version: "1.0.0" });
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
    listChanged++;
  });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", data.dir, "mcp", "--anima", "alice"],
    stderr: "ignore",
  });
  await client.connect(transport);
}, 30_000);

afterAll(async () => {
  await client?.close();
  data.cleanup();
});

describe("MCP server over stdio", () => {
  it("lists the management tools and the Anima's tools with their JSON Schemas", async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const name of [
      "write_memory_file",
      "read_memory_file",
      "refresh_tools",
      "share_tool",
      "list_tools",
      "submit_job",
      "list_jobs",
      "job_status",
      "job_result",
      "cancel_job",
      "note_echo",
      "note_fail",
    ]) {
      expect(names).toContain(name);
    }
    expect(tools.find((t) => t.name === "note_echo")?.inputSchema).toMatchObject({ required: ["text"] });
  });

  it("calls a tool", async () => {
    const result = await client.callTool({ name: "note_echo", arguments: { text: "hi" } });
    expect(result.isError).toBeFalsy();
    expect(result.content).toEqual([{ type: "text", text: "v1:hi" }]);
  });

  it("returns tool failures and bad arguments as results with isError", async () => {
    const failed = await client.callTool({ name: "note_fail", arguments: {} });
    expect(failed.isError).toBe(true);
    expect(JSON.parse((failed.content as Array<{ text: string }>)[0]!.text)).toMatchObject({ error_type: "ExecutionError", message: "no disk" });
    const invalid = await client.callTool({ name: "note_echo", arguments: { text: 5 } });
    expect(invalid.isError).toBe(true);
    expect((invalid.content as Array<{ text: string }>)[0]!.text).toContain("InvalidArguments");
  });

  it("writes a new tool with write_memory_file, reloads, and announces the changed list", async () => {
    const before = listChanged;
    const write = await client.callTool({
      name: "write_memory_file",
      arguments: {
        path: "tools/hello.ts",
        content: 'export function get_tool_schemas(){return [{name:"hello_world",description:"hi"}]}\nexport function dispatch(){return "hello!"}',
      },
    });
    expect(write.isError).toBeFalsy();
    // The answer says what the host did with the file: loaded, with its actions.
    expect((write.content as Array<{ text: string }>)[0]!.text).toMatch(/^Wrote tools\/hello\.ts \(\d+ bytes\)\. Loaded "hello": hello_world\.$/);
    await waitFor(() => listChanged > before, 10_000);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain("hello_world");
    expect((await client.callTool({ name: "hello_world", arguments: {} })).content).toEqual([{ type: "text", text: "hello!" }]);
    const refreshed = await client.callTool({ name: "refresh_tools", arguments: {} });
    expect((refreshed.content as Array<{ text: string }>)[0]!.text).toContain("These tools are now available for use.");
  });

  it("answers write_memory_file of a tool that does not build with why, at which line, as an error (issue #35)", async () => {
    const write = await client.callTool({
      name: "write_memory_file",
      arguments: { path: "tools/halfdone.ts", content: "export function get_tool_schemas() {\n  return [{ name: 'halfdone_run', description: 'x' }\n}\n" },
    });
    expect(write.isError).toBe(true);
    const answer = (write.content as Array<{ text: string }>)[0]!.text;
    // validate's findings, one per line, each starting path:line:col: as editors match them.
    expect(answer).toMatch(/^Wrote tools\/halfdone\.ts \(\d+ bytes\)\. The tool "halfdone" does not load:\n {2}tools\/halfdone\.ts:3:\d+: error \[/);
    expect(answer.trimEnd().endsWith("Fix it and write it again.")).toBe(true);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).not.toContain("halfdone_run");
  });

  it("reads the data dir's shared skills with read_memory_file, and nothing beside them", async () => {
    data.write("common_skills/tool-creator/SKILL.md", "# the skill\n");
    data.write("animas/bob/secret.txt", "bob's");
    symlinkSync(join(data.dir, "animas", "bob", "secret.txt"), join(data.dir, "common_skills", "tool-creator", "link.md"));
    const read = async (path: string) => {
      const result = await client.callTool({ name: "read_memory_file", arguments: { path } });
      return { isError: result.isError === true, text: (result.content as Array<{ text: string }>)[0]!.text };
    };
    expect(await read("common_skills/tool-creator/SKILL.md")).toEqual({ isError: false, text: "# the skill\n" });
    expect(await read("./common_skills/tool-creator/SKILL.md")).toEqual({ isError: false, text: "# the skill\n" });
    for (const path of ["common_skills/tool-creator/link.md", "common_skills/../animas/bob/secret.txt", "common_skills/../../animas/bob/secret.txt"]) {
      const answer = await read(path);
      expect(answer.isError, path).toBe(true);
      expect(answer.text, path).not.toContain("bob's");
      expect(answer.text, path).not.toContain(data.dir);
    }
    // Only for reading: the shared folders are not the Anima's to write.
    const write = await client.callTool({ name: "write_memory_file", arguments: { path: "common_skills/tool-creator/SKILL.md", content: "mine" } });
    expect(await read("common_skills/tool-creator/SKILL.md")).toEqual({ isError: false, text: "# the skill\n" });
    expect(write.isError === true || readFileSync(join(data.dir, "animas", "alice", "common_skills", "tool-creator", "SKILL.md"), "utf8") === "mine").toBe(
      true,
    );
  });

  it("refuses to read outside the Anima through read_memory_file", async () => {
    const result = await client.callTool({ name: "read_memory_file", arguments: { path: "../bob/x" } });
    expect(result.isError).toBe(true);
    expect((result.content as Array<{ text: string }>)[0]!.text).toContain("SandboxViolation");
  });
});

describe("background jobs over MCP", () => {
  const text = (result: Awaited<ReturnType<Client["callTool"]>>) => (result.content as Array<{ text: string }>)[0]!.text;

  it("submits a job (a worker starts by itself), follows it, and returns its result", async () => {
    const submitted = await client.callTool({ name: "submit_job", arguments: { name: "note_echo", arguments: { text: "later" }, priority: 2 } });
    expect(submitted.isError).toBeFalsy();
    const receipt = JSON.parse(text(submitted)) as { job_id: string; status: string; warning?: string };
    expect(receipt).toMatchObject({ status: "queued", tool: "note", action: "echo", created: true });
    expect(receipt.warning).toContain("is not marked as long-running");

    const result = await client.callTool({ name: "job_result", arguments: { job_id: receipt.job_id, wait_seconds: 20 } });
    expect(JSON.parse(text(result))).toEqual({ job_id: receipt.job_id, status: "ok", output: "v1:later" });
    const status = JSON.parse(text(await client.callTool({ name: "job_status", arguments: { job_id: receipt.job_id } })));
    expect(status).toMatchObject({ job_id: receipt.job_id, status: "succeeded", priority: 2, args: { text: "later" } });
    const listed = JSON.parse(text(await client.callTool({ name: "list_jobs", arguments: { status: ["succeeded"] } }))) as Array<{ job_id: string }>;
    expect(listed.map((j) => j.job_id)).toContain(receipt.job_id);
    // The worker started on demand leaves once the queue is drained.
    await waitFor(() => liveWorkers(jobPaths(data.dir).workersDir).length === 0, 15_000, 50);
  });

  it("refuses bad arguments with nothing queued, and answers unknown ids as NotFound", async () => {
    const before = JSON.parse(text(await client.callTool({ name: "list_jobs", arguments: {} }))) as unknown[];
    const bad = await client.callTool({ name: "submit_job", arguments: { name: "note_echo", arguments: { text: 5 } } });
    expect(bad.isError).toBe(true);
    expect(JSON.parse(text(bad))).toMatchObject({ error_type: "InvalidArguments" });
    expect(JSON.parse(text(await client.callTool({ name: "list_jobs", arguments: {} })))).toHaveLength(before.length);
    for (const name of ["job_status", "job_result", "cancel_job"]) {
      const unknown = await client.callTool({ name, arguments: { job_id: "000000000000" } });
      expect(unknown.isError, name).toBe(true);
      expect(JSON.parse(text(unknown))).toMatchObject({ error_type: "NotFound" });
    }
    const badWait = await client.callTool({ name: "job_result", arguments: { job_id: "000000000000", wait_seconds: 9_999 } });
    expect(JSON.parse(text(badWait))).toMatchObject({ error_type: "InvalidArguments" });
  });
});
