import { describe, expect, it, vi } from "vitest";
import { type GateVerdict, JsonRpcGate, MAX_BATCH_ANSWERS } from "../../src/mcp/jsonrpc-gate.js";
import { BoundedLineReader, EDGE_BYTES } from "../../src/mcp/line-reader.js";

/**
 * The gate every MCP message passes before the SDK's server: each request is answered (JSON-RPC 2.0 error
 * codes, readable messages), valid messages pass unchanged, and the lifecycle holds (initialize first).
 */
const LIMIT = 1024;
const INITIALIZE = {
  jsonrpc: "2.0",
  id: 0,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } },
};

function gateAfterInitialize(): JsonRpcGate {
  const gate = new JsonRpcGate();
  expect(check(gate, INITIALIZE).kind).toBe("pass");
  return gate;
}

function check(gate: JsonRpcGate, value: unknown): GateVerdict {
  return gate.check({ kind: "line", text: typeof value === "string" ? value : JSON.stringify(value) }, LIMIT);
}

function errorOf(verdict: GateVerdict): { id: unknown; code: number; message: string } {
  if (verdict.kind !== "answer" || Array.isArray(verdict.reply)) throw new Error(`expected one error answer, got ${JSON.stringify(verdict)}`);
  return { id: verdict.reply.id, code: verdict.reply.error.code, message: verdict.reply.error.message };
}

describe("the JSON-RPC gate of the MCP server", () => {
  it("answers text that is not JSON with -32700 and id null", () => {
    expect(errorOf(check(new JsonRpcGate(), "{not json"))).toMatchObject({ id: null, code: -32700, message: expect.stringMatching(/^Parse error: /) });
  });

  it.each([
    ["no jsonrpc", { id: 1, method: "ping" }, 1, /"jsonrpc" must be "2\.0" \(it is missing\)/],
    ["an object id", { jsonrpc: "2.0", id: { a: 1 }, method: "ping" }, null, /"id" must be a string or an integer, not an object/],
    ["a fractional id", { jsonrpc: "2.0", id: 1.5, method: "ping" }, null, /not a fractional number/],
    ["a null id", { jsonrpc: "2.0", id: null, method: "ping" }, null, /not null/],
    ["a numeric method", { jsonrpc: "2.0", id: 2, method: 5 }, 2, /"method" must be a string, not an integer/],
    ["params null", { jsonrpc: "2.0", id: 3, method: "ping", params: null }, 3, /"params" must be an object, not null/],
    ["params a string", { jsonrpc: "2.0", id: 4, method: "ping", params: "str" }, 4, /not a string/],
    ["params an array", { jsonrpc: "2.0", id: 5, method: "ping", params: [] }, 5, /not an array/],
    ["params a number", { jsonrpc: "2.0", id: 6, method: "ping", params: 5 }, 6, /not an integer/],
    ["a bare number", 5, null, /a message must be a JSON object, not an integer/],
    ["neither method nor result", { jsonrpc: "2.0", id: 7 }, 7, /needs a "method"/],
    ["an unknown member", { jsonrpc: "2.0", id: 8, method: "ping", extra: 1 }, 8, /unknown member "extra"/],
  ])("answers an invalid request (%s) with -32600 and its id where it can be read", (_name, message, id, text) => {
    const error = errorOf(check(gateAfterInitialize(), message));
    expect(error).toMatchObject({ id, code: -32600 });
    expect(error.message).toMatch(text);
  });

  it("answers each request of a batch (batches left MCP in 2025-06-18), and an empty batch once", () => {
    const gate = gateAfterInitialize();
    const verdict = check(gate, [{ jsonrpc: "2.0", id: 1, method: "ping" }, { jsonrpc: "2.0", method: "notifications/initialized" }, 7]);
    expect(verdict.kind).toBe("answer");
    const replies = (verdict as Extract<GateVerdict, { kind: "answer" }>).reply as Array<{ id: unknown; error: { code: number } }>;
    expect(replies.map((reply) => [reply.id, reply.error.code])).toEqual([
      [1, -32600],
      [null, -32600],
    ]);
    expect(errorOf(check(gate, []))).toMatchObject({ id: null, code: -32600 });
  });

  it("mcp_batch_amplify: a batch past MAX_BATCH_ANSWERS members is answered once, not once per member", () => {
    const gate = gateAfterInitialize();
    const members = new Array<number>(4_000_000).fill(1);
    const error = errorOf(check(gate, members));
    expect(error).toMatchObject({ id: null, code: -32600 });
    expect(error.message).toMatch(/this batch of 4000000 was not read/);
    const atBound = check(gate, new Array<number>(MAX_BATCH_ANSWERS).fill(1)) as Extract<GateVerdict, { kind: "answer" }>;
    expect(atBound.reply).toHaveLength(MAX_BATCH_ANSWERS);
    // Notifications are never answered, however many.
    const notifications = new Array(MAX_BATCH_ANSWERS * 3).fill({ jsonrpc: "2.0", method: "notifications/initialized" });
    expect(check(gate, notifications).kind).toBe("drop");
  });

  it.each([
    [{}, "Invalid params for tools/call: params.name is missing (it must be a string)"],
    [{ name: 5 }, "Invalid params for tools/call: params.name must be a string, not an integer"],
    [{ name: "x", arguments: "str" }, "Invalid params for tools/call: params.arguments must be an object, not a string"],
  ])("answers tools/call with params %j as -32602 in one readable sentence", (params, message) => {
    expect(errorOf(check(gateAfterInitialize(), { jsonrpc: "2.0", id: "c", method: "tools/call", params }))).toEqual({ id: "c", code: -32602, message });
  });

  it("answers requests before initialize (but ping), then lets them pass", () => {
    const gate = new JsonRpcGate();
    expect(errorOf(check(gate, { jsonrpc: "2.0", id: 1, method: "tools/list" }))).toMatchObject({
      id: 1,
      code: -32600,
      message: expect.stringMatching(/not initialized; send "initialize" first/),
    });
    expect(check(gate, { jsonrpc: "2.0", id: 2, method: "ping" }).kind).toBe("pass");
    // An initialize that is itself invalid does not initialize.
    expect(errorOf(check(gate, { ...INITIALIZE, params: {} })).code).toBe(-32602);
    expect(check(gate, { jsonrpc: "2.0", id: 3, method: "tools/list" }).kind).toBe("answer");
    expect(check(gate, INITIALIZE).kind).toBe("pass");
    expect(check(gate, { jsonrpc: "2.0", id: 4, method: "tools/list" }).kind).toBe("pass");
  });

  it("passes valid notifications and responses unanswered, drops malformed ones of known methods, ignores blank lines", () => {
    const gate = gateAfterInitialize();
    expect(check(gate, { jsonrpc: "2.0", method: "notifications/initialized" }).kind).toBe("pass");
    expect(check(gate, { jsonrpc: "2.0", method: "notifications/progress", params: { progress: "x" } }).kind).toBe("drop");
    expect(check(gate, { jsonrpc: "2.0", id: 9, result: {} }).kind).toBe("pass");
    expect(check(gate, { jsonrpc: "2.0", id: 9, result: 5 }).kind).toBe("drop");
    expect(check(gate, "   ").kind).toBe("ignore");
    // A method the server does not have passes: the SDK answers -32601 Method not found.
    expect(check(gate, { jsonrpc: "2.0", id: 10, method: "no/such" }).kind).toBe("pass");
  });

  it("answers a line over the limit with its id, read from either end of the text", () => {
    const gate = new JsonRpcGate();
    const oversize = (head: string, tail: string) => errorOf(gate.check({ kind: "oversize", bytes: 5_000, head, tail }, LIMIT));
    expect(oversize('{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"a":"xx', 'xx"}}')).toMatchObject({
      id: 41,
      code: -32600,
      message: expect.stringMatching(/5000 bytes, more than the 1024-byte limit/),
    });
    expect(oversize('{"method":"tools/call","params":{"a":"xx', 'xx"}},"jsonrpc":"2.0","id":"k-7"}')).toMatchObject({ id: "k-7" });
    expect(oversize('{"method":"x","params":{"id":5,"a":"', 'zz"}}')).toMatchObject({ id: null });
  });
});

describe("the bounded line reader of the MCP server", () => {
  it("splits lines anywhere, keeps at most its limit of a line, and goes on after an oversize one", () => {
    const reader = new BoundedLineReader(100);
    const long = `{"id":1,${"x".repeat(EDGE_BYTES * 3)}"end":2}`;
    const text = Buffer.from(`short one\r\n${long}\nafter\n`);
    const lines = [];
    for (let at = 0; at < text.length; at += 7_000) lines.push(...reader.push(text.subarray(at, at + 7_000)));
    expect(lines[0]).toEqual({ kind: "line", text: "short one" });
    expect(lines[1]).toMatchObject({ kind: "oversize", bytes: long.length });
    const oversize = lines[1] as { head: string; tail: string };
    expect(oversize.head).toBe(long.slice(0, EDGE_BYTES));
    expect(oversize.tail).toBe(long.slice(-EDGE_BYTES));
    expect(lines[2]).toEqual({ kind: "line", text: "after" });
    expect(reader.pendingBytes).toBe(0);
  });

  it("copies each byte of a long line about once (the SDK's reader re-joined its buffer on every chunk)", () => {
    const reader = new BoundedLineReader(64 * 1024 * 1024);
    const line = Buffer.from(`${"y".repeat(8 * 1024 * 1024)}\n`);
    const concat = vi.spyOn(Buffer, "concat");
    try {
      for (let at = 0; at < line.length; at += 64 * 1024) reader.push(line.subarray(at, at + 64 * 1024));
      const copiedBytes = concat.mock.calls.reduce((sum, [list]) => sum + (list as Buffer[]).reduce((n, b) => n + b.length, 0), 0);
      expect(copiedBytes).toBeLessThan(2 * line.length);
    } finally {
      concat.mockRestore();
    }
  });
});
