import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { createHost } from "../../src/host.js";
import { JobService } from "../../src/jobs/service.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

const BIN = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");
// A tool with an output_schema on one action, none on the others.
const STATS_TOOL = `
export function get_tool_schemas() {
  const output_schema = { type: "object", properties: { count: { type: "integer" }, label: { type: "string" } }, required: ["count"], additionalProperties: false };
  return [
    { name: "stats_count", description: "Counts", input_schema: { type: "object", properties: { n: { type: "integer" } } }, output_schema },
    { name: "stats_wrong", description: "Breaks its output_schema", output_schema },
    { name: "stats_text", description: "Text, though output_schema asks for an object", output_schema },
    { name: "stats_plain", description: "An object, no schema" },
    { name: "stats_words", description: "Text, no schema" },
  ];
}
export function dispatch(name, args) {
  if (name === "stats_count") return { count: args.n ?? 0, label: "items" };
  if (name === "stats_wrong") return { count: "many" };
  if (name === "stats_text") return "three";
  if (name === "stats_plain") return { a: [1, 2] };
  return "just words";
}
`;

let data: TempDataDir;
let client: Client;

function connect(dir: string): Promise<Client> {
  const mcp = new Client({ name: "test", version: "1.0.0" });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--no-node-snapshot", BIN, "--data-dir", dir, "mcp", "--anima", "alice"],
    stderr: "ignore",
  });
  return mcp.connect(transport).then(() => mcp);
}

beforeAll(async () => {
  data = makeDataDir({
    "animas/alice/tools/stats.ts": STATS_TOOL,
    "animas/alice/tools/text_stats.ts": "export function get_tool_schemas() { return []; }",
    "animas/alice/tools/broken.ts": "export function get_tool_schemas() { return [{ name: 'wrong_name' }]; }",
    "config.json": JSON.stringify({ animaworks_tool: { mcp_core_tools: ["text_stats"] } }),
  });
  client = await connect(data.dir);
}, 30_000);
afterAll(async () => {
  await client?.close();
  data.cleanup();
});

describe("structured results over MCP", () => {
  it("lists an action's output_schema as its outputSchema", async () => {
    const { tools } = await client.listTools();
    expect(tools.find((t) => t.name === "stats_count")?.outputSchema).toMatchObject({ type: "object", required: ["count"] });
    expect(tools.find((t) => t.name === "stats_plain")?.outputSchema).toBeUndefined();
  });

  it("gives an object result as structuredContent beside the text, checked against output_schema", async () => {
    const counted = await client.callTool({ name: "stats_count", arguments: { n: 3 } });
    expect(counted.isError).toBeFalsy();
    expect(counted.structuredContent).toEqual({ count: 3, label: "items" });
    expect(JSON.parse((counted.content as Array<{ text: string }>)[0]?.text as string)).toEqual({ count: 3, label: "items" });
    const plain = await client.callTool({ name: "stats_plain", arguments: {} });
    expect(plain.structuredContent).toEqual({ a: [1, 2] });
    const words = await client.callTool({ name: "stats_words", arguments: {} });
    expect(words.structuredContent).toBeUndefined();
    expect(words.content).toEqual([{ type: "text", text: "just words" }]);
  });

  it("turns a result that breaks output_schema into a clear ExecutionError", async () => {
    for (const [name, message] of [
      ["stats_wrong", /the result of stats_wrong does not match its output_schema: .*count/],
      ["stats_text", /stats_text returned text, but its output_schema asks for an object/],
    ] as const) {
      const result = await client.callTool({ name, arguments: {} });
      expect(result.isError).toBe(true);
      const envelope = JSON.parse((result.content as Array<{ text: string }>)[0]?.text as string);
      expect(envelope.error_type).toBe("ExecutionError");
      expect(envelope.message).toMatch(message);
      expect(result.structuredContent).toBeUndefined();
    }
  });

  it("checks output_schema on the CLI path too", () => {
    const run = spawnSync(process.execPath, ["--no-node-snapshot", BIN, "--data-dir", data.dir, "--anima", "alice", "stats", "wrong"], { encoding: "utf8" });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/^Error \(ExecutionError\): the result of stats_wrong does not match its output_schema/m);
  });
});

describe("curated core tools over MCP (config.json animaworks_tool.mcp_core_tools)", () => {
  it("offers only the listed core tools; the others answer that they are reachable through Bash", async () => {
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names.some((name) => name.startsWith("text_stats_"))).toBe(true);
    expect(names.some((name) => name.startsWith("web_fetch_") || name.startsWith("file_search_"))).toBe(false);
    expect(names).toContain("stats_count"); // personal tools are always offered
    const hidden = await client.callTool({ name: "web_fetch_text", arguments: { url: "http://127.0.0.1:9/" } });
    expect(hidden.isError).toBe(true);
    expect(JSON.parse((hidden.content as Array<{ text: string }>)[0]?.text as string)).toMatchObject({
      error_type: "ToolNotFound",
      hint: expect.stringContaining("animaworks-tool web_fetch"),
    });
  });

  it("refuses a hidden core tool as a job too: submit_job runs nothing that tools/call refuses (mcp_job_exposure)", async () => {
    const submitted = await client.callTool({ name: "submit_job", arguments: { name: "file_search_list", arguments: {} } });
    expect(submitted.isError).toBe(true);
    expect(JSON.parse((submitted.content as Array<{ text: string }>)[0]?.text as string)).toMatchObject({
      error_type: "ToolNotFound",
      message: expect.stringContaining('the core tool "file_search" is not offered over MCP'),
      hint: expect.stringContaining("animaworks-tool submit file_search"),
    });
    // No job was made: the Anima's job list over MCP is empty.
    const listed = await client.callTool({ name: "list_jobs", arguments: {} });
    expect((listed.content as Array<{ text: string }>)[0]?.text).not.toContain("file_search");
    // A listed core tool and a personal tool are still submitted.
    const offered = await client.callTool({ name: "submit_job", arguments: { name: "stats_words", arguments: {} } });
    expect(offered.isError).toBeFalsy();
  });

  it("refuses to start with a list that is not of core tool names, naming the key", () => {
    const bad = makeDataDir({ "animas/alice/tools/.keep": "", "config.json": JSON.stringify({ animaworks_tool: { mcp_core_tools: ["text_stats", "nope"] } }) });
    try {
      const run = spawnSync(process.execPath, ["--no-node-snapshot", BIN, "--data-dir", bad.dir, "mcp", "--anima", "alice"], { encoding: "utf8", input: "" });
      // The operator's file is wrong: ToolConfigError, exit 1.
      expect(run.status).toBe(1);
      expect(run.stderr).toMatch(/ToolConfigError.*animaworks_tool\.mcp_core_tools in .*config\.json names "nope", which is not a core tool/);
    } finally {
      bad.cleanup();
    }
  });
});

describe("output_schema declarations", () => {
  it("must be an object schema that compiles: otherwise the tool fails to load, saying why", async () => {
    const bad = makeDataDir({
      "animas/alice/tools/arr.ts": `export function get_tool_schemas() { return [{ name: "arr_x", description: "x", output_schema: { type: "array" } }]; }\nexport function dispatch() { return []; }`,
      "animas/alice/tools/junk.ts": `export function get_tool_schemas() { return [{ name: "junk_x", description: "x", output_schema: { type: "object", properties: { a: { type: "nonsense" } } } }]; }\nexport function dispatch() { return {}; }`,
    });
    const host = createHost({ dataDir: bad.dir, isolation: "in-process", onLog: () => {} });
    try {
      expect((await host.describe("alice", "arr")).error?.message).toMatch(/output_schema must have "type": "object"/);
      expect((await host.describe("alice", "junk")).error?.message).toMatch(/output_schema is not valid JSON Schema/);
    } finally {
      await host.close();
      bad.cleanup();
    }
  });
});

describe("output_schema in background jobs", () => {
  it("holds for a job's run too: a result that breaks it fails the job with ExecutionError", async () => {
    const jobsData = makeDataDir({
      "animas/alice/tools/stats.ts": STATS_TOOL.replace(
        "export function get_tool_schemas",
        "export const EXECUTION_PROFILE = { wrong: { background_eligible: true }, count: { background_eligible: true } };\nexport function get_tool_schemas",
      ),
    });
    const host = createHost({ dataDir: jobsData.dir, isolation: "in-process", onLog: () => {} });
    const service = new JobService({ host, worker: { pollIntervalMs: 20, idleCheckIntervalMs: 20 } });
    try {
      const wrong = await service.submit("alice", "stats_wrong", {});
      const right = await service.submit("alice", "stats_count", { n: 2 });
      await service.runWorker({ untilDrained: true });
      const failed = await service.get("alice", wrong.job.id);
      expect(failed.status).toBe("failed");
      expect(failed.error?.type).toBe("ExecutionError");
      expect(failed.error?.message).toMatch(/does not match its output_schema/);
      expect((await service.get("alice", right.job.id)).status).toBe("succeeded");
    } finally {
      await service.close();
      await host.close();
      jobsData.cleanup();
    }
  });
});

describe("management tools' results", () => {
  const text = (result: Record<string, unknown>) => (result["content"] as Array<{ text: string }>)[0]?.text as string;

  it("refresh_tools is an error when a tool failed, and it and list_tools name the skipped files", async () => {
    const refreshed = await client.callTool({ name: "refresh_tools", arguments: {} });
    expect(refreshed.isError).toBe(true);
    expect(text(refreshed)).toMatch(/failed {3}broken: /);
    expect(text(refreshed)).toMatch(/skipped {2}text_stats: personal tool "text_stats" has the name of a core tool/);
    const listed = JSON.parse(text(await client.callTool({ name: "list_tools", arguments: {} }))) as { skipped: Array<{ name: string; reason: string }> };
    expect(listed.skipped).toEqual([expect.objectContaining({ name: "text_stats", reason: expect.stringContaining("core tool") })]);
  });

  it("job_result of a failed job is an error result", async () => {
    const receipt = JSON.parse(text(await client.callTool({ name: "submit_job", arguments: { name: "stats_wrong", arguments: {} } }))) as { job_id: string };
    const result = await client.callTool({ name: "job_result", arguments: { job_id: receipt.job_id, wait_seconds: 30 } });
    expect(result.isError).toBe(true);
    expect(JSON.parse(text(result))).toMatchObject({ status: "error", error_type: "ExecutionError" });
  });
});
