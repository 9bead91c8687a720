import { spawn } from "node:child_process";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { GuardedStdioTransport } from "../../src/mcp/stdio-transport.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { makeDataDir, waitFor, within } from "../helpers/data-dir.js";

/**
 * The MCP stdio transport against clients that do not read what it writes: the server's queued output
 * stays bounded (it stops reading requests while its output is full, and closes a session whose client
 * lets answers pile up past the limit), and a client that went away ends the session without a crash.
 */
const INITIALIZE = {
  jsonrpc: "2.0",
  id: "init",
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } },
};

/** An SDK server on the transport over in-memory streams; nothing reads `output` until a test does. */
async function serverOn(options: { maxQueuedOutputBytes?: number; onCall?: () => Promise<string> } = {}) {
  const input = new PassThrough();
  const output = new PassThrough();
  const notes: string[] = [];
  const transport = new GuardedStdioTransport(
    {
      maxMessageBytes: 1024 * 1024,
      log: (note) => notes.push(note),
      ...(options.maxQueuedOutputBytes ? { maxQueuedOutputBytes: options.maxQueuedOutputBytes } : {}),
    },
    input,
    output,
  );
  const server = new Server({ name: "t", version: "1" }, { capabilities: { tools: {} } });
  const onCall = options.onCall;
  if (onCall) server.setRequestHandler(CallToolRequestSchema, async () => ({ content: [{ type: "text", text: await onCall() }] }));
  let closed = false;
  server.onclose = () => void (closed = true);
  await server.connect(transport);
  return { input, output, notes, server, closed: () => closed };
}

/** Reads `output` from now on: each parsed line. */
function readLines(output: PassThrough): Array<{ id?: unknown; error?: { code: number } }> {
  const lines: Array<{ id?: unknown; error?: { code: number } }> = [];
  let pending = "";
  output.on("data", (chunk: Buffer) => {
    pending += chunk.toString();
    const parts = pending.split("\n");
    pending = parts.pop() ?? "";
    for (const part of parts) lines.push(JSON.parse(part) as { id?: unknown; error?: { code: number } });
  });
  return lines;
}

describe("the MCP stdio transport against a client that does not read", () => {
  it("never-reading-client: stops reading requests while its output is full, and answers them all once the client reads", async () => {
    const { input, output, server } = await serverOn();
    // 64 Ki lines of "x": each a 2-byte request whose answer (a parse error) is ≈ 150 bytes, ≈ 10 MB in all.
    const LINES = 64 * 1024;
    const chunk = Buffer.from("x\n".repeat(LINES / 2)); // 64 KiB, what a pipe hands over at once
    input.write(chunk);
    input.write(chunk);
    input.write(`${JSON.stringify({ jsonrpc: "2.0", id: "after-the-flood", method: "ping" })}\n`);
    // Either the server paused its input, or (without backpressure) it has read everything there was.
    await waitFor(() => input.isPaused() || (input.readableLength === 0 && input.writableLength === 0), 20_000);
    expect(input.isPaused()).toBe(true);
    // What the server holds for the client (the stream's writable side; its readable side stands for the
    // pipe's buffer in the kernel): the output's high-water mark and the answer that crossed it.
    expect(output.writableLength).toBeLessThan(output.writableHighWaterMark + 1024);
    expect(output.listenerCount("drain")).toBeLessThanOrEqual(1);

    const lines = readLines(output);
    await waitFor(() => lines.some((line) => line.id === "after-the-flood"), 60_000);
    expect(lines.filter((line) => line.error?.code === -32700)).toHaveLength(LINES);
    await server.close();
  }, 90_000);

  it("answer-pile-up: a session whose client leaves more than the limit of answers unread is closed, and says so", async () => {
    const LIMIT_BYTES = 64 * 1024;
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const { input, output, notes, closed } = await serverOn({
      maxQueuedOutputBytes: LIMIT_BYTES,
      onCall: async () => {
        await released;
        return "y".repeat(4096);
      },
    });
    // Read before the output is full: 200 calls in flight, whose 4 KiB answers all come at once.
    input.write(`${JSON.stringify(INITIALIZE)}\n`);
    const calls = Array.from({ length: 200 }, (_, id) => JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "slow" } }));
    input.write(`${calls.join("\n")}\n`);
    await new Promise<void>((resolve) => setImmediate(resolve));
    release();
    // Closed, or (with no limit) holding every answer.
    await waitFor(() => closed() || output.writableLength > 200 * 4096, 20_000);
    expect(closed()).toBe(true);
    expect(notes).toEqual([expect.stringMatching(/^the client has not read \d+ bytes of answers \(more than the 65536-byte limit\); closing the session$/)]);
    // What the server holds for the client: the limit, and the answer that crossed it.
    expect(output.writableLength).toBeLessThan(LIMIT_BYTES + 4096 + 1024);
  });
});

describe("the MCP server process against a client that went away", () => {
  it("closed-stdout: a client that closes the server's stdout (stdin still open) ends the session, exit 0, no crash", async () => {
    const data = makeDataDir({});
    data.anima("alice");
    const child = spawn(
      process.execPath,
      ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", data.dir, "mcp", "--anima", "alice"],
      {
        stdio: ["pipe", "pipe", "pipe"],
      },
    );
    try {
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk: Buffer) => void (stdout += chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => void (stderr += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      child.stdin.write(`${JSON.stringify(INITIALIZE)}\n`);
      await waitFor(() => stdout.includes('"id":"init"'), 30_000);
      child.stdout.destroy();
      // Its answers now meet a pipe with no reader (EPIPE).
      child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
      for (let id = 0; id < 5; id++) child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method: "ping" })}\n`);
      const code = await within(30_000, "the server's exit", exited);
      expect({ code, stderr }).toEqual({ code: 0, stderr: expect.not.stringMatching(/Unhandled|at GuardedStdioTransport/) });
    } finally {
      child.kill("SIGKILL");
      data.cleanup();
    }
  }, 60_000);
});
