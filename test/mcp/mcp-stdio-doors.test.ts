import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_FS_LIMITS } from "../../src/fs-limits.js";
import { mcpMessageLimitBytes } from "../../src/mcp/stdio-transport.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { RawMcpSession } from "./raw-session.js";

/**
 * `animaworks-tool mcp` as its own process, spoken to in raw JSON-RPC lines: every request gets an
 * answer (a malformed one an error), a message the host's limits accept is read however large, a larger
 * one is answered and skipped, and the session goes on after each.
 */
const ECHO_TOOL = `
export function get_tool_schemas() {
  return [{ name: "echo_say", description: "Echo text", input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } }];
}
export function dispatch(name, args) { return "said " + args.text; }
`;

let data: TempDataDir;
let session: RawMcpSession & { stderr(): string };

beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/echo.ts": ECHO_TOOL });
  session = RawMcpSession.spawned(data.dir, "alice");
}, 30_000);
afterAll(async () => {
  await session?.close();
  data.cleanup();
});

describe("the MCP server's stdio door", () => {
  it("answers requests before initialize with an error, then serves after it", async () => {
    expect((await session.request("tools/list")).error).toMatchObject({ code: -32600, message: expect.stringMatching(/not initialized/) });
    expect((await session.request("ping")).result).toEqual({});
    expect((await session.initialize()).result).toMatchObject({ serverInfo: { name: "animaworks-tool" } });
    session.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    expect((await session.request("tools/list")).result).toMatchObject({ tools: expect.arrayContaining([expect.objectContaining({ name: "echo_say" })]) });
  });

  it("answers malformed JSON and invalid requests (JSON-RPC -32700 / -32600) instead of leaving them unanswered", async () => {
    const before = session.answersTo(null).length;
    session.send("{not json");
    session.send({ id: "no-jsonrpc", method: "ping" });
    session.send({ jsonrpc: "2.0", id: { a: 1 }, method: "ping" });
    session.send({ jsonrpc: "2.0", id: "numeric-method", method: 5 });
    session.send({ jsonrpc: "2.0", id: "params-null", method: "tools/list", params: null });
    session.send([{ jsonrpc: "2.0", id: "in-batch", method: "ping" }]);
    expect((await session.answerTo("no-jsonrpc")).error?.code).toBe(-32600);
    expect((await session.answerTo("numeric-method")).error?.code).toBe(-32600);
    expect((await session.answerTo("params-null")).error?.code).toBe(-32600);
    expect((await session.answerTo("in-batch")).error?.code).toBe(-32600);
    await session.until(() => session.answersTo(null).length >= before + 2, 10_000, "the two id-null answers");
    const nulls = session
      .answersTo(null)
      .slice(before)
      .map((answer) => answer.error?.code);
    expect(nulls.sort()).toEqual([-32700, -32600].sort());
    expect((await session.request("ping")).result).toEqual({});
  });

  it("answers tools/call with invalid params as -32602 Invalid params, in one readable sentence", async () => {
    for (const [params, message] of [
      [{}, "Invalid params for tools/call: params.name is missing (it must be a string)"],
      [{ name: 5 }, "Invalid params for tools/call: params.name must be a string, not an integer"],
      [{ name: "echo_say", arguments: "str" }, "Invalid params for tools/call: params.arguments must be an object, not a string"],
    ] as const) {
      expect((await session.request("tools/call", params)).error).toEqual({ code: -32602, message });
    }
    expect((await session.request("tools/call", { name: "echo_say", arguments: { text: "hi" } })).result).toMatchObject({
      content: [{ type: "text", text: "said hi" }],
    });
  });

  it("reads a write_memory_file of nearly 10 MiB, sent as a message far over 10 MiB of JSON", async () => {
    const content = 'a "quoted" line\n'.repeat(640 * 1024); // 10 MiB of text, ≈ 12.5 MiB as JSON
    const answer = await session.request("tools/call", { name: "write_memory_file", arguments: { path: "notes/big.md", content } }, 60_000);
    expect(answer.result).toMatchObject({ content: [{ type: "text", text: expect.stringMatching(/^Wrote notes\/big\.md/) }] });
    expect(statSync(join(data.anima("alice"), "notes", "big.md")).size).toBe(Buffer.byteLength(content));
  }, 60_000);

  it("answers a message over its limit with an error naming the limit, and keeps the session", async () => {
    const limit = mcpMessageLimitBytes(DEFAULT_FS_LIMITS);
    const content = "\u0001".repeat(Math.ceil(limit / 6) + 1024); // six bytes of JSON per character
    // As the SDK's clients write it: the id last.
    session.send(
      `{"method":"tools/call","params":${JSON.stringify({ name: "write_memory_file", arguments: { path: "notes/huge.md", content } })},"jsonrpc":"2.0","id":"huge"}`,
    );
    const answer = await session.answerTo("huge", 60_000);
    expect(answer.error).toMatchObject({ code: -32600, message: expect.stringMatching(new RegExp(`more than the ${limit}-byte limit`)) });
    expect((await session.request("tools/call", { name: "echo_say", arguments: { text: "still here" } })).result).toMatchObject({
      content: [{ text: "said still here" }],
    });
    expect(() => readFileSync(join(data.anima("alice"), "notes", "huge.md"))).toThrow();
  }, 60_000);

  it("writes nothing but protocol on stdout", () => {
    expect(session.junk).toEqual([]);
  });
});

describe("mcp for an unknown Anima", () => {
  it("says why on stderr and exits 2, even when the client sends nothing", async () => {
    const unknown = RawMcpSession.spawned(data.dir, "a3 ");
    const code = await unknown.close();
    expect(code).toBe(2);
    expect(unknown.stderr()).toMatch(/^Error \(NotFound\): unknown Anima "a3 " — known Animas: alice$/m);
  }, 30_000);

  it("answers a client's requests with why", async () => {
    const unknown = RawMcpSession.spawned(data.dir, "nobody");
    expect((await unknown.initialize()).result).toBeDefined();
    expect((await unknown.request("tools/list")).error).toMatchObject({ code: -32600, message: expect.stringMatching(/NotFound: unknown Anima "nobody"/) });
    expect(await unknown.close()).toBe(2);
  }, 30_000);
});
