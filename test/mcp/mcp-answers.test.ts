import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { CallToolResultSchema, CreateTaskResultSchema, ErrorCode, type McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { JobService } from "../../src/jobs/service.js";
import { type McpServerHandle, startMcpServer } from "../../src/mcp/server.js";
import { TASK_TTL_MS } from "../../src/mcp/job-tasks.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";
import { simpleTool } from "../helpers/tools.js";
import { jobsTool } from "../jobs-cli/helpers.js";

/**
 * MCP answers as the CLI gives them and as revision 2025-11-25 says (#35 item 5): a refused share_tool
 * carries the CLI's hint and fault; tasks/cancel answers `cancelled`; a task's ttl is one value in every
 * answer; a task call of a tool without task support is -32601; submit_job names arguments it does not take.
 */
let data: TempDataDir;
let host: ToolHost;
let jobs: JobService;
let server: McpServerHandle;
let client: Client;
const stopWorker = new AbortController();
let worker: Promise<unknown>;

beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/bg.ts": jobsTool(), "animas/alice/tools/mine.ts": simpleTool("mine") });
  host = createHost({ dataDir: data.dir, isolation: "in-process", onLog: () => {} });
  // Heartbeat every 100 ms: a cancel is seen that soon; a short grace keeps the forced stop quick.
  jobs = new JobService({ host, worker: { pollIntervalMs: 20, heartbeatIntervalMs: 100, idleCheckIntervalMs: 20, cancelGraceMs: 300 } });
  worker = jobs.runWorker({ signal: stopWorker.signal });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  server = await startMcpServer(host, "alice", serverSide, { jobs, startWorkers: false, watch: false });
  client = new Client({ name: "test", version: "1.0.0" });
  await client.connect(clientSide);
}, 30_000);
afterAll(async () => {
  await client?.close();
  await server?.close();
  stopWorker.abort();
  await worker;
  await jobs?.close();
  await host?.close();
  data.cleanup();
});

const text = (result: unknown): string => ((result as { content: Array<{ text: string }> }).content[0] as { text: string }).text;
const createTask = (name: string, args: Record<string, unknown>) =>
  client.request({ method: "tools/call", params: { name, arguments: args, task: { ttl: 60_000 } } }, CreateTaskResultSchema);
const rpcError = (promise: Promise<unknown>): Promise<McpError> =>
  promise.then(
    () => {
      throw new Error("expected a JSON-RPC error");
    },
    (error: unknown) => error as McpError,
  );

describe("MCP answers agree with the CLI", () => {
  it("a refused share_tool gives the envelope of the CLI's -j: type, fault and hint", async () => {
    const result = await client.callTool({ name: "share_tool", arguments: { tool_name: "mine" } });
    expect(result.isError).toBe(true);
    const envelope = JSON.parse(text(result)) as Record<string, unknown>;
    expect(envelope).toMatchObject({ error_type: "PermissionDenied", fault: "host", hint: expect.stringContaining("permissions.json") });
    const stdout: string[] = [];
    const code = await main(["--data-dir", data.dir, "--anima", "alice", "share", "mine", "-j"], { stdout: (t) => void stdout.push(t), stderr: () => {} });
    expect(code).toBe(4);
    expect(envelope).toEqual(JSON.parse(stdout.join("")));
  });

  it("a refused write or read outside the Anima's own folder is the caller's, never a tool's (#35 item 4)", async () => {
    data.write("animas/bob/notes.md", "bob's");
    for (const [name, args] of [
      ["write_memory_file", { path: "../bob/notes.md", content: "x" }],
      ["read_memory_file", { path: "../bob/notes.md" }],
    ] as const) {
      const result = await client.callTool({ name, arguments: args });
      expect(result.isError, name).toBe(true);
      expect(JSON.parse(text(result)), name).toMatchObject({ error_type: "SandboxViolation", fault: "caller" });
    }
  });

  it("submit_job with arguments it does not take names them, the ones it takes, and the name they make", async () => {
    const result = await client.callTool({ name: "submit_job", arguments: { tool: "bg", action: "echo", arguments: { text: "x" } } });
    expect(result.isError).toBe(true);
    expect(JSON.parse(text(result))).toMatchObject({
      error_type: "InvalidArguments",
      fault: "caller",
      message: 'submit_job: unknown arguments "tool", "action"; it takes name (required), arguments, priority, idempotency_key',
      hint: expect.stringContaining('{"name": "bg_echo"'),
    });
    const { tools } = await client.listTools();
    expect(tools.find((tool) => tool.name === "submit_job")?.inputSchema).toMatchObject({ additionalProperties: false });
  });
});

describe("MCP tasks as revision 2025-11-25 says", () => {
  it("a task call of a tool without task support is -32601 (Method not found); of an unknown tool -32602", async () => {
    const forbidden = await rpcError(createTask("bg_quick", {}));
    expect([forbidden.code, forbidden.message]).toEqual([ErrorCode.MethodNotFound, expect.stringContaining("does not run as a task")]);
    expect((await rpcError(createTask("share_tool", { tool_name: "mine" }))).code).toBe(ErrorCode.MethodNotFound);
    expect((await rpcError(createTask("bg_nothing", {}))).code).toBe(ErrorCode.InvalidParams);
  });

  it("tasks/cancel answers cancelled, for good; the ttl is one value in every answer; the result is what the job left", async () => {
    const { task } = await createTask("bg_sleep", { ms: 60_000 });
    expect(task.ttl).toBe(TASK_TTL_MS);
    await waitFor(async () => (await jobs.get("alice", task.taskId)).status === "running", 15_000, 20);
    const running = await client.experimental.tasks.getTask(task.taskId);
    expect([running.status, running.ttl]).toEqual(["working", TASK_TTL_MS]);
    // The answer itself says cancelled, although the job is still stopping.
    const cancelled = await client.experimental.tasks.cancelTask(task.taskId);
    expect([cancelled.status, cancelled.ttl]).toEqual(["cancelled", TASK_TTL_MS]);
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe("cancelled");
    const listed = (await client.experimental.tasks.listTasks()).tasks.find((t) => t.taskId === task.taskId);
    expect([listed?.status, listed?.ttl]).toEqual(["cancelled", TASK_TTL_MS]);
    // tasks/result waits for the job to stop, then answers with what it left: here, the cancellation.
    const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(result.isError).toBe(true);
    expect(JSON.parse(text(result))).toMatchObject({ error_type: "ExecutionError", fault: "caller" });
    expect((await jobs.get("alice", task.taskId)).status).toBe("cancelled");
    const after = await client.experimental.tasks.getTask(task.taskId);
    expect([after.status, after.ttl]).toEqual(["cancelled", TASK_TTL_MS]);
    // A terminal task cannot be cancelled again (-32602).
    expect((await rpcError(client.experimental.tasks.cancelTask(task.taskId))).code).toBe(ErrorCode.InvalidParams);
  });
});
