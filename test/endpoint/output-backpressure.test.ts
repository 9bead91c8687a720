import { type Socket, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import type { InvocationOutput } from "../../src/endpoint/invocation.js";
import { type CallMessage, PROTOCOL_VERSION, encodeFrame } from "../../src/endpoint/protocol.js";
import { type Endpoint } from "../../src/endpoint/server.js";
import { waitFor } from "../helpers/data-dir.js";
import { BUILD, type EchoEndpoint, honestCall, openEchoEndpoint } from "./echo-endpoint.js";

/**
 * What the host queues for clients that never read their replies (src/endpoint/reply-writer.ts): a producer
 * that respects `drained()` stops at the bound, the connection is cut once its client read nothing for the
 * stall timeout (its slot free), and an honest call is served meanwhile. Without the bound, six clients that
 * never read an 88 MB `audit events` reply each took a daemon from 446 to 980 MB.
 */
const LIMITS = { maxQueuedBytes: 1024 * 1024, maxQueuedBytesAll: 2 * 1024 * 1024, stallTimeoutMs: 1_000 };
/** The flood's chunks: 256 Ki characters each, 64 MiB in all. */
const CHUNK = "x".repeat(256 * 1024);
const CHUNKS = 256;
const build = BUILD;
let produced = 0;

/** `flood`: a large reply written as `audit events` writes its own, a chunk at a time, awaiting `drained`. */
async function flood(out: InvocationOutput): Promise<number> {
  for (let i = 0; i < CHUNKS; i++) {
    out.stdout(CHUNK);
    produced++;
    await out.drained?.();
  }
  return 0;
}

let fixture: EchoEndpoint;
let endpoint: Endpoint;
let log: string[];
beforeAll(async () => {
  fixture = await openEchoEndpoint({
    runInvocation: (argv, out, context) => (argv[0] === "flood" ? flood(out) : main(argv, out, context)),
    outputLimits: LIMITS,
  });
  ({ endpoint, log } = fixture);
});
afterAll(() => fixture.close());

/** A client that asks for the flood and never reads a byte of it. */
function nonReader(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(endpoint.paths.socket);
    socket.pause();
    socket.once("error", reject);
    socket.once("connect", () => {
      socket.on("error", () => undefined);
      const call: CallMessage = {
        type: "call",
        protocol: PROTOCOL_VERSION,
        ...build,
        argv: ["flood"],
        cwd: "/",
        env: {},
        stdoutIsTerminal: false,
        stderrIsTerminal: false,
      };
      socket.write(encodeFrame(call));
      resolve(socket);
    });
  });
}

describe("replies queued for clients that do not read", () => {
  it("no-read: three clients that never read a large reply hold a bounded queue, are cut, and an honest call is served meanwhile", async () => {
    const clients = [await nonReader(), await nonReader(), await nonReader()];
    let mostQueued = 0;
    const sample = (): number => (mostQueued = Math.max(mostQueued, endpoint.queuedReplyBytes));
    await waitFor(() => (sample(), produced >= 3), 10_000);
    expect(await honestCall(fixture, "meanwhile")).toEqual({ outcome: { served: true, code: 0 }, stdout: "said meanwhile\n" });
    await waitFor(() => (sample(), endpoint.openConnections === 0), 20_000);
    // Each connection may go one chunk (a frame of 256 Ki characters, as JSON) past its own bound before it waits.
    expect(mostQueued).toBeLessThanOrEqual(LIMITS.maxQueuedBytesAll + clients.length * (CHUNK.length + 64));
    // The producers stopped at the bound, then at the cut: far from all they would have written.
    expect(produced).toBeLessThan(clients.length * 16);
    expect(log.filter((line) => line.includes("read none of its reply"))).toHaveLength(clients.length);
    expect(endpoint.activeCalls).toBe(0);
    for (const client of clients) client.destroy();
  });
});
