import {
  ClientNotificationSchema,
  ClientRequestSchema,
  ErrorCode,
  type JSONRPCErrorResponse,
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  JSONRPCResponseSchema,
  type RequestId,
} from "@modelcontextprotocol/sdk/types.js";
import type { ReadLine } from "./line-reader.js";

/**
 * Every message an MCP client sends passes this gate before the SDK's server sees it, so that every
 * request is answered, and answered as JSON-RPC 2.0 and the MCP lifecycle (revision 2025-11-25) say:
 *
 *  - text that is not JSON: −32700 Parse error, `id: null`;
 *  - a message that is not a valid request, notification or response (no `jsonrpc: "2.0"`, an id that is
 *    not a string or an integer, a method that is not a string, params that are not an object, a batch,
 *    which this revision no longer has): −32600 Invalid Request, with the request's id where it can be
 *    read, else `id: null`;
 *  - a request other than `initialize` and `ping` before `initialize`: −32600, the session is not
 *    initialized;
 *  - a request of a known method whose params do not fit the method (`tools/call` without a name, its
 *    `arguments` a string…): −32602 Invalid params, with one readable sentence (never a schema dump);
 *  - a line longer than the server's limit: −32600 naming the limit, with the id if either end of the
 *    line shows it; the session goes on.
 *
 * What the SDK would drop unanswered never reaches it; what passes is exactly what its schemas accept.
 * Valid notifications and responses are never answered (JSON-RPC); malformed ones of a known method are
 * dropped with a note for the server's log.
 */
export type GateVerdict =
  | { kind: "pass"; message: JSONRPCMessage }
  | { kind: "answer"; reply: JSONRPCErrorResponse | JSONRPCErrorResponse[] }
  | { kind: "drop"; note: string }
  | { kind: "ignore" };

/** A zod schema as the SDK exports it: only what the gate uses. */
interface Schema {
  safeParse(value: unknown): { success: true } | { success: false; error: { issues: ZodIssue[] } };
}
interface ZodIssue {
  code: string;
  path: PropertyKey[];
  message: string;
  expected?: string;
  keys?: string[];
  values?: unknown[];
  errors?: ZodIssue[][];
}

/** The SDK's own schema of each client request and notification, by method. */
const REQUEST_SCHEMAS = schemasByMethod(ClientRequestSchema as unknown as { options: unknown[] });
const NOTIFICATION_SCHEMAS = schemasByMethod(ClientNotificationSchema as unknown as { options: unknown[] });

function schemasByMethod(union: { options: unknown[] }): Map<string, Schema> {
  const byMethod = new Map<string, Schema>();
  for (const option of union.options) {
    const method = (option as { shape?: { method?: { value?: unknown } } }).shape?.method?.value;
    if (typeof method === "string") byMethod.set(method, option as Schema);
  }
  return byMethod;
}

/** Requests a client may send before `initialize` (the lifecycle allows pings). */
const BEFORE_INITIALIZE = new Set(["initialize", "ping"]);
const MESSAGE_KEYS = new Set(["jsonrpc", "id", "method", "params", "result", "error"]);

export class JsonRpcGate {
  private initialized = false;

  /** The verdict on one line read from the client. */
  check(line: ReadLine, maxLineBytes: number): GateVerdict {
    if (line.kind === "oversize") return this.oversize(line, maxLineBytes);
    if (line.text.trim() === "") return { kind: "ignore" };
    let value: unknown;
    try {
      value = JSON.parse(line.text);
    } catch (error) {
      return answer(null, ErrorCode.ParseError, `Parse error: the message is not valid JSON (${(error as Error).message})`);
    }
    if (Array.isArray(value)) return batch(value);
    return this.message(value);
  }

  private message(value: unknown): GateVerdict {
    if (typeof value !== "object" || value === null)
      return answer(null, ErrorCode.InvalidRequest, `Invalid Request: a message must be a JSON object, not ${kindOf(value)}`);
    const message = value as Record<string, unknown>;
    const id = readableId(message);
    const isRequestLike = "method" in message;
    if (!isRequestLike && ("result" in message || "error" in message)) {
      // A response to a request of the server's: never answered, only passed on if it is one.
      return JSONRPCResponseSchema.safeParse(message).success
        ? { kind: "pass", message: message as JSONRPCMessage }
        : { kind: "drop", note: "a malformed response was dropped" };
    }
    const problem = shapeProblem(message);
    if (problem !== undefined) return answer(id, ErrorCode.InvalidRequest, `Invalid Request: ${problem}`);
    const method = message["method"] as string;
    if (!("id" in message)) {
      const schema = NOTIFICATION_SCHEMAS.get(method);
      if (schema && !schema.safeParse(message).success) return { kind: "drop", note: `a ${method} notification with invalid params was dropped` };
      return pass(message);
    }
    if (!this.initialized && !BEFORE_INITIALIZE.has(method)) {
      return answer(id, ErrorCode.InvalidRequest, `Invalid Request: the session is not initialized; send "initialize" first (only "ping" may come before it)`);
    }
    const schema = REQUEST_SCHEMAS.get(method);
    if (schema) {
      const parsed = schema.safeParse(message);
      if (!parsed.success) return answer(id, ErrorCode.InvalidParams, `Invalid params for ${method}: ${readableIssues(parsed.error.issues, message)}`);
    }
    if (method === "initialize") this.initialized = true;
    return pass(message);
  }

  private oversize(line: Extract<ReadLine, { kind: "oversize" }>, maxLineBytes: number): GateVerdict {
    const id = idAtEdges(line.head, line.tail);
    return answer(
      id,
      ErrorCode.InvalidRequest,
      `Invalid Request: the message is ${line.bytes} bytes, more than the ${maxLineBytes}-byte limit of this server; it was not read (send less per message, e.g. split a long write with write_memory_file's mode "append")`,
    );
  }
}

/** The checked message, once the SDK's own schema agrees (what it would otherwise drop unanswered). */
function pass(message: Record<string, unknown>): GateVerdict {
  const parsed = JSONRPCMessageSchema.safeParse(message);
  if (parsed.success) return { kind: "pass", message: message as JSONRPCMessage };
  return answer(readableId(message), ErrorCode.InvalidRequest, `Invalid Request: ${readableIssues(parsed.error.issues, message)}`);
}

/**
 * Members of a batch answered each with its own error at most; a larger batch gets one error (id null).
 * One error per member of a line of 4,000,000 made a reply of ~400× the line's size, which ended the
 * session unanswered (RangeError: Invalid string length; mcp_batch_amplify).
 */
export const MAX_BATCH_ANSWERS = 100;

/** Batches were removed from MCP (revision 2025-06-18): each request in one is answered as invalid. */
function batch(values: unknown[]): GateVerdict {
  const text = "Invalid Request: batches are not supported (MCP revision 2025-11-25); send each message on its own line";
  if (values.length === 0) return answer(null, ErrorCode.InvalidRequest, text);
  const requests = values.filter((value) => !isNotification(value));
  if (requests.length > MAX_BATCH_ANSWERS) return answer(null, ErrorCode.InvalidRequest, `${text} (this batch of ${values.length} was not read)`);
  const replies = requests.map((value) =>
    errorResponse(typeof value === "object" && value !== null ? readableId(value as Record<string, unknown>) : null, ErrorCode.InvalidRequest, text),
  );
  return replies.length > 0 ? { kind: "answer", reply: replies } : { kind: "drop", note: "a batch of notifications was dropped" };
}

/** A well-formed notification (never answered, also inside a batch); anything else in a batch is answered. */
function isNotification(value: unknown): boolean {
  return (
    typeof value === "object" && value !== null && !Array.isArray(value) && !("id" in value) && shapeProblem(value as Record<string, unknown>) === undefined
  );
}

/** What makes `message` no JSON-RPC request or notification, in words; undefined when it is one. */
function shapeProblem(message: Record<string, unknown>): string | undefined {
  if (message["jsonrpc"] !== "2.0")
    return `"jsonrpc" must be "2.0"${"jsonrpc" in message ? `, not ${JSON.stringify(message["jsonrpc"])}` : " (it is missing)"}`;
  if (!("method" in message)) return `a message needs a "method" (a request or notification) or a "result" or "error" (a response)`;
  if (typeof message["method"] !== "string") return `"method" must be a string, not ${kindOf(message["method"])}`;
  if ("id" in message && readableId(message) === null) return `"id" must be a string or an integer, not ${kindOf(message["id"])}`;
  if ("params" in message && (typeof message["params"] !== "object" || message["params"] === null || Array.isArray(message["params"]))) {
    return `"params" must be an object, not ${kindOf(message["params"])}`;
  }
  const unknown = Object.keys(message).filter((key) => !MESSAGE_KEYS.has(key));
  if (unknown.length > 0) return `unknown member${unknown.length === 1 ? "" : "s"} ${unknown.map((key) => JSON.stringify(key)).join(", ")}`;
  if ("result" in message || "error" in message) return `a request has no "result" or "error"`;
  return undefined;
}

/** The message's id when it is a valid one (a string or a safe integer), else null (JSON-RPC's "could not be read"). */
function readableId(message: Record<string, unknown>): RequestId | null {
  const id = message["id"];
  return typeof id === "string" || Number.isSafeInteger(id) ? (id as RequestId) : null;
}

const ID_VALUE = String.raw`("(?:[^"\\]|\\.)*"|-?\d+)`;
/** `{"jsonrpc":"2.0","id":…` at the start, or `"id":…}` at the very end (the SDK's clients put it last). */
const ID_AT_HEAD = new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${ID_VALUE}\s*[,}]`);
const ID_AT_TAIL = new RegExp(String.raw`[,{]\s*"id"\s*:\s*${ID_VALUE}\s*\}\s*$`);

/** The id of a message too long to read, where either end of its text shows it as a top-level member. */
function idAtEdges(head: string, tail: string): RequestId | null {
  const found = ID_AT_HEAD.exec(head)?.[1] ?? ID_AT_TAIL.exec(tail)?.[1];
  if (found === undefined) return null;
  try {
    const id = JSON.parse(found) as unknown;
    return typeof id === "string" || Number.isSafeInteger(id) ? (id as RequestId) : null;
  } catch {
    return null;
  }
}

function answer(id: RequestId | null, code: number, message: string): GateVerdict {
  return { kind: "answer", reply: errorResponse(id, code, message) };
}

function errorResponse(id: RequestId | null, code: number, message: string): JSONRPCErrorResponse {
  // JSON-RPC 2.0 answers a request whose id could not be read with `id: null`; the SDK's type has no null.
  return { jsonrpc: "2.0", id: id as RequestId, error: { code, message } };
}

// ---- one readable sentence for a schema's complaints --------------------------------------------------

/** The first complaint as a sentence fragment ("name must be a string, not a number"), and how many more there are. */
function readableIssues(issues: readonly ZodIssue[], input: Record<string, unknown>): string {
  const first = issues[0];
  if (first === undefined) return "the request does not fit its method";
  const more = issues.length - 1;
  return `${readableIssue(first, input)}${more > 0 ? ` (and ${more} more problem${more === 1 ? "" : "s"})` : ""}`;
}

function readableIssue(issue: ZodIssue, input: Record<string, unknown>): string {
  const where = issue.path.length === 0 ? "the message" : issue.path.map(String).join(".");
  switch (issue.code) {
    case "invalid_type": {
      const actual = valueAt(input, issue.path);
      const expected = typeName(issue.expected ?? "a value");
      return actual === undefined ? `${where} is missing (it must be ${expected})` : `${where} must be ${expected}, not ${kindOf(actual)}`;
    }
    case "invalid_union": {
      // The branch that got furthest speaks for the union.
      const branches = (issue.errors ?? []).filter((branch) => branch.length > 0);
      const deepest = branches.flat().sort((a, b) => b.path.length - a.path.length)[0];
      if (deepest) return readableIssue({ ...deepest, path: [...issue.path, ...deepest.path] }, input);
      return `${where} has an unexpected form`;
    }
    case "unrecognized_keys":
      return `${where} has unknown member${issue.keys?.length === 1 ? "" : "s"} ${(issue.keys ?? []).map((key) => JSON.stringify(key)).join(", ")}`;
    case "invalid_value":
      return `${where} must be one of ${(issue.values ?? []).map((value) => JSON.stringify(value)).join(", ")}`;
    default:
      return `${where}: ${issue.message.replace(/^Invalid input: /, "")}`;
  }
}

function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  let current = value;
  for (const key of path) {
    if (typeof current !== "object" || current === null) return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/** A zod type name as a reader says it. */
function typeName(expected: string): string {
  const names: Record<string, string> = {
    record: "an object",
    object: "an object",
    array: "an array",
    string: "a string",
    number: "a number",
    int: "an integer",
    boolean: "true or false",
    literal: "a fixed value",
  };
  return names[expected] ?? `a ${expected}`;
}

/** What kind of JSON value `value` is, for messages. */
function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number") return Number.isSafeInteger(value) ? "an integer" : Number.isInteger(value) ? "an integer beyond 2^53" : "a fractional number";
  if (typeof value === "object") return "an object";
  if (typeof value === "string") return "a string";
  if (typeof value === "boolean") return "a boolean";
  return typeof value;
}
