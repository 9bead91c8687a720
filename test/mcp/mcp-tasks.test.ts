import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CallToolResultSchema, CreateTaskResultSchema, TaskStatusNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { jobPaths } from "../../src/jobs/service.js";
import { liveWorkers } from "../../src/jobs/workers.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";
import { jobsTool } from "../jobs-cli/helpers.js";

// Background jobs as MCP tasks, driven with the official client over stdio.
let data: TempDataDir;
const clients: Client[] = [];
const statusNotes: Array<{ taskId: string; status: string }> = [];

async function connect(anima: string): Promise<Client> {
  const client = new Client({ name: "test", version: "1.0.0" });
  client.setNotificationHandler(TaskStatusNotificationSchema, async (note) => void statusNotes.push(note.params));
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", data.dir, "mcp", "--anima", anima],
      stderr: "ignore",
    }),
  );
  clients.push(client);
  return client;
}

const createTask = (client: Client, name: string, args: Record<string, unknown>) =>
  client.request({ method: "tools/call", params: { name, arguments: args, task: { ttl: 600_000 } } }, CreateTaskResultSchema);

let alice: Client;
beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/bg.ts": jobsTool(), "animas/bob/tools/bg.ts": jobsTool() });
  alice = await connect("alice");
}, 30_000);
afterAll(async () => {
  for (const client of clients) await client.close();
  await waitFor(() => liveWorkers(jobPaths(data.dir).workersDir).length === 0, 20_000, 50).catch(() => {});
  data.cleanup();
});

describe("background jobs as MCP tasks", () => {
  it("declares task support on background-eligible actions only", async () => {
    const { tools } = await alice.listTools();
    expect(tools.find((t) => t.name === "bg_echo")?.execution).toEqual({ taskSupport: "optional" });
    expect(tools.find((t) => t.name === "bg_quick")?.execution).toBeUndefined();
  });

  it("runs a task as a job: created, polled, listed, its result fetched, its status notified", async () => {
    const { task } = await createTask(alice, "bg_echo", { text: "hello", times: 2 });
    expect(task.status).toBe("working");
    expect(task.taskId).toMatch(/^[0-9a-f]{12}$/); // the job id
    await waitFor(async () => (await alice.experimental.tasks.getTask(task.taskId)).status === "completed", 30_000, 100);
    const result = await alice.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(result.content).toEqual([{ type: "text", text: "hello hello" }]);
    expect(result.isError).toBeFalsy();
    expect((await alice.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toContain(task.taskId);
    // The same job, seen through the job tools.
    const status = await alice.callTool({ name: "job_status", arguments: { job_id: task.taskId } });
    expect(JSON.parse((status.content as Array<{ text: string }>)[0]?.text as string)).toMatchObject({ status: "succeeded" });
    await waitFor(() => statusNotes.some((note) => note.taskId === task.taskId && note.status === "completed"), 5_000, 50);
  });

  it("cancels a running task; its result is an error", async () => {
    const { task } = await createTask(alice, "bg_sleep", { ms: 60_000 });
    await waitFor(async () => (await alice.experimental.tasks.getTask(task.taskId)).statusMessage !== "queued", 30_000, 100);
    await alice.experimental.tasks.cancelTask(task.taskId);
    await waitFor(async () => (await alice.experimental.tasks.getTask(task.taskId)).status === "cancelled", 10_000, 100);
    const result = await alice.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(result.isError).toBe(true);
  });

  it("refuses a task for an action that is not background-eligible, and a plain call still runs directly", async () => {
    await expect(createTask(alice, "bg_quick", {})).rejects.toThrow(/does not run as a task/);
    const direct = await alice.callTool({ name: "bg_echo", arguments: { text: "now" } });
    expect(direct.content).toEqual([{ type: "text", text: "now" }]);
  });

  it("keeps each Anima's tasks to itself", async () => {
    const { task } = await createTask(alice, "bg_echo", { text: "mine" });
    const bob = await connect("bob");
    await expect(bob.experimental.tasks.getTask(task.taskId)).rejects.toThrow(/not found/i);
    expect((await bob.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).not.toContain(task.taskId);
  });
});
