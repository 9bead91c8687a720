import { join } from "node:path";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

// The SDK's Client always asks for the newest revision; this opens the server with the official stdio
// transport and an initialize of the revision under test, then lists tools.
let data: TempDataDir;
beforeAll(() => {
  data = makeDataDir({ "animas/alice/tools/.keep": "" });
});
afterAll(() => data.cleanup());

async function initializeWith(protocolVersion: string): Promise<{ initialized: Record<string, unknown>; tools: Array<{ name: string }> }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", data.dir, "mcp", "--anima", "alice"],
    stderr: "ignore",
  });
  const replies = new Map<number, (message: JSONRPCMessage) => void>();
  transport.onmessage = (message) => {
    if ("id" in message && typeof message.id === "number") replies.get(message.id)?.(message);
  };
  await transport.start();
  const request = (id: number, method: string, params: Record<string, unknown>) =>
    new Promise<Record<string, unknown>>((resolve) => {
      replies.set(id, (message) => resolve((message as { result: Record<string, unknown> }).result));
      void transport.send({ jsonrpc: "2.0", id, method, params });
    });
  try {
    const initialized = await request(1, "initialize", { protocolVersion, capabilities: {}, clientInfo: { name: "test", version: "1.0.0" } });
    await transport.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    const listed = await request(2, "tools/list", {});
    return { initialized, tools: listed["tools"] as Array<{ name: string }> };
  } finally {
    await transport.close();
  }
}

describe("MCP protocol revisions", () => {
  for (const revision of ["2025-11-25", "2025-06-18"]) {
    it(`initializes with revision ${revision} and serves tools`, async () => {
      const { initialized, tools } = await initializeWith(revision);
      expect(initialized["protocolVersion"]).toBe(revision);
      expect(tools.map((tool) => tool.name)).toContain("write_memory_file");
    });
  }
});
