import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type TestHost, installFixtures, okOutput, useTestHost } from "../helpers/tools.js";

/** The two examples of tool-creator.md, ported (test/fixtures/tools/seed), as personal and shared tools. */
describe("the seed's example tools", () => {
  let t: TestHost;
  afterEach(async () => t?.close());

  it("my_tool: one schema, defaults applied by the tool, anima_dir removed before use", async () => {
    t = useTestHost();
    installFixtures("seed", join(t.data.dir, "animas", "alice", "tools"), ["my_tool"]);
    const info = await t.host.describe("alice", "my_tool");
    expect(info).toMatchObject({ name: "my_tool", origin: "personal", status: "ok", hasCliMain: false });
    expect(info.schemas).toEqual([
      {
        name: "my_tool_action",
        action: "action",
        description: "Description of what this tool does",
        parameters: {
          type: "object",
          properties: {
            param1: { type: "string", description: "Parameter description" },
            param2: { type: "integer", description: "Optional parameter", default: 10 },
          },
          required: ["param1"],
        },
      },
    ]);
    expect(JSON.parse(okOutput(await t.host.call("alice", "my_tool_action", { param1: "x" })))).toEqual({ result: "Processed x with 10" });
    expect(okOutput(await t.host.call("alice", "my_tool_action", { param1: "report", param2: 3 }))).toBe('{\n  "result": "Processed report with 3"\n}');
  });

  it("my_tool: wrong arguments are refused before the tool runs, with every problem named", async () => {
    t = useTestHost();
    installFixtures("seed", join(t.data.dir, "animas", "alice", "tools"), ["my_tool"]);
    const result = await t.host.call("alice", "my_tool_action", { param2: "ten" });
    expect(result.status).toBe("error");
    if (result.status !== "error") return;
    expect(result.error_type).toBe("InvalidArguments");
    expect(result.message).toBe('invalid arguments for my_tool_action: missing required parameter "param1"; "param2" must be integer');
    expect(result.hint).toBe("expects: param1 (string, required), param2 (integer)");
  });

  it("myapi: two schemas routed by dispatch, returning the request it would send", async () => {
    t = useTestHost();
    installFixtures("seed", join(t.data.dir, "common_tools"), ["myapi"]);
    const info = await t.host.describe("alice", "myapi");
    expect(info.origin).toBe("shared");
    expect(info.schemas.map((s) => [s.name, s.action])).toEqual([
      ["myapi_query", "query"],
      ["myapi_post", "post"],
    ]);
    expect(JSON.parse(okOutput(await t.host.call("alice", "myapi_query", { query: "search term" })))).toEqual({
      method: "GET",
      url: "https://api.example.com/search",
      params: { q: "search term", limit: 10 },
      timeout_seconds: 30,
    });
    expect(JSON.parse(okOutput(await t.host.call("alice", "myapi_query", { query: "q", limit: 3 }))).params).toEqual({ q: "q", limit: 3 });
    expect(JSON.parse(okOutput(await t.host.call("alice", "myapi_post", { data: "payload ✓" })))).toEqual({
      method: "POST",
      url: "https://api.example.com/data",
      json: { data: "payload ✓" },
      timeout_seconds: 30,
    });
  });

  it("myapi: an unknown action is ToolNotFound and lists the actions; a bare tool name asks for one", async () => {
    t = useTestHost();
    installFixtures("seed", join(t.data.dir, "common_tools"), ["myapi"]);
    const unknown = await t.host.call("alice", "myapi_delete", {});
    expect(unknown).toMatchObject({
      status: "error",
      error_type: "ToolNotFound",
      message: 'tool "myapi" has no action "delete"',
      hint: "actions: query, post",
    });
    const bare = await t.host.call("alice", "myapi", {});
    expect(bare).toMatchObject({ status: "error", error_type: "ToolNotFound", hint: "name an action: query, post" });
    const nothing = await t.host.call("alice", "nosuch_tool_x", {});
    expect(nothing).toMatchObject({ status: "error", error_type: "ToolNotFound", message: 'unknown tool "nosuch_tool_x"', hint: "available tools: myapi" });
  });
});
