import { type Socket, connect } from "node:net";
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { runThroughHost } from "../../src/cli/client.js";
import { readBuildInfo } from "../../src/endpoint/paths.js";
import { FrameDecoder, type HostMessage, MAX_FRAME_BYTES, PROTOCOL_VERSION, decodeHostMessage } from "../../src/endpoint/protocol.js";
import { Endpoint } from "../../src/endpoint/server.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * Replies never grow with what a client sent (src/endpoint/server.ts `send`, protocol.ts `quote`): a frame
 * of 6 MiB of invalid UTF-8 (0xFF, 1 byte on the wire, U+FFFD, 3 bytes, on the way out) quoted whole made a
 * reply over the frame limit, and encodeFrame threw in the socket's data handler, uncaught: the daemon died.
 */
const TOOL = `
export function get_tool_schemas() {
  return [{ name: "echo_say", description: "says", input_schema: { type: "object", properties: { word: { type: "string" } }, required: ["word"] } }];
}
export function dispatch(name, args) { return "said " + args.word; }
`;
const build = readBuildInfo(PROJECT_ROOT);
const INVALID_UTF8 = Buffer.alloc(6 * 1024 * 1024, 0xff);
let data: TempDataDir;
let host: ToolHost;
let endpoint: Endpoint;
const log: string[] = [];

beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/echo.mjs": TOOL });
  host = createHost({ dataDir: data.dir, isolation: "process", watch: false, timeoutMs: 20_000, onLog: () => {} });
  const opened = await Endpoint.open({
    host,
    kind: "serve",
    // `huge-failure` stands for any reply the host makes too large to frame (here: a failure's message).
    runInvocation: (argv, out, context) => (argv[0] === "huge-failure" ? Promise.reject(new Error(INVALID_UTF8.toString("utf8"))) : main(argv, out, context)),
    log: (line) => void log.push(line),
  });
  if (!opened) throw new Error("no endpoint");
  endpoint = opened;
});
afterAll(async () => {
  await endpoint.close({ graceMs: 1_000 });
  await host.close();
  data.cleanup();
});

/** Sends one frame of the given body; resolves with the host's messages once it closes the connection. */
function exchange(body: Buffer): Promise<HostMessage[]> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(endpoint.paths.socket);
    const decoder = new FrameDecoder();
    const messages: HostMessage[] = [];
    const header = Buffer.alloc(4);
    header.writeUInt32BE(body.length);
    socket.on("connect", () => socket.write(Buffer.concat([header, body])));
    socket.on("data", (chunk: Buffer) => messages.push(...decoder.push(chunk).map(decodeHostMessage)));
    socket.on("error", reject);
    socket.on("close", () => resolve(messages));
  });
}

/** A call frame whose `field` is 6 MiB of invalid UTF-8, the rest as `fields`. */
function callWith(field: string, fields: Record<string, unknown>): Buffer {
  const [before, after] = JSON.stringify({ ...fields, [field]: "\u0000" }).split("\\u0000") as [string, string];
  return Buffer.concat([Buffer.from(before), INVALID_UTF8, Buffer.from(after)]);
}

const CALL = { type: "call", protocol: PROTOCOL_VERSION, ...build, argv: ["--help"], cwd: "/", env: {}, stdoutIsTerminal: false, stderrIsTerminal: false };

async function honestCall(word: string) {
  const out: string[] = [];
  const outcome = await runThroughHost(
    ["--data-dir", data.dir, "--anima", "alice", "echo", "say", word],
    { write: (fd, text) => void (fd === 1 && out.push(text)), readStdin: async () => "", isTerminal: () => false },
    { ...build, env: {}, cwd: "/", hostname: hostname() },
  );
  return { outcome, stdout: out.join("") };
}

/** Every reply is short, and so is every log line. */
function expectShort(replies: HostMessage[]): void {
  for (const reply of replies) expect(JSON.stringify(reply).length).toBeLessThan(2_000);
  for (const line of log) expect(line.length).toBeLessThan(2_000);
}

describe("replies bounded whatever a client sends", () => {
  it("big-refusal: a call whose build is 6 MiB of invalid UTF-8 is refused in a short reply; the host serves on", async () => {
    const frame = callWith("build", { ...CALL });
    expect(frame.length).toBeLessThan(MAX_FRAME_BYTES);
    const replies = await exchange(frame);
    expect(replies).toEqual([{ type: "refused", reason: "version", message: expect.stringMatching(/the client build "\uFFFD+"… \(\d+ more characters\)/) }]);
    expectShort(replies);
    expect(await honestCall("after")).toEqual({ outcome: { served: true, code: 0 }, stdout: "said after\n" });
  });

  it("big-type: a message whose type is 6 MiB of invalid UTF-8 gets a short error; the host serves on", async () => {
    const replies = await exchange(Buffer.concat([Buffer.from(`{"type":"`), INVALID_UTF8, Buffer.from(`"}`)]));
    expect(replies).toEqual([{ type: "error", message: expect.stringMatching(/^bad frame: unknown client message type "\uFFFD+"… \(\d+ more characters\)$/) }]);
    expectShort(replies);
    expect(await honestCall("after type")).toEqual({ outcome: { served: true, code: 0 }, stdout: "said after type\n" });
  });

  it("big-reply: a reply too large to frame ends its connection with a short coded error; the host serves on", async () => {
    const replies = await exchange(Buffer.from(JSON.stringify({ ...CALL, argv: ["huge-failure"] })));
    expect(replies).toEqual([{ type: "error", code: "ReplyTooLarge", message: expect.any(String) }]);
    expectShort(replies);
    expect(log.at(-1)).toMatch(/^endpoint: closed a connection: its error reply could not be framed/);
    expect(await honestCall("after reply")).toEqual({ outcome: { served: true, code: 0 }, stdout: "said after reply\n" });
  });
});
