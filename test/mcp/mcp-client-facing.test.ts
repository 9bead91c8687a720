import { spawn } from "node:child_process";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

const BIN = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");
const SLOW_TOOL = `
import { setTimeout as later } from "@animaworks/tool";
export function get_tool_schemas() { return [{ name: "slow_wait", description: "Answers after 500 ms" }]; }
export async function dispatch() { await new Promise((resolve) => later(resolve, 500)); return "waited"; }
`;

let data: TempDataDir;
const clients: Client[] = [];
async function connect(anima: string): Promise<Client> {
  const client = new Client({ name: "test", version: "1.0.0" });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ["--no-node-snapshot", BIN, "--data-dir", data.dir, "mcp", "--anima", anima],
      stderr: "ignore",
    }),
  );
  clients.push(client);
  return client;
}
const text = (result: Record<string, unknown>) => (result["content"] as Array<{ text: string }>)[0]?.text as string;

beforeAll(() => {
  data = makeDataDir({ "animas/alice/tools/slow.ts": SLOW_TOOL, "animas/bob/tools/.keep": "" });
});
afterAll(async () => {
  for (const client of clients) await client.close();
  data.cleanup();
});

describe("the MCP server, as a client meets it", () => {
  it("reports an unknown Anima in answer to requests, after initialize", async () => {
    const client = await connect("carol");
    await expect(client.listTools()).rejects.toThrow(/NotFound: .*carol.*known Animas: alice, bob/);
  });

  it("answers an unknown tool with the names an MCP client can call, and describes every management parameter", async () => {
    const client = await connect("alice");
    const unknown = await client.callTool({ name: "nope_run", arguments: {} });
    expect(unknown.isError).toBe(true);
    expect(JSON.parse(text(unknown)).hint).toMatch(/^MCP tools: .*write_memory_file.*slow_wait/);
    const { tools } = await client.listTools();
    for (const tool of tools.filter((t) => !t.name.startsWith("slow_"))) {
      for (const [name, schema] of Object.entries(tool.inputSchema.properties ?? {}))
        expect((schema as { description?: string }).description, `${tool.name}.${name}`).toBeTruthy();
    }
  });

  it("answers a call in flight before it exits when the client closes stdin", async () => {
    const child = spawn(process.execPath, ["--no-node-snapshot", BIN, "--data-dir", data.dir, "mcp", "--anima", "alice"], {
      stdio: ["pipe", "pipe", "ignore"],
    });
    let stdout = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`);
    send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "slow_wait", arguments: {} } });
    child.stdin.end();
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code).toBe(0);
    const answer = stdout
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { id?: number; result?: { content: Array<{ text: string }> } })
      .find((m) => m.id === 2);
    expect(answer?.result?.content[0]?.text).toBe("waited");
  });
});
