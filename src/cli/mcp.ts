import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { ToolHostError } from "../errors.js";
import type { ToolHost } from "../host-api.js";
import { startMcpServer } from "../mcp/server.js";

export const MCP_USAGE = "Usage: animaworks-tool mcp --anima NAME\nServes the Anima's tools and the management tools over MCP on stdio (the Anima is fixed at launch).";

/** Runs until the client closes stdin. stdout carries the protocol only; logs go to stderr. */
export async function runMcp(host: ToolHost, anima: string | undefined): Promise<number> {
  if (anima === undefined) throw new ToolHostError("InvalidArguments", "mcp needs an Anima", "pass --anima NAME or set ANIMAWORKS_ANIMA_DIR");
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once("end", () => resolve());
  });
  const handle = await startMcpServer(host, anima, transport);
  await closed;
  await handle.close();
  return handle.exitCode ?? 0;
}
