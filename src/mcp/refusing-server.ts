import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { ToolHostError } from "../errors.js";

/** A running MCP server (startMcpServer). */
export interface McpServerHandle {
  server: Server;
  close(): Promise<void>;
  /** Set when the server could only refuse (an unknown Anima): the exit code for `animaworks-tool mcp`. */
  exitCode?: number;
  /** Why the server only refuses (set with `exitCode`). */
  refusal?: ToolHostError;
}

/**
 * The server for an Anima that cannot be served (unknown, or its folder unreadable): it initializes, so
 * the client hears why in answer to its requests, instead of seeing the connection close at once.
 */
export async function refusingServer(transport: Transport, problem: ToolHostError): Promise<McpServerHandle> {
  const server = new Server({ name: "animaworks-tool", version: "0.1.0" }, { capabilities: { tools: {} } });
  const refuse = (): never => {
    throw new McpError(ErrorCode.InvalidRequest, `${problem.type}: ${problem.message}${problem.hint ? ` — ${problem.hint}` : ""}`);
  };
  server.setRequestHandler(ListToolsRequestSchema, refuse);
  server.setRequestHandler(CallToolRequestSchema, refuse);
  await server.connect(transport);
  return { server, close: () => server.close(), exitCode: problem.exitCode, refusal: problem };
}

/** Counts requests being answered, so that a closing server can answer them first. */
export class InFlight {
  private count = 0;
  private waiters: Array<() => void> = [];

  async track<T>(work: Promise<T>): Promise<T> {
    this.count++;
    try {
      return await work;
    } finally {
      this.count--;
      if (this.count === 0) for (const resolve of this.waiters.splice(0)) resolve();
    }
  }

  /** Settles when nothing is in flight, or after `timeoutMs`. */
  async settled(timeoutMs: number): Promise<void> {
    if (this.count === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise<void>((resolve) => this.waiters.push(resolve)), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }
}
