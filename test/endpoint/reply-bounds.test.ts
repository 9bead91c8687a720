import { type Socket, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { FrameDecoder, type HostMessage, MAX_FRAME_BYTES, PROTOCOL_VERSION, decodeHostMessage } from "../../src/endpoint/protocol.js";
import { type Endpoint } from "../../src/endpoint/server.js";
import { BUILD, type EchoEndpoint, honestCall, openEchoEndpoint } from "./echo-endpoint.js";

/**
 * Replies never grow with what a client sent (src/endpoint/server.ts `send`, protocol.ts `quote`): a frame
 * of 6 MiB of invalid UTF-8 (0xFF, 1 byte on the wire, U+FFFD, 3 bytes, on the way out) quoted whole made a
 * reply over the frame limit, and encodeFrame threw in the socket's data handler, uncaught: the daemon died.
 */
const build = BUILD;
const INVALID_UTF8 = Buffer.alloc(6 * 1024 * 1024, 0xff);

let fixture: EchoEndpoint;
let endpoint: Endpoint;
let log: string[];
beforeAll(async () => {
  fixture = await openEchoEndpoint({
    // `huge-failure` stands for any reply the host makes too large to frame (here: a failure's message).
    runInvocation: (argv, out, context) => (argv[0] === "huge-failure" ? Promise.reject(new Error(INVALID_UTF8.toString("utf8"))) : main(argv, out, context)),
  });
  ({ endpoint, log } = fixture);
});
afterAll(() => fixture.close());

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
    expect(await honestCall(fixture, "after")).toEqual({ outcome: { served: true, code: 0 }, stdout: "said after\n" });
  });

  it("big-type: a message whose type is 6 MiB of invalid UTF-8 gets a short error; the host serves on", async () => {
    const replies = await exchange(Buffer.concat([Buffer.from(`{"type":"`), INVALID_UTF8, Buffer.from(`"}`)]));
    expect(replies).toEqual([{ type: "error", message: expect.stringMatching(/^bad frame: unknown client message type "\uFFFD+"… \(\d+ more characters\)$/) }]);
    expectShort(replies);
    expect(await honestCall(fixture, "after type")).toEqual({ outcome: { served: true, code: 0 }, stdout: "said after type\n" });
  });

  it("big-reply: a reply too large to frame ends its connection with a short coded error; the host serves on", async () => {
    const replies = await exchange(Buffer.from(JSON.stringify({ ...CALL, argv: ["huge-failure"] })));
    expect(replies).toEqual([{ type: "error", code: "ReplyTooLarge", message: expect.any(String) }]);
    expectShort(replies);
    expect(log.at(-1)).toMatch(/^endpoint: closed a connection: its error reply could not be framed/);
    expect(await honestCall(fixture, "after reply")).toEqual({ outcome: { served: true, code: 0 }, stdout: "said after reply\n" });
  });
});
