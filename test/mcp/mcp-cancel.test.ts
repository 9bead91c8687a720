import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";

/**
 * cancelled_call_keeps_running: a client's `notifications/cancelled` (the SDK sends it when a request's
 * signal aborts) stops the tool's call, as Ctrl-C stops a CLI call. Before, the call ran on to its
 * deadline, holding its isolate, and the server waited for it at stdin's end.
 */
const WAITER = `
import { sleep } from "@animaworks/tool";
export function get_tool_schemas() {
  return [{ name: "waiter_hold", description: "waits for ever", input_schema: { type: "object", properties: {} } }];
}
export async function dispatch() {
  for (;;) await sleep(20);
}
`;

let data: TempDataDir;
let client: Client;

beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/waiter.ts": WAITER, "config.json": JSON.stringify({ animaworks_tool: { timeout_ms: 120_000 } }) });
  client = new Client({ name: "test", version: "1.0.0" });
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

/** The `call` records of alice's trail (each call's end), as the host wrote them. */
function endedCalls(): Array<Record<string, unknown>> {
  const trail = join(data.dir, "logs", "animaworks-tool", "audit", "animas", "alice.jsonl");
  if (!existsSync(trail)) return [];
  return readFileSync(trail, "utf8")
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((record) => record["kind"] === "call");
}

describe("cancelled_call_keeps_running", () => {
  it("a cancelled tools/call stops the tool's call well before its deadline", async () => {
    const controller = new AbortController();
    const call = client
      .callTool({ name: "waiter_hold", arguments: {} }, undefined, { signal: controller.signal, timeout: 120_000 })
      .catch((error: unknown) => error);
    // The call is running once its start is in the trail.
    const trail = join(data.dir, "logs", "animaworks-tool", "audit", "animas", "alice.jsonl");
    await waitFor(() => existsSync(trail) && readFileSync(trail, "utf8").includes('"kind":"call_start"'), 20_000);
    controller.abort("changed my mind");
    expect(await call).toBeInstanceOf(Error);
    // Ended by its caller, long before its 120 s deadline.
    await waitFor(() => endedCalls().length > 0, 15_000);
    expect(JSON.stringify(endedCalls()[0])).not.toContain("Timeout");
    // The server still serves.
    expect((await client.listTools()).tools.some((tool) => tool.name === "waiter_hold")).toBe(true);
  }, 60_000);
});
