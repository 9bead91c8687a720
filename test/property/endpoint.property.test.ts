import { main } from "../../src/cli/main.js";
import { execFileSync } from "node:child_process";
import { connect } from "node:net";
import { join } from "node:path";
import { hostname } from "node:os";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { controlHost } from "../../src/cli/client.js";
import { endpointPaths, readBuildInfo } from "../../src/endpoint/paths.js";
import { FrameDecoder, type HostMessage, MAX_FRAME_BYTES, PROTOCOL_VERSION, decodeHostMessage } from "../../src/endpoint/protocol.js";
import { Endpoint } from "../../src/endpoint/server.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir, within } from "../helpers/data-dir.js";
import { STACK_TRACE, fuzzParameters, propertyTimeoutMs } from "./settings.js";

/**
 * Property: whatever bytes a connection to a running host's socket carries (garbage, frames of any
 * length, JSON of any shape, client messages with wrong fields, in any order), the host answers with
 * well-formed frames, closes that connection within a bound, and serves the next client.
 */
const ECHO_TOOL = `
export function get_tool_schemas() {
  return [{ name: "echo_say", description: "Echo", input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } }];
}
export function dispatch(name, args) { return "said " + args.text; }
`;
const RUNS = 25;
const FIRST_MESSAGE_TIMEOUT_MS = 300;
const CONNECTION_BOUND_MS = 30_000;
/** How long the fuzzing client waits for the host to close a connection it left open before it goes away itself. */
const CLIENT_PATIENCE_MS = 1_500;

const build = readBuildInfo(PROJECT_ROOT);
let data: TempDataDir;
let host: ToolHost;
let endpoint: Endpoint;

beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/echo.ts": ECHO_TOOL });
  execFileSync("mkfifo", [join(data.dir, "args.fifo")]);
  host = createHost({ dataDir: data.dir, isolation: "process", sandboxProcesses: 1, timeoutMs: 5_000, onLog: () => {} });
  const opened = await Endpoint.open({ host, kind: "serve", runInvocation: main, firstMessageTimeoutMs: FIRST_MESSAGE_TIMEOUT_MS, maxStdinBytes: 64 * 1024 });
  if (!opened) throw new Error("no endpoint");
  endpoint = opened;
});
afterAll(async () => {
  await endpoint?.close({ graceMs: 1_000 });
  await host?.close();
  data?.cleanup();
});

function frame(body: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  return Buffer.concat([head, body]);
}

/** A client message as a broken or hostile client might write it: right and wrong types, fields and values. */
function clientMessage(dataDir: string): fc.Arbitrary<unknown> {
  const words = ["--data-dir", dataDir, "--anima", "alice", "echo", "say", "--args-file", "-", "-j", "list", "/dev/zero", join(dataDir, "args.fifo")];
  const argv = fc.array(fc.oneof(fc.constantFrom(...words), fc.string({ maxLength: 8 })), { maxLength: 8 });
  const anyValue = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constant(undefined));
  return fc.oneof(
    fc.record({
      type: fc.constant("call"),
      protocol: fc.oneof({ weight: 4, arbitrary: fc.constant(PROTOCOL_VERSION) }, { weight: 1, arbitrary: fc.integer() }),
      build: fc.oneof({ weight: 4, arbitrary: fc.constant(build.build) }, { weight: 1, arbitrary: fc.string() }),
      install: fc.oneof({ weight: 4, arbitrary: fc.constant(build.install) }, { weight: 1, arbitrary: fc.string() }),
      argv: fc.oneof({ weight: 4, arbitrary: argv }, { weight: 1, arbitrary: anyValue }),
      cwd: fc.oneof({ weight: 4, arbitrary: fc.constant("/") }, { weight: 1, arbitrary: anyValue }),
      env: fc.oneof(
        { weight: 4, arbitrary: fc.constant({}) },
        { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 })) },
        { weight: 1, arbitrary: anyValue },
      ),
      stdoutIsTerminal: fc.oneof(fc.boolean(), anyValue),
      stderrIsTerminal: fc.oneof(fc.boolean(), anyValue),
    }),
    fc.record({
      type: fc.constantFrom("status", "stop"),
      protocol: fc.oneof(fc.constant(PROTOCOL_VERSION), fc.integer()),
      build: fc.constant(build.build),
      install: fc.constant(build.install),
    }),
    fc.record({ type: fc.constantFrom("stdin", "stdin-end"), data: fc.oneof(fc.string(), anyValue) }),
    fc.record({ type: fc.oneof(fc.string({ maxLength: 10 }), anyValue) }),
    anyValue,
  );
}

/** What one connection carries: pieces of these kinds, in order. */
function connectionBytes(dataDir: string): fc.Arbitrary<Buffer[]> {
  const piece = fc.oneof(
    { weight: 4, arbitrary: clientMessage(dataDir).map((message) => frame(Buffer.from(JSON.stringify(message) ?? "null"))) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 40 }).map((text) => frame(Buffer.from(text))) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(MAX_FRAME_BYTES + 1, 0xffffffff, 1_000_000)
        .map((length) => Buffer.from([length >>> 24, (length >>> 16) & 255, (length >>> 8) & 255, length & 255])),
    },
  );
  return fc.array(piece, { minLength: 0, maxLength: 5 });
}

/**
 * Sends `pieces` on a fresh connection, then half-closes it or leaves it open. Resolves with the host's
 * messages once the connection closes, or once `patienceMs` have passed: then the client goes away
 * (destroys its end), as a killed client would, and the host must end whatever the connection started.
 */
function exchange(pieces: Buffer[], halfClose: boolean, patienceMs: number): Promise<HostMessage[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(endpoint.paths.socket);
    const decoder = new FrameDecoder();
    const messages: HostMessage[] = [];
    let problem: Error | undefined;
    const patience = setTimeout(() => socket.destroy(), patienceMs);
    socket.on("connect", () => {
      for (const piece of pieces) socket.write(piece);
      if (halfClose) socket.end();
    });
    socket.on("data", (chunk: Buffer) => {
      try {
        messages.push(...decoder.push(chunk).map(decodeHostMessage));
      } catch (error) {
        problem = error as Error;
      }
    });
    socket.on("error", () => undefined); // a reset is one way to be closed
    socket.on("close", () => {
      clearTimeout(patience);
      if (problem) reject(new Error(`the host sent a malformed frame: ${problem.message}`));
      else resolve(messages);
    });
  });
}

/** Resolves once the host runs no call (bounded by the caller's `within`). */
async function untilIdle(): Promise<void> {
  while (endpoint.activeCalls > 0) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe("the host endpoint, under any bytes", () => {
  it(
    "answers in well-formed frames, closes the connection within a bound, and serves the next client",
    async () => {
      const paths = endpointPaths(data.dir, hostname());
      await fc.assert(
        fc.asyncProperty(connectionBytes(data.dir), fc.boolean(), async (pieces, halfClose) => {
          const messages = await within(CONNECTION_BOUND_MS, "a fuzzed connection", exchange(pieces, halfClose, CLIENT_PATIENCE_MS));
          for (const message of messages) {
            if (message.type === "stdout" || message.type === "stderr" || message.type === "error") {
              expect(message.type === "error" ? message.message : message.text).not.toMatch(STACK_TRACE);
            }
          }
          const status = await within(CONNECTION_BOUND_MS, "a status request after it", controlHost(paths, "status", build));
          expect(status?.type).toBe("status");
          // Whatever the connection started has ended with it (nothing wedged, no slot held).
          await within(CONNECTION_BOUND_MS, "the host ending the connection's call", untilIdle());
        }),
        fuzzParameters(RUNS),
      );
    },
    propertyTimeoutMs(90_000, RUNS),
  );
});
