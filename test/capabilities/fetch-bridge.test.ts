import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { auditText } from "../helpers/audit-files.js";

// Only a server this test starts on 127.0.0.1, reached through an explicit operator allowance.
let server: Server;
let base: string;
const seen: Array<{ method: string; url: string; auth: string | undefined; body: string }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", auth: req.headers.authorization, body });
      res.setHeader("content-type", "application/json");
      if (req.url?.startsWith("/search")) res.end(JSON.stringify({ results: [{ title: "hit", q: new URL(req.url, "http://x").searchParams.get("q") }] }));
      else if (req.url === "/data") res.end(JSON.stringify({ stored: JSON.parse(body).data }));
      else if (req.url === "/redirect-internal") {
        res.statusCode = 302;
        res.setHeader("location", "http://169.254.169.254/latest/meta-data/");
        res.end();
      } else res.end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const MYAPI = () => readFileSync(join(import.meta.dirname, "..", "fixtures", "capabilities", "myapi.ts"), "utf8").replace("http://api.example.com", base);
const PROBE = (url: string) => `
import { fetch } from "@animaworks/tool";
export function get_tool_schemas() { return [{ name: "probe_get", description: "get" }]; }
export async function dispatch() { const r = await fetch(${JSON.stringify(url)}); return r.status; }
`;

describe("fetch through the sandbox", () => {
  let data: TempDataDir;
  let host: ToolHost;
  let strictHost: ToolHost;

  beforeAll(() => {
    data = makeDataDir({
      "config.json": JSON.stringify({ credentials: { myapi: { api_key: "sk-test-1234567890" } } }),
      "animas/alice/tools/myapi.ts": MYAPI(),
      "animas/alice/tools/probe.ts": PROBE(`${base}/redirect-internal`),
      "animas/bob/tools/probe.ts": PROBE(`${base}/search?q=x`),
      "animas/bob/permissions.json": JSON.stringify({ sandbox: { network: "none" } }),
    });
    host = createHost({ dataDir: data.dir, isolation: "process", sandboxProcesses: 1, allowInternalHosts: ["127.0.0.1"], onLog: () => {} });
    strictHost = createHost({ dataDir: data.dir, isolation: "in-process", onLog: () => {} });
  });
  afterAll(async () => {
    await host.close();
    await strictHost.close();
    data.cleanup();
  });

  it("runs the seed's myapi example: credential + GET and POST against a local server", async () => {
    const query = await host.call("alice", "myapi_query", { query: "cats", limit: 3 });
    expect(query.status).toBe("ok");
    expect(JSON.parse((query as { output: string }).output)).toEqual([{ title: "hit", q: "cats" }]);
    const post = await host.call("alice", "myapi_post", { data: "hello" });
    expect(JSON.parse((post as { output: string }).output)).toEqual({ stored: "hello" });
    expect(seen.at(-1)).toMatchObject({ method: "POST", url: "/data", auth: "Bearer sk-test-1234567890" });
  });

  it("refuses loopback by default, before any connection", async () => {
    const before = seen.length;
    const result = await strictHost.call("alice", "myapi_query", { query: "x" });
    expect(result).toMatchObject({ status: "error", error_type: "SandboxViolation" });
    expect(seen.length).toBe(before);
  });

  it("refuses a redirect to a metadata address at the hop", async () => {
    const result = await host.call("alice", "probe_get", {});
    expect(result).toMatchObject({ status: "error", error_type: "SandboxViolation" });
  });

  it("honours an Anima's network: none, even where the operator allows the host", async () => {
    const before = seen.length;
    expect(await host.call("bob", "probe_get", {})).toMatchObject({ status: "error", error_type: "SandboxViolation" });
    expect(seen.length).toBe(before);
  });

  it("audits requests and denials without query strings or secrets", async () => {
    await host.audit.flush();
    const text = auditText(host.config.auditDir);
    expect(text).toContain('"operation":"fetch"');
    expect(text).toContain('"outcome":"denied"');
    expect(text).not.toContain("cats");
    expect(text).not.toContain("sk-test-1234567890");
  });
});
