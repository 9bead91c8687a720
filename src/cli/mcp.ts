import { ToolHostError } from "../errors.js";
import type { ToolHost } from "../host-api.js";
import { startMcpServer } from "../mcp/server.js";
import { GuardedStdioTransport, mcpMessageLimitBytes } from "../mcp/stdio-transport.js";
import { type Output, printError } from "./output.js";

export const MCP_USAGE =
  "Usage: animaworks-tool mcp --anima NAME\nServes the Anima's tools and the management tools over MCP on stdio (the Anima is fixed at launch).";

/** Runs until the client closes stdin. stdout carries the protocol only; logs and errors go to stderr. */
export async function runMcp(host: ToolHost, anima: string | undefined, out: Output): Promise<number> {
  if (anima === undefined) throw new ToolHostError("InvalidArguments", "mcp needs an Anima", "pass --anima NAME or set ANIMAWORKS_ANIMA_DIR");
  const transport = new GuardedStdioTransport({
    maxMessageBytes: mcpMessageLimitBytes(host.config.fsLimits),
    log: (note) => out.stderr(`animaworks-tool mcp: ${note}`),
  });
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once("end", () => resolve());
  });
  const handle = await startMcpServer(host, anima, transport);
  // A server that can only refuse (an unknown Anima) says why at once on stderr too: a client that sends
  // nothing, or an operator trying the command by hand, would otherwise see only the exit code.
  if (handle.refusal) printError(out, handle.refusal.toInfo(), false);
  await closed;
  await handle.close();
  return handle.exitCode ?? 0;
}
