import { existsSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { jobPaths } from "../../src/jobs/service.js";
import { liveWorkers } from "../../src/jobs/workers.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";
import { type TestDatabase, createTestDatabase } from "../helpers/postgres.js";

/** The MCP server's job tools use PostgreSQL when `$ANIMAWORKS_JOBS_URL` names it, and nothing else changes. */
const TOOL = `
export function get_tool_schemas() {
  return [{ name: "note_echo", description: "Echo text", input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } }];
}
export function dispatch(name, args) { return "pg:" + args.text; }
`;

let data: TempDataDir;
let database: TestDatabase;
let client: Client;

beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/note.ts": TOOL });
  database = await createTestDatabase();
  client = new Client({ name: "test", version: "1.0.0" });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", data.dir, "mcp", "--anima", "alice"],
      env: { ...(process.env as Record<string, string>), ANIMAWORKS_JOBS_URL: database.url },
      stderr: "ignore",
    }),
  );
}, 30_000);

afterAll(async () => {
  await client?.close();
  await database?.drop();
  data?.cleanup();
});

describe("MCP job tools on PostgreSQL", () => {
  const text = (result: Awaited<ReturnType<Client["callTool"]>>) => (result.content as Array<{ text: string }>)[0]!.text;

  it("submits through PostgreSQL, a worker it starts runs the job, and the result comes back", async () => {
    const submitted = await client.callTool({ name: "submit_job", arguments: { name: "note_echo", arguments: { text: "there" } } });
    expect(submitted.isError).toBeFalsy();
    const { job_id } = JSON.parse(text(submitted)) as { job_id: string };
    const result = await client.callTool({ name: "job_result", arguments: { job_id, wait_seconds: 30 } });
    expect(JSON.parse(text(result))).toEqual({ job_id, status: "ok", output: "pg:there" });
    const db = new pg.Client({ connectionString: database.url });
    await db.connect();
    try {
      expect((await db.query("SELECT status FROM animaworks_tool.jobs WHERE id = $1", [job_id])).rows).toEqual([{ status: "succeeded" }]);
    } finally {
      await db.end();
    }
    expect(existsSync(jobPaths(data.dir).store)).toBe(false);
    // The worker started on demand leaves once the queue (in PostgreSQL) is drained.
    await waitFor(() => liveWorkers(jobPaths(data.dir).workersDir).length === 0, 15_000, 50);
  }, 45_000);
});
