import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../../src/host.js";
import { type TempDataDir, makeDataDir } from "../../helpers/data-dir.js";
import { okOutput } from "../../helpers/tools.js";
import { seedTemplateFiles } from "../../helpers/python-templates.js";

/**
 * The AnimaWorks seed's own Python tools run unmodified: the two templates of its tool-creator skill
 * (test/fixtures/python/, copied verbatim from the skill), discovered beside TypeScript tools, described
 * by their `get_tool_schemas()` and called through `dispatch(name, args)` with `anima_dir` in args, in
 * sandbox processes (the host's default isolation). The API template's only change is its server's
 * address (https://api.example.com → a server of this test's on 127.0.0.1, which config.json allows);
 * its key comes from config.json's credentials through `core.tools._base.get_credential`, its requests
 * through httpx with their timeouts.
 */
const API_KEY = "test-key-3f9a";

let data: TempDataDir;
let host: ToolHost;
let server: Server;
const requests: Array<{ method: string; url: string; auth: string | undefined; body: string }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
    req.on("end", () => {
      requests.push({ method: req.method ?? "", url: req.url ?? "", auth: req.headers.authorization, body });
      res.setHeader("content-type", "application/json");
      if (req.headers.authorization !== `Bearer ${API_KEY}`) {
        res.statusCode = 401;
        res.end(JSON.stringify({ error: "unauthorised" }));
      } else if (req.url?.startsWith("/search")) {
        const query = new URL(req.url, "http://127.0.0.1").searchParams;
        res.end(JSON.stringify({ results: [{ q: query.get("q"), limit: Number(query.get("limit")) }] }));
      } else {
        res.end(JSON.stringify({ stored: JSON.parse(body || "null") }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  data = makeDataDir({
    ...seedTemplateFiles(base, API_KEY),
    "animas/alice/tools/greet.ts":
      'export function get_tool_schemas() { return [{ name: "greet_hi", description: "d", input_schema: { type: "object", properties: {} } }]; }\nexport function dispatch() { return "hi"; }\n',
  });
  host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "core-tools"), loadTimeoutMs: 60_000, timeoutMs: 60_000, onLog: () => {} });
});
afterAll(async () => {
  await host?.close();
  data?.cleanup();
  await new Promise((resolve) => server?.close(resolve));
});

describe("the seed's Python templates", () => {
  it("are listed beside TypeScript tools with the schemas get_tool_schemas() returns", async () => {
    const listing = await host.list("alice");
    const byName = new Map(listing.tools.map((tool) => [tool.name, tool]));
    expect(byName.get("my_tool")?.status, JSON.stringify(byName.get("my_tool"))).toBe("ok");
    expect(byName.get("myapi")?.status, JSON.stringify(byName.get("myapi"))).toBe("ok");
    expect(byName.get("greet")?.status).toBe("ok");
    expect(byName.get("my_tool")?.schemas.map((schema) => [schema.name, schema.parameters])).toEqual([
      [
        "my_tool_action",
        {
          type: "object",
          properties: {
            param1: { type: "string", description: "Parameter description" },
            param2: { type: "integer", description: "Optional parameter", default: 10 },
          },
          required: ["param1"],
        },
      ],
    ]);
    expect(byName.get("myapi")?.schemas.map((schema) => schema.name)).toEqual(["myapi_query", "myapi_post"]);
  }, 180_000);

  it("answers the single-schema template through dispatch, its arguments validated by its schema", async () => {
    expect(JSON.parse(okOutput(await host.call("alice", "my_tool_action", { param1: "abc" })))).toEqual({ result: "Processed abc with 10" });
    expect(JSON.parse(okOutput(await host.call("alice", "my_tool_action", { param1: "x", param2: 3 })))).toEqual({ result: "Processed x with 3" });
    const refused = await host.call("alice", "my_tool_action", { param2: 3 });
    expect(refused).toMatchObject({ status: "error", error_type: "InvalidArguments" });
  }, 120_000);

  it("runs the API template with its credential and httpx over the host's fetch", async () => {
    const query = await host.call("alice", "myapi_query", { query: "otters", limit: 3 });
    expect(JSON.parse(okOutput(query))).toEqual([{ q: "otters", limit: 3 }]);
    const post = await host.call("alice", "myapi_post", { data: "hello" });
    expect(JSON.parse(okOutput(post))).toEqual({ stored: { data: "hello" } });
    expect(requests.map((request) => [request.method, request.url.split("?")[0], request.auth])).toEqual([
      ["GET", "/search", `Bearer ${API_KEY}`],
      ["POST", "/data", `Bearer ${API_KEY}`],
    ]);
  }, 120_000);
});
