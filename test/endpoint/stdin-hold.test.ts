import { type Socket, connect } from "node:net";
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runThroughHost } from "../../src/cli/client.js";
import { type CallMessage, FrameDecoder, type HostMessage, PROTOCOL_VERSION, decodeHostMessage, encodeFrame } from "../../src/endpoint/protocol.js";
import { type Endpoint } from "../../src/endpoint/server.js";
import { type TempDataDir, waitFor } from "../helpers/data-dir.js";
import { BUILD, type EchoEndpoint, openEchoEndpoint } from "./echo-endpoint.js";

/**
 * A call that waits for stdin its client never sends (src/endpoint/stdin-reader.ts) fails with Timeout once
 * the stdin deadline passes, freeing its slot: 256 such calls refused every other client as busy and kept
 * the daemon from idling out.
 */
const STDIN_TIMEOUT_MS = 500;
const build = BUILD;

let fixture: EchoEndpoint;
let data: TempDataDir;
let endpoint: Endpoint;
beforeAll(async () => {
  fixture = await openEchoEndpoint({ stdinTimeoutMs: STDIN_TIMEOUT_MS });
  ({ data, endpoint } = fixture);
});
afterAll(() => fixture.close());

/** A client that asks for a call reading its arguments from stdin, and never sends them; records what it hears. */
function stdinHolder(): Promise<{ socket: Socket; messages: HostMessage[]; closed: () => boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(endpoint.paths.socket);
    const decoder = new FrameDecoder();
    const messages: HostMessage[] = [];
    let closed = false;
    socket.on("data", (chunk: Buffer) => messages.push(...decoder.push(chunk).map(decodeHostMessage)));
    socket.on("close", () => void (closed = true));
    socket.once("error", reject);
    socket.once("connect", () => {
      const call: CallMessage = {
        type: "call",
        protocol: PROTOCOL_VERSION,
        ...build,
        argv: ["--data-dir", data.dir, "--anima", "alice", "echo", "say", "--args-file", "-"],
        cwd: "/",
        env: {},
        stdoutIsTerminal: false,
        stderrIsTerminal: false,
      };
      socket.write(encodeFrame(call));
      resolve({ socket, messages, closed: () => closed });
    });
  });
}

describe("a call waiting for stdin", () => {
  it("stdin-hold: a client that never sends its stdin gets a Timeout error, its call ends and its slot is free", async () => {
    const holders = [await stdinHolder(), await stdinHolder()];
    await waitFor(() => holders.every((holder) => holder.closed()), 20_000);
    for (const holder of holders) {
      expect(holder.messages).toEqual([
        { type: "stdin-request" },
        { type: "stderr", text: expect.stringMatching(/^Error \(Timeout\): the client sent no complete stdin within 500 ms/) },
        { type: "exit", code: 3 },
      ]);
    }
    expect(endpoint.activeCalls).toBe(0);
    // An honest call with stdin is served as before.
    const out: string[] = [];
    const outcome = await runThroughHost(
      ["--data-dir", data.dir, "--anima", "alice", "echo", "say", "--args-file", "-"],
      { write: (fd, text) => void (fd === 1 && out.push(text)), readStdin: async () => '{"word":"typed"}', isTerminal: () => false },
      { ...build, env: {}, cwd: "/", hostname: hostname() },
    );
    expect({ outcome, stdout: out.join("") }).toEqual({ outcome: { served: true, code: 0 }, stdout: "said typed\n" });
  });
});
