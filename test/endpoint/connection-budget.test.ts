import { type Socket, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FrameDecoder, type HostMessage, MAX_FRAME_BYTES, PROTOCOL_VERSION, decodeHostMessage, encodeFrame } from "../../src/endpoint/protocol.js";
import { type Endpoint } from "../../src/endpoint/server.js";
import { type TempDataDir, waitFor } from "../helpers/data-dir.js";
import { BUILD, type EchoEndpoint, honestCall, openEchoEndpoint } from "./echo-endpoint.js";

/**
 * What the host's connections may hold together (src/endpoint/connection-budget.ts), against clients of
 * the socket's own user that open connections and leave frames unfinished: each connection is cut or
 * refused within its bounds, and an honest call is served meanwhile.
 */
const LIMITS = { maxConnections: 6, maxPendingFrameBytes: 1024 * 1024, frameTimeoutMs: 1_500 };
const build = BUILD;

let fixture: EchoEndpoint;
let data: TempDataDir;
let endpoint: Endpoint;
beforeAll(async () => {
  fixture = await openEchoEndpoint({ kind: "daemon", connectionLimits: LIMITS });
  ({ data, endpoint } = fixture);
});
afterAll(() => fixture.close());

/** A hostile connection: keeps its side open whatever the host does (half-open), and records what it hears. */
interface Raw {
  socket: Socket;
  messages: HostMessage[];
  /** The host ended its side, or the connection is gone (half-open: the host may still read what this side sends). */
  ended(): boolean;
}
function raw(): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = connect({ path: endpoint.paths.socket, allowHalfOpen: true });
    const decoder = new FrameDecoder();
    const messages: HostMessage[] = [];
    let ended = false;
    socket.on("data", (chunk: Buffer) => messages.push(...decoder.push(chunk).map(decodeHostMessage)));
    socket.on("end", () => void (ended = true));
    socket.on("close", () => void (ended = true)); // also after an EPIPE: it wrote on after the host closed
    socket.once("error", reject);
    socket.once("connect", () => {
      socket.on("error", () => undefined);
      resolve({ socket, messages, ended: () => ended });
    });
  });
}

/** A frame header announcing the largest frame, and `bytes` of its body: never finished. */
function unfinishedFrame(bytes: number): Buffer {
  const header = Buffer.alloc(4);
  header.writeUInt32BE(MAX_FRAME_BYTES);
  return Buffer.concat([header, Buffer.alloc(bytes, 0x20)]);
}

describe("the host endpoint's connection budget", () => {
  it("partial-after-status: a connection whose status reply is complete is read no further and closed", async () => {
    const client = await raw();
    client.socket.write(encodeFrame({ type: "status", protocol: PROTOCOL_VERSION, ...build }));
    client.socket.write(unfinishedFrame(256 * 1024));
    // The host lets the connection go (not only its own side: it no longer reads or holds what comes).
    await waitFor(() => client.ended() && endpoint.openConnections === 0, 10_000);
    // The status, and nothing else: it was closed for being done, not for its unfinished frame.
    expect(client.messages.map((message) => message.type)).toEqual(["status"]);
    expect(endpoint.heldFrameBytes).toBe(0);
  });

  it("stalled-frame: a frame begun during a call and never finished ends that connection (and its call) within the frame timeout", async () => {
    const client = await raw();
    client.socket.write(
      encodeFrame({
        type: "call",
        protocol: PROTOCOL_VERSION,
        ...build,
        argv: ["--data-dir", data.dir, "--anima", "alice", "echo", "spin"],
        cwd: "/",
        env: {},
        stdoutIsTerminal: false,
        stderrIsTerminal: false,
      }),
    );
    await waitFor(() => endpoint.activeCalls === 1, 20_000);
    client.socket.write(unfinishedFrame(64 * 1024));
    await waitFor(() => client.ended(), 15_000);
    expect(client.messages.at(-1)).toEqual({ type: "error", message: `a frame did not arrive whole within ${LIMITS.frameTimeoutMs} ms` });
    await waitFor(() => endpoint.activeCalls === 0 && endpoint.heldFrameBytes === 0, 15_000);
  });

  it("pending-flood: unfinished frames past the budget across connections cut the one that crosses it; an honest call is served meanwhile", async () => {
    const holders: Raw[] = [];
    for (let i = 0; i < 2; i++) {
      const holder = await raw();
      holder.socket.write(unfinishedFrame(400 * 1024));
      holders.push(holder);
      await waitFor(() => endpoint.heldFrameBytes >= (i + 1) * 400 * 1024, 10_000);
    }
    const crossing = await raw();
    crossing.socket.write(unfinishedFrame(400 * 1024));
    await waitFor(() => crossing.ended(), 10_000);
    expect(crossing.messages).toEqual([
      { type: "refused", reason: "busy", message: expect.stringMatching(/unfinished frames, more than its 1048576-byte limit/) },
    ]);
    expect(endpoint.heldFrameBytes).toBeLessThanOrEqual(LIMITS.maxPendingFrameBytes);

    const honest = await honestCall(fixture, "meanwhile");
    expect(honest).toEqual({ outcome: { served: true, code: 0 }, stdout: "said meanwhile\n" });
    // The holders are cut by the frame timeout, and what they held is given back.
    await waitFor(() => holders.every((holder) => holder.ended()), 15_000);
    expect(endpoint.heldFrameBytes).toBe(0);
  });

  it("connection-flood: a connection past the limit is refused as busy (its client runs the call itself), and served once others close", async () => {
    await waitFor(() => endpoint.openConnections === 0, 15_000);
    const idle: Raw[] = [];
    for (let i = 0; i < LIMITS.maxConnections; i++) idle.push(await raw());
    await waitFor(() => endpoint.openConnections === LIMITS.maxConnections, 10_000);
    const extra = await raw();
    await waitFor(() => extra.ended(), 10_000);
    expect(extra.messages).toEqual([{ type: "refused", reason: "busy", message: `the running host has ${LIMITS.maxConnections} connections open` }]);
    expect((await honestCall(fixture, "refused")).outcome).toMatchObject({ served: false });

    for (const connection of idle) connection.socket.destroy();
    await waitFor(() => endpoint.openConnections === 0, 10_000);
    expect(await honestCall(fixture, "after")).toEqual({ outcome: { served: true, code: 0 }, stdout: "said after\n" });
  });
});
