import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/config.js";
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
    args: ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.mjs"), "--data-dir", data.dir, "mcp", "--anima", "alice"],
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
    for (const name of ["write_memory_file", "read_memory_file", "refresh_tools", "share_tool", "list_tools", "note_echo", "note_fail"]) {
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
      arguments: { path: "tools/hello.ts", content: 'export function get_tool_schemas(){return [{name:"hello_world",description:"hi"}]}\nexport function dispatch(){return "hello!"}' },
    });
    expect(write.isError).toBeFalsy();
    await waitFor(() => listChanged > before, 10_000);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain("hello_world");
    expect((await client.callTool({ name: "hello_world", arguments: {} })).content).toEqual([{ type: "text", text: "hello!" }]);
    const refreshed = await client.callTool({ name: "refresh_tools", arguments: {} });
    expect((refreshed.content as Array<{ text: string }>)[0]!.text).toContain("These tools are now available for use.");
  });

  it("refuses to read outside the Anima through read_memory_file", async () => {
    const result = await client.callTool({ name: "read_memory_file", arguments: { path: "../bob/x" } });
    expect(result.isError).toBe(true);
    expect((result.content as Array<{ text: string }>)[0]!.text).toContain("SandboxViolation");
  });
});
