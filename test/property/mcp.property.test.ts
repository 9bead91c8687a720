import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir, within } from "../helpers/data-dir.js";
import { type Answer, RawMcpSession } from "../mcp/raw-session.js";
import { STACK_TRACE, fuzzParameters, propertyTimeoutMs } from "./settings.js";

/**
 * Property: whatever line an MCP client sends (not JSON, JSON of any shape, requests with wrong ids,
 * methods or params, batches), the server answers every request (its id, or `id: null` where JSON-RPC
 * says so) within a bound, with a JSON-RPC answer that carries no stack trace and no schema dump, answers
 * nothing twice, and goes on serving the session.
 */
const ECHO_TOOL = `
export const EXECUTION_PROFILE = { say: { background_eligible: true } };
export function get_tool_schemas() {
  return [{ name: "echo_say", description: "Echo", input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } }];
}
export function dispatch(name, args) { return "said " + args.text; }
`;
const RUNS = 150;
const ANSWER_BOUND_MS = 20_000;

const METHODS = [
  "initialize",
  "ping",
  "tools/list",
  "tools/call",
  "tasks/get",
  "tasks/result",
  "tasks/list",
  "tasks/cancel",
  "resources/list",
  "prompts/get",
  "logging/setLevel",
  "completion/complete",
  "notifications/initialized",
  "notifications/cancelled",
  "notifications/progress",
  "no/such",
];

/** Values in the places JSON-RPC and MCP give types to, right and wrong. */
function messageArbitrary(): fc.Arbitrary<unknown> {
  const anyJson = fc.jsonValue({ maxDepth: 3 });
  const id = fc.oneof(
    fc.integer(),
    fc.string({ maxLength: 6 }),
    fc.double(),
    fc.constant(null),
    fc.boolean(),
    fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
  );
  const method = fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...METHODS) }, { weight: 1, arbitrary: anyJson });
  const toolParams = fc.record(
    {
      name: fc.oneof(fc.constantFrom("echo_say", "list_tools", "job_status", "read_memory_file", "submit_job", "ghost"), anyJson),
      arguments: fc.oneof(fc.record({ text: fc.oneof(fc.string(), anyJson) }, { requiredKeys: [] }), anyJson),
      task: fc.oneof(fc.constant({}), fc.record({ ttl: fc.oneof(fc.integer(), anyJson) }), anyJson),
      taskId: fc.oneof(fc.string({ maxLength: 8 }), anyJson),
      _meta: anyJson,
    },
    { requiredKeys: [] },
  );
  const params = fc.oneof({ weight: 4, arbitrary: toolParams }, { weight: 1, arbitrary: anyJson });
  const message = fc.record(
    {
      jsonrpc: fc.oneof({ weight: 6, arbitrary: fc.constant("2.0") }, { weight: 1, arbitrary: anyJson }),
      id,
      method,
      params,
      result: anyJson,
      error: anyJson,
      extra: anyJson,
    },
    { requiredKeys: [] },
  );
  return fc.oneof({ weight: 8, arbitrary: message }, { weight: 1, arbitrary: fc.array(message, { maxLength: 3 }) }, { weight: 1, arbitrary: anyJson });
}

/** A line as sent: JSON of a message, or (sometimes) text that is not JSON. Never a newline inside. */
function lineArbitrary(): fc.Arbitrary<{ text: string; value?: unknown }> {
  return fc.oneof(
    { weight: 9, arbitrary: messageArbitrary().map((value) => ({ text: JSON.stringify(value) ?? "null", value })) },
    {
      weight: 1,
      arbitrary: fc
        .string({ maxLength: 40 })
        .filter((text) => !text.includes("\n") && !text.includes("\r"))
        .map((text) => ({ text })),
    },
  );
}

let nextId = 1;
/** The message with a readable id made unique (same type), so that its answer can be told apart. */
function withUniqueId(value: unknown): unknown {
  if (typeof value !== "object" || value === null || Array.isArray(value) || !("id" in value)) return value;
  const id = value.id;
  if (Number.isSafeInteger(id)) return { ...value, id: 1_000_000_000 + nextId++ };
  if (typeof id === "string") return { ...value, id: `u${nextId++}:${id}` };
  return value;
}

function readableId(value: unknown): string | number | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const id = (value as { id?: unknown }).id;
  return typeof id === "string" || Number.isSafeInteger(id) ? (id as string | number) : undefined;
}

/** A valid notification (JSON-RPC: never answered): "2.0", a string method, no id, params an object if any, nothing else. */
function isNotification(value: unknown): boolean {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const message = value as Record<string, unknown>;
  const params = message["params"];
  return (
    message["jsonrpc"] === "2.0" &&
    typeof message["method"] === "string" &&
    !("id" in message) &&
    (!("params" in message) || (typeof params === "object" && params !== null && !Array.isArray(params))) &&
    Object.keys(message).every((key) => ["jsonrpc", "method", "params"].includes(key))
  );
}

/** A response of the client's (no method, a result or an error): not a request, never answered. */
function isResponseShaped(value: unknown): boolean {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !("method" in value) && ("result" in value || "error" in value);
}

function expectWellFormed(answer: Answer, context: string): void {
  expect(answer.jsonrpc, context).toBe("2.0");
  if (answer.error !== undefined) {
    expect(Number.isInteger(answer.error.code), context).toBe(true);
    expect(typeof answer.error.message, context).toBe("string");
    expect(answer.error.message, context).not.toMatch(STACK_TRACE);
    expect(answer.error.message, context).not.toMatch(/"code":\s*"invalid_|"expected":/); // no schema dump
  } else {
    expect(answer.result, context).toBeDefined();
  }
}

let data: TempDataDir;
let host: ToolHost;
let session: RawMcpSession;

beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/echo.ts": ECHO_TOOL });
  host = createHost({ dataDir: data.dir, isolation: "in-process", timeoutMs: 5_000, onLog: () => {} });
  session = await RawMcpSession.inProcess(host, "alice");
  expect((await session.initialize()).result).toBeDefined();
});
afterAll(async () => {
  await session?.close();
  await host?.close();
  data?.cleanup();
});

describe("the MCP server, under any line", () => {
  it(
    "answers every request once, well-formed, within a bound, and goes on serving",
    async () => {
      await fc.assert(
        fc.asyncProperty(lineArbitrary(), async (line) => {
          const value = line.value === undefined ? undefined : withUniqueId(line.value);
          const text = value === undefined ? line.text : (JSON.stringify(value) ?? "null");
          const context = `line ${text.slice(0, 500)}`;
          const answered = session.answers.length;
          session.send(text);
          // A ping after it: its answer bounds the wait, and shows the session alive.
          const ping = await within(ANSWER_BOUND_MS, `the ping after ${context}`, session.request("ping"));
          expect(ping.result, context).toEqual({});
          const id = readableId(value);
          const parsesAsJson = (() => {
            try {
              JSON.parse(text);
              return true;
            } catch {
              return false;
            }
          })();
          if (id !== undefined && typeof value === "object" && value !== null && "method" in value) {
            const answer = await within(ANSWER_BOUND_MS, `the answer to ${context}`, session.answerTo(id, ANSWER_BOUND_MS));
            expectWellFormed(answer, context);
            expect(session.answersTo(id), context).toHaveLength(1);
          } else if (
            !parsesAsJson ||
            (Array.isArray(value) ? value.some((item) => !isNotification(item)) || value.length === 0 : !isNotification(value) && !isResponseShaped(value))
          ) {
            if (text.trim() === "") return;
            // Answered before the ping after it (the gate answers as it reads the line).
            const since = session.answers.slice(answered).flat();
            // A batch is answered as an array (each request in it); anything else with its id or id null.
            const mine = Array.isArray(value)
              ? since.filter((answer) => answer.id !== ping.id)
              : since.filter((answer) => answer.id === null || (id !== undefined && answer.id === id));
            expect(mine.length, `${context}: no answer`).toBeGreaterThanOrEqual(1);
            for (const answer of mine) expectWellFormed(answer, context);
          }
        }),
        fuzzParameters(RUNS),
      );
      expect(session.junk).toEqual([]);
    },
    propertyTimeoutMs(60_000, RUNS),
  );
});
