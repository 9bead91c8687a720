import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../../src/host.js";
import { JobService } from "../../../src/jobs/service.js";
import { type McpServerHandle, startMcpServer } from "../../../src/mcp/server.js";
import { CLI_MODES, type CliRunner, cliRunner } from "../../helpers/cli-modes.js";
import { type TempDataDir, makeDataDir } from "../../helpers/data-dir.js";
import { seedTemplateFiles } from "../../helpers/python-templates.js";

/**
 * The seed's Python templates through every door: the CLI (in-process, and through a running host's
 * daemon endpoint into sandbox processes), MCP, and background jobs — the same answers a TypeScript tool
 * gives there. The API template's server is this test's, on 127.0.0.1 (its address is the template's
 * only change).
 */
const API_KEY = "doors-key-51b2";
/** A Python tool that may run as a background job (the seed's EXECUTION_PROFILE). */
const REPORT = `from __future__ import annotations

EXECUTION_PROFILE = {"build": {"background_eligible": True, "expected_seconds": 120}}


def get_tool_schemas() -> list[dict]:
    return [{"name": "report_build", "description": "Builds a report", "input_schema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}]


def dispatch(name, args):
    args.pop("anima_dir", None)
    return {"report": args["title"].upper()}
`;

let data: TempDataDir;
let server: Server;
beforeAll(async () => {
  server = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    if (req.headers.authorization !== `Bearer ${API_KEY}`) return void res.writeHead(401).end("{}");
    const query = new URL(req.url ?? "/", "http://127.0.0.1").searchParams;
    res.end(JSON.stringify({ results: [`${query.get("q")}:${query.get("limit")}`] }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  data = makeDataDir({
    ...seedTemplateFiles(base, API_KEY),
    "animas/alice/tools/report.py": REPORT,
  });
});
afterAll(async () => {
  data?.cleanup();
  await new Promise((resolve) => server?.close(resolve));
});

describe.each(CLI_MODES)("the Python templates through the CLI (%s)", (mode) => {
  let runner: CliRunner;
  beforeAll(async () => {
    runner = await cliRunner(mode, data.dir);
  }, 60_000);
  afterAll(async () => {
    await runner?.close();
  });
  const cli = (...argv: string[]) => runner.run(["--data-dir", data.dir, "--anima", "alice", ...argv]);

  it("calls the single-schema template with a positional argument and a flag", async () => {
    const run = await cli("my_tool", "action", "abc", "--param2", "4");
    expect({ code: run.code, out: JSON.parse(run.stdout) as unknown }, run.stderr).toEqual({ code: 0, out: { result: "Processed abc with 4" } });
  }, 120_000);

  it("calls the API template with its credential, and -j gives the envelope", async () => {
    const run = await cli("-j", "myapi", "query", "otters", "--limit", "2");
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ status: "ok" });
    expect(run.stdout).toContain("otters:2");
  }, 120_000);

  it("lists the Python tools with their actions", async () => {
    const run = await cli("list");
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/my_tool/);
    expect(run.stdout).toMatch(/myapi/);
  }, 120_000);
});

describe("the Python templates through MCP and as background jobs", () => {
  let host: ToolHost;
  let jobs: JobService;
  let mcp: McpServerHandle;
  let client: Client;
  const stopWorker = new AbortController();
  let worker: Promise<unknown>;
  beforeAll(async () => {
    host = createHost({ dataDir: data.dir, onLog: () => {} });
    jobs = new JobService({ host, worker: { pollIntervalMs: 20, heartbeatIntervalMs: 100, idleCheckIntervalMs: 20 } });
    worker = jobs.runWorker({ signal: stopWorker.signal });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    mcp = await startMcpServer(host, "alice", serverSide, { jobs, startWorkers: false, watch: false });
    client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(clientSide);
  }, 60_000);
  afterAll(async () => {
    await client?.close();
    await mcp?.close();
    stopWorker.abort();
    await worker;
    await jobs?.close();
    await host?.close();
  });

  it("lists and calls them as MCP tools", async () => {
    const listed = await client.listTools();
    expect(listed.tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(["my_tool_action", "myapi_query", "myapi_post", "report_build"]));
    const called = await client.callTool({ name: "myapi_query", arguments: { query: "seals", limit: 1 } });
    expect(called.isError ?? false).toBe(false);
    expect(JSON.parse((called.content as Array<{ text: string }>)[0]!.text)).toEqual(["seals:1"]);
  }, 120_000);

  it("runs a Python action as a background job to its result", async () => {
    const { job } = await jobs.submit("alice", "report_build", { title: "quarterly" });
    const done = await jobs.wait("alice", job.id, { timeoutMs: 60_000, pollIntervalMs: 20 });
    expect(done.status).toBe("succeeded");
    const result = await jobs.result("alice", job.id);
    expect(result).toMatchObject({ status: "ok" });
    expect(JSON.stringify(result)).toContain("QUARTERLY");
  }, 120_000);
});
