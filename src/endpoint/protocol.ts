/**
 * The protocol between the `animaworks-tool` CLI client and a long-running host on the same machine,
 * over the host's Unix socket (see server.ts and client.ts).
 *
 * Framing, fixed for every protocol version: a 4-byte big-endian unsigned length N, then N bytes of
 * UTF-8 JSON holding one message object. The first message of a connection names the protocol version;
 * a host answers a version it does not speak with `refused` and the client runs the call itself.
 *
 * Conversation of a call: client `call` → host any number of `stdout`/`stderr` (and `stdin-request`,
 * answered with `stdin` chunks and `stdin-end`) → host `exit`, or host `refused` before anything ran.
 * `status` and `stop` get one `status` or `stopping` reply. A malformed frame or message gets `error`
 * and the connection is closed; the host keeps serving others.
 *
 * Plain data only; this module imports nothing, so that the thin client stays small.
 */

export const PROTOCOL_VERSION = 1;
/** Largest frame either side accepts, in bytes of JSON (a larger length is a protocol error). */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024;
/** Output and stdin are sent in chunks of at most this many UTF-16 code units. */
export const CHUNK_CHARS = 1024 * 1024;

/** Which build a side runs: `build` is a content hash of the CLI bundles, `install` the project folder. */
export interface BuildInfo {
  build: string;
  install: string;
}

export interface CallMessage extends BuildInfo {
  type: "call";
  protocol: number;
  argv: string[];
  cwd: string;
  /**
   * The client's environment, whole: the call is resolved as the client's own process would resolve it
   * (ANIMAWORKS_*, HOME, CI, and the variables the operator lets getCredential read, which the host
   * compares with its own before it serves the call). Same user only: the socket is owner-only.
   */
  env: Record<string, string>;
  stdoutIsTerminal: boolean;
  stderrIsTerminal: boolean;
}

export type ClientMessage = CallMessage | ({ type: "status" | "stop"; protocol: number } & BuildInfo) | { type: "stdin"; data: string } | { type: "stdin-end" };

export interface EndpointStatus extends BuildInfo {
  pid: number;
  /** What kind of process serves: the self-starting `daemon`, or a `serve` worker. */
  kind: "daemon" | "serve";
  dataDir: string;
  startedAt: string;
  /** Calls served since start. */
  calls: number;
  /** Calls running now. */
  active: number;
  /** A daemon exits after this long without a call, ms; undefined for `serve`. */
  idleTimeoutMs?: number;
}

export type RefusalReason = "version" | "config" | "command" | "busy" | "stopping";

export type HostMessage =
  | { type: "stdout" | "stderr"; text: string }
  | { type: "stdin-request" }
  | { type: "exit"; code: number }
  | { type: "refused"; reason: RefusalReason; message: string; /** The host stops: a new one may be started. */ restarting?: boolean }
  | { type: "status"; status: EndpointStatus }
  | { type: "stopping" }
  | { type: "error"; message: string; /** A stable code for errors a client may act on (see ENDPOINT_ERROR_CODES). */ code?: EndpointErrorCode };

/**
 * Stable codes of host `error` frames:
 * - `ReplyTooLarge`: a reply the host made could not be framed (over MAX_FRAME_BYTES); the connection ends.
 * - `OutputStalled`: the client did not read its output for too long; the connection is cut.
 */
export const ENDPOINT_ERROR_CODES = ["ReplyTooLarge", "OutputStalled"] as const;
export type EndpointErrorCode = (typeof ENDPOINT_ERROR_CODES)[number];

/** Most characters of a client's text a reply or log line quotes (a client's fields are up to a frame long). */
export const QUOTE_CHARS = 200;

/**
 * A client's text, quoted for a reply or a log line: JSON-escaped (controls, lone surrogates), at most
 * QUOTE_CHARS characters of it and a count of the rest. A reply never grows with what the client sent:
 * quoted whole, 6 MiB of invalid UTF-8 (U+FFFD, 3 bytes each on the way out) made an 18 MiB reply.
 */
export function quote(value: unknown): string {
  // A string is cut, then escaped; anything else is shown as its JSON (already escaped), cut.
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  const show = (part: string): string => (typeof value === "string" ? JSON.stringify(part) : part);
  if (text.length <= QUOTE_CHARS) return show(text);
  let end = QUOTE_CHARS;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${show(text.slice(0, end))}… (${text.length - end} more characters)`;
}

/** A frame or message that breaks the protocol. */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}

export function encodeFrame(message: ClientMessage | HostMessage): Buffer {
  const body = Buffer.from(JSON.stringify(message), "utf8");
  if (body.length > MAX_FRAME_BYTES)
    throw new ProtocolError(`a ${message.type} message of ${body.length} bytes exceeds the ${MAX_FRAME_BYTES}-byte frame limit`);
  const frame = Buffer.allocUnsafe(4 + body.length);
  frame.writeUInt32BE(body.length, 0);
  body.copy(frame, 4);
  return frame;
}

/** Splits text into chunks of at most CHUNK_CHARS code units, never between the halves of a surrogate pair. */
export function chunks(text: string): string[] {
  const parts: string[] = [];
  let start = 0;
  while (text.length - start > CHUNK_CHARS) {
    let end = start + CHUNK_CHARS;
    const last = text.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end--;
    parts.push(text.slice(start, end));
    start = end;
  }
  parts.push(text.slice(start));
  return parts;
}

/**
 * Collects bytes from a stream and yields whole frames' JSON values. Throws ProtocolError on a bad frame.
 * The pieces of a frame are joined once, when the last one arrives: a frame of N bytes costs O(N) however
 * finely the stream cuts it (joining on every piece made a 6 MiB frame in 64 KiB pieces copy 300 MB).
 */
export class FrameDecoder {
  private buffered: Buffer[] = [];
  private size = 0;
  /** The length of the frame being collected, once its 4-byte header has arrived. */
  private frameLength: number | undefined;

  push(chunk: Buffer): unknown[] {
    this.buffered.push(chunk);
    this.size += chunk.length;
    const values: unknown[] = [];
    for (;;) {
      if (this.frameLength === undefined) {
        if (this.size < 4) return values;
        const length = this.joined().readUInt32BE(0);
        if (length > MAX_FRAME_BYTES) throw new ProtocolError(`a frame announces ${length} bytes, more than the ${MAX_FRAME_BYTES}-byte limit`);
        this.frameLength = length;
      }
      if (this.size < 4 + this.frameLength) return values;
      const head = this.joined();
      const body = head.subarray(4, 4 + this.frameLength);
      const rest = head.subarray(4 + this.frameLength);
      this.buffered = rest.length > 0 ? [rest] : [];
      this.size = rest.length;
      this.frameLength = undefined;
      let value: unknown;
      try {
        value = JSON.parse(body.toString("utf8"));
      } catch {
        throw new ProtocolError("a frame does not hold valid JSON");
      }
      values.push(value);
    }
  }

  /** Bytes of an incomplete frame still held. */
  get pendingBytes(): number {
    return this.size;
  }

  /** Everything held, as one buffer (joined now if it came in pieces). */
  private joined(): Buffer {
    if (this.buffered.length !== 1) this.buffered = [Buffer.concat(this.buffered, this.size)];
    return this.buffered[0] as Buffer;
  }
}

// ---- decoding: every message is checked field by field before it is used -----------------------

function record(value: unknown, side: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new ProtocolError(`a ${side} message must be a JSON object`);
  return value as Record<string, unknown>;
}

function field<T>(message: Record<string, unknown>, name: string, check: (value: unknown) => value is T, what: string): T {
  const value = message[name];
  if (!check(value)) throw new ProtocolError(`${quote(message["type"])} message: ${name} must be ${what}`);
  return value;
}

const isString = (value: unknown): value is string => typeof value === "string";
const isBoolean = (value: unknown): value is boolean => typeof value === "boolean";
const isInteger = (value: unknown): value is number => Number.isSafeInteger(value);
const isStrings = (value: unknown): value is string[] => Array.isArray(value) && value.every(isString);
const isStringRecord = (value: unknown): value is Record<string, string> =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Object.values(value).every(isString);

export function decodeClientMessage(value: unknown): ClientMessage {
  const message = record(value, "client");
  switch (message["type"]) {
    case "call":
      return {
        type: "call",
        protocol: field(message, "protocol", isInteger, "an integer"),
        build: field(message, "build", isString, "a string"),
        install: field(message, "install", isString, "a string"),
        argv: field(message, "argv", isStrings, "an array of strings"),
        cwd: field(message, "cwd", (v): v is string => isString(v) && v.startsWith("/"), "an absolute path"),
        env: { ...field(message, "env", isStringRecord, "an object of strings") },
        stdoutIsTerminal: field(message, "stdoutIsTerminal", isBoolean, "a boolean"),
        stderrIsTerminal: field(message, "stderrIsTerminal", isBoolean, "a boolean"),
      };
    case "status":
    case "stop":
      return {
        type: message["type"],
        protocol: field(message, "protocol", isInteger, "an integer"),
        build: field(message, "build", isString, "a string"),
        install: field(message, "install", isString, "a string"),
      };
    case "stdin":
      return { type: "stdin", data: field(message, "data", isString, "a string") };
    case "stdin-end":
      return { type: "stdin-end" };
    default:
      throw new ProtocolError(`unknown client message type ${quote(message["type"])}`);
  }
}

const REFUSALS: readonly string[] = ["version", "config", "command", "busy", "stopping"];

export function decodeHostMessage(value: unknown): HostMessage {
  const message = record(value, "host");
  switch (message["type"]) {
    case "stdout":
    case "stderr":
      return { type: message["type"], text: field(message, "text", isString, "a string") };
    case "stdin-request":
    case "stopping":
      return { type: message["type"] };
    case "exit":
      return { type: "exit", code: field(message, "code", (v): v is number => isInteger(v) && v >= 0 && v <= 255, "an exit code") };
    case "refused":
      return {
        type: "refused",
        reason: field(message, "reason", (v): v is RefusalReason => isString(v) && REFUSALS.includes(v), "a refusal reason"),
        message: field(message, "message", isString, "a string"),
        ...(message["restarting"] === true ? { restarting: true } : {}),
      };
    case "status":
      return { type: "status", status: record(message["status"], "status") as unknown as EndpointStatus };
    case "error":
      return {
        type: "error",
        message: field(message, "message", isString, "a string"),
        ...(ENDPOINT_ERROR_CODES.includes(message["code"] as EndpointErrorCode) ? { code: message["code"] as EndpointErrorCode } : {}),
      };
    default:
      throw new ProtocolError(`unknown host message type ${quote(message["type"])}`);
  }
}
