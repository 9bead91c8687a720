import { symlinkSync } from "node:fs";
import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

let data: TempDataDir;
let host: ToolHost;
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === "/page") {
      res.setHeader("content-type", "text/html; charset=utf-8");
      res.end("<html><head><title>A &amp; B</title><script>var x = 1;</script></head><body><h1>Hello</h1><p>World &lt;3 &#x263A;</p></body></html>");
    } else {
      res.statusCode = 404;
      res.end("missing");
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  data = makeDataDir({
    "animas/alice/knowledge/a.md": "Meeting notes\nnothing here\nanother MEETING later",
    "animas/alice/episodes/b.md": "no match",
    "animas/alice/state/hidden.md": "meeting in host state",
    "animas/bob/secret.md": "meeting secret of bob",
  });
  symlinkSync(join(data.dir, "animas", "bob"), join(data.dir, "animas", "alice", "bob-link"));
  host = createHost({ dataDir: data.dir, isolation: "in-process", allowInternalHosts: ["127.0.0.1"], onLog: () => {} });
});
afterAll(async () => {
  await host.close();
  data.cleanup();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("core tool file_search", () => {
  it("finds lines in the Anima's own files only: no links followed, host state skipped", async () => {
    const result = await host.call("alice", "file_search_grep", { query: "meeting" });
    expect(result.status).toBe("ok");
    const parsed = JSON.parse((result as { output: string }).output);
    expect(parsed.matches).toEqual([
      { path: "knowledge/a.md", line: 1, text: "Meeting notes" },
      { path: "knowledge/a.md", line: 3, text: "another MEETING later" },
    ]);
    expect((result as { output: string }).output).not.toContain("bob");
  });

  it("lists files and refuses a folder outside the Anima", async () => {
    const list = JSON.parse(((await host.call("alice", "file_search_list", { path: "knowledge" })) as { output: string }).output);
    expect(list.files).toEqual([{ path: "knowledge/a.md", size: 48 }]);
    expect(await host.call("alice", "file_search_list", { path: "../bob" })).toMatchObject({ status: "error", error_type: "SandboxViolation" });
  });
});

describe("core tool web_fetch", () => {
  it("returns a page's title and readable text", async () => {
    const result = await host.call("alice", "web_fetch_text", { url: `${base}/page` });
    expect(result.status).toBe("ok");
    const parsed = JSON.parse((result as { output: string }).output);
    expect(parsed.title).toBe("A & B");
    expect(parsed.text).toBe("Hello\nWorld <3 ☺");
  });

  it("reports HTTP errors as tool errors, and internal addresses as denials", async () => {
    expect(await host.call("alice", "web_fetch_text", { url: `${base}/nope` })).toMatchObject({ status: "error", error_type: "ExecutionError" });
    expect(await host.call("alice", "web_fetch_text", { url: "http://169.254.169.254/" })).toMatchObject({ status: "error", error_type: "SandboxViolation" });
  });
});
