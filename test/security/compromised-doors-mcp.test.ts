import { afterEach, describe, expect, it } from "vitest";
import type { LogRecord } from "../../src/host-options.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, within } from "../helpers/data-dir.js";
import { RawMcpSession } from "../mcp/raw-session.js";
import { ATTACKS, type Door, type DoorAnswer, attackThroughDoor, doorsDataDir, doorsHostOptions } from "./compromised-doors.js";

/**
 * A compromised sandbox process behind the MCP server: one host with sandbox processes, made with the
 * compromised stand-in entry (HostOptions.sandboxEntryScript, the test seam), serves an MCP server for
 * eve and one for alice, each over the stdio transport `animaworks-tool mcp` uses (on in-memory streams),
 * spoken to as a client writes JSON-RPC lines. eve's process attacks; alice's tool calls go on.
 */

interface McpDoors extends Door {
  data: TempDataDir;
  close(): Promise<void>;
}

async function startServers(): Promise<McpDoors> {
  const data = doorsDataDir();
  const logs: LogRecord[] = [];
  const host: ToolHost = createHost({ ...doorsHostOptions(data, logs), isolation: "process" });
  const sessions: RawMcpSession[] = [];
  const close = async (): Promise<void> => {
    data.write("animas/alice/release.txt", "released at the end"); // a held call of alice's ends
    // A session closes once its calls in flight are answered; should one hang, closing the host ends it.
    const closed = Promise.all(sessions.map((session) => session.close()));
    await within(30_000, "the MCP sessions' close", closed).catch(() => host.close());
    await within(30_000, "the MCP sessions' close", closed);
    await host.close();
    data.cleanup();
  };
  try {
    for (const anima of ["alice", "eve"]) {
      const session = await RawMcpSession.inProcess(host, anima);
      sessions.push(session);
      expect(await session.initialize()).toMatchObject({ result: { serverInfo: { name: "animaworks-tool" } } });
      session.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    }
  } catch (error) {
    await close().catch(() => {});
    throw error;
  }
  const [alice, eve] = sessions as [RawMcpSession, RawMcpSession];
  return {
    data,
    host,
    close,
    async call(anima, name, args = {}) {
      const answer = await (anima === "alice" ? alice : eve).request("tools/call", { name, arguments: args }, 120_000);
      // A tool's failure is a result with isError, never a protocol error.
      expect(answer.error).toBeUndefined();
      const result = answer.result as { content: Array<{ type: string; text: string }>; isError?: boolean; structuredContent?: unknown };
      const text = result.content.map((part) => part.text).join("");
      const parsed = (): unknown => {
        try {
          return JSON.parse(text);
        } catch {
          return text;
        }
      };
      const door: DoorAnswer = { transcript: JSON.stringify(answer) };
      if (result.isError) door.error = parsed() as Record<string, unknown>;
      else door.output = result.structuredContent ?? parsed();
      return door;
    },
  };
}

describe("a compromised sandbox process behind the MCP server", () => {
  let doors: McpDoors | undefined;
  afterEach(async () => {
    await doors?.close();
    doors = undefined;
  }, 90_000);

  it.each(ATTACKS.map((attack) => [attack.name, attack] as const))(
    "%s: eve's tool result is a SandboxCrashed error, alice's MCP calls on the same host are answered, the audit log names eve's cordon",
    async (_name, attack) => {
      doors = await startServers();
      await attackThroughDoor(doors, doors.data, attack);
    },
    240_000,
  );
});
