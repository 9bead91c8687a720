import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CallToolResultSchema, CreateTaskResultSchema, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { jobPaths } from "../../src/jobs/service.js";
import { liveWorkers } from "../../src/jobs/workers.js";
import { waitFor } from "../helpers/data-dir.js";
import { guideBlocks, toolNameOf } from "../docs/guide-blocks.js";

/**
 * A tool author's whole session, as a user would see it (#35): an operator runs `animaworks-tool init`,
 * gives the Anima an API key and lets its tools reach the (local) API; an MCP client — the official
 * TypeScript SDK, playing the Anima — reads the installed skill with read_memory_file, takes the
 * multi-schema template out of it, points it at the API, writes it with write_memory_file and is told it
 * loaded (and hears list_changed), calls it, submits its long action as a task, cancels the task and
 * gets the partial result the tool returned when it saw `isCancelled()`.
 */
const BIN = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");
const API_KEY = "session-key-1234567890";
const TEMPLATE_API_BASE = 'const API_BASE = "https://api.example.com";';

let dataDir: string;
let server: http.Server;
let base: string;
let client: Client;
let listChanged = 0;
const pagesServed: number[] = [];

const textOf = (result: unknown): string => ((result as { content: Array<{ text: string }> }).content[0] as { text: string }).text;

beforeAll(async () => {
  // The Example API: each page answers after a moment, so a long export can be cancelled between pages.
  server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (req.headers.authorization !== `Bearer ${API_KEY}`) return void res.writeHead(401).end("{}");
    if (url.pathname !== "/search") return void res.writeHead(404).end("{}");
    const page = Number(url.searchParams.get("page"));
    pagesServed.push(page);
    const results = [{ id: `p${page}`, title: `${url.searchParams.get("q")} on page ${page}` }];
    setTimeout(() => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ results })), 50);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  // The operator: init, then the key and the network the tool needs, in config.json.
  dataDir = mkdtempSync(join(tmpdir(), "aw-session-"));
  const init = spawnSync(process.execPath, ["--no-node-snapshot", BIN, "init", dataDir, "--anima", "alice"], { encoding: "utf8", timeout: 60_000 });
  expect(init.status, init.stderr).toBe(0);
  const configFile = join(dataDir, "config.json");
  const config = JSON.parse(readFileSync(configFile, "utf8")) as { credentials?: object; animaworks_tool?: object };
  config.credentials = { ...config.credentials, myapi: { api_key: API_KEY } };
  config.animaworks_tool = { ...config.animaworks_tool, allow_internal_hosts: ["127.0.0.1"] };
  writeFileSync(configFile, JSON.stringify(config, null, 2));

  client = new Client({ name: "anima-alice", version: "1.0.0" });
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => void listChanged++);
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ["--no-node-snapshot", BIN, "--data-dir", dataDir, "mcp", "--anima", "alice"],
      stderr: "ignore",
    }),
  );
}, 60_000);

afterAll(async () => {
  await client?.close();
  await new Promise((resolve) => server?.close(resolve));
  if (dataDir) {
    await waitFor(() => liveWorkers(jobPaths(dataDir).workersDir).length === 0, 20_000, 50).catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  }
});

describe("a tool author's session over MCP", () => {
  let template: string;

  it("reads the installed tool-creator skill and takes its multi-schema template", async () => {
    const skill = await client.callTool({ name: "read_memory_file", arguments: { path: "common_skills/tool-creator/SKILL.md" } });
    expect(skill.isError).toBeFalsy();
    const block = guideBlocks(textOf(skill)).find((candidate) => toolNameOf(candidate) === "myapi");
    expect(block, "the skill holds the myapi template").toBeDefined();
    expect(block!.code).toContain(TEMPLATE_API_BASE);
    template = block!.code.replace(TEMPLATE_API_BASE, `const API_BASE = "${base}";`);
  });

  it("writes the tool and is told it loaded, with its actions; the client hears the list change", async () => {
    const before = listChanged;
    const written = await client.callTool({ name: "write_memory_file", arguments: { path: "tools/myapi.ts", content: template } });
    expect(written.isError, textOf(written)).toBeFalsy();
    expect(textOf(written)).toMatch(/Loaded "myapi": myapi_query, myapi_post, myapi_export\.$/);
    await waitFor(() => listChanged > before, 10_000, 20);
    const { tools } = await client.listTools();
    expect(tools.find((tool) => tool.name === "myapi_export")?.execution).toEqual({ taskSupport: "optional" });
  });

  it("calls it: the result as structured content, checked against its output schema", async () => {
    const result = await client.callTool({ name: "myapi_query", arguments: { query: "otters", limit: 3 } });
    expect(result.isError, textOf(result)).toBeFalsy();
    expect(result.structuredContent).toEqual({ results: [{ id: "p1", title: "otters on page 1" }], count: 1 });
    // The tool's own input check is the caller's to act on.
    const blank = await client.callTool({ name: "myapi_query", arguments: { query: "  " } });
    expect(blank.isError).toBe(true);
    expect(textOf(blank)).toMatch(/InvalidArguments/);
    expect(textOf(blank)).toMatch(/query must not be blank/);
  });

  it("submits the long action as a task, cancels it, and gets the partial result the tool returned", async () => {
    const { task } = await client.request(
      { method: "tools/call", params: { name: "myapi_export", arguments: { query: "otters", pages: 1000 }, task: { ttl: 600_000 } } },
      CreateTaskResultSchema,
    );
    expect(task.status).toBe("working");
    // Running, with a few pages done.
    const served = pagesServed.length;
    await waitFor(() => pagesServed.length >= served + 3, 60_000, 20);
    const cancelled = await client.experimental.tasks.cancelTask(task.taskId);
    expect(cancelled.status).toBe("cancelled");
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe("cancelled");
    const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(result.isError).toBe(true);
    // The envelope of a failed call, as the CLI's -j gives it, with what the tool returned as `output`.
    const envelope = JSON.parse(result.content.map((part) => (part.type === "text" ? part.text : "")).join("")) as {
      status: string;
      fault: string;
      message: string;
      output: { items: unknown[]; pages_done: number; complete: boolean };
    };
    expect(envelope).toMatchObject({ status: "error", fault: "caller", message: expect.stringMatching(/cancelled/) as unknown });
    expect(envelope.output.complete).toBe(false);
    expect(envelope.output.pages_done).toBeGreaterThanOrEqual(3);
    expect(envelope.output.pages_done).toBeLessThan(1000);
    expect(envelope.output.items).toHaveLength(envelope.output.pages_done);
  }, 120_000);
});
