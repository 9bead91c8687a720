import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { PROJECT_ROOT } from "../../src/project-root.js";
import type { ToolHost } from "../../src/host-api.js";
import { type McpServerHandle, startMcpServer } from "../../src/mcp/server.js";
import { GuardedStdioTransport, mcpMessageLimitBytes } from "../../src/mcp/stdio-transport.js";

/**
 * An MCP session spoken line by line, as raw JSON-RPC text: what a hand-written or broken client sends,
 * which the SDK's Client would refuse to send. Either the real `animaworks-tool mcp` process (`spawned`)
 * or the server in this process over the same stdio transport (`inProcess`, for fast property tests).
 * Every wait is bounded.
 */
export interface Answer {
  jsonrpc?: unknown;
  id?: unknown;
  result?: unknown;
  error?: { code: number; message: string };
}

export class RawMcpSession {
  /** Every parsed line the server wrote (a batch answer stays an array). */
  readonly answers: Array<Answer | Answer[]> = [];
  /** Lines the server wrote that were not JSON (must stay empty: stdout carries the protocol only). */
  readonly junk: string[] = [];
  private pending = "";
  private waiters: Array<() => void> = [];
  private nextId = 1_000_000;

  private constructor(
    private readonly input: NodeJS.WritableStream,
    output: NodeJS.ReadableStream,
    private readonly closeSession: () => Promise<number | null>,
  ) {
    output.on("data", (chunk: Buffer | string) => {
      this.pending += chunk.toString();
      let newline: number;
      while ((newline = this.pending.indexOf("\n")) >= 0) {
        const line = this.pending.slice(0, newline);
        this.pending = this.pending.slice(newline + 1);
        try {
          this.answers.push(JSON.parse(line) as Answer | Answer[]);
        } catch {
          this.junk.push(line);
        }
        for (const wake of this.waiters.splice(0)) wake();
      }
    });
  }

  /** `animaworks-tool --data-dir DIR mcp --anima NAME` as a client starts it; stderr is collected. */
  static spawned(dataDir: string, anima: string): RawMcpSession & { stderr(): string } {
    const child: ChildProcessWithoutNullStreams = spawn(
      process.execPath,
      ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", dataDir, "mcp", "--anima", anima],
      {
        stdio: ["pipe", "pipe", "pipe"],
      },
    );
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => void (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const session = new RawMcpSession(child.stdin, child.stdout, async () => {
      child.stdin.end();
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    });
    return Object.assign(session, { stderr: () => stderr });
  }

  /** The MCP server of `host` for `anima` in this process, over the stdio transport on in-memory streams. */
  static async inProcess(host: ToolHost, anima: string): Promise<RawMcpSession> {
    const input = new PassThrough();
    const output = new PassThrough();
    const transport = new GuardedStdioTransport({ maxMessageBytes: mcpMessageLimitBytes(host.config.fsLimits) }, input, output);
    let handle: McpServerHandle | undefined;
    const session = new RawMcpSession(input, output, async () => {
      await handle?.close();
      return 0;
    });
    handle = await startMcpServer(host, anima, transport, { watch: false, startWorkers: false });
    return session;
  }

  /** Writes one line (a value is JSON-encoded; a string is sent as it is). */
  send(message: unknown): void {
    this.input.write(`${typeof message === "string" ? message : JSON.stringify(message)}\n`);
  }

  /** Sends a request with a fresh id; resolves with its answer. */
  async request(method: string, params?: unknown, timeoutMs = 20_000): Promise<Answer> {
    const id = this.nextId++;
    this.send({ jsonrpc: "2.0", id, method, ...(params !== undefined ? { params } : {}) });
    return this.answerTo(id, timeoutMs);
  }

  initialize(): Promise<Answer> {
    return this.request("initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } });
  }

  /** The answer with `id` (also inside a batch answer), waiting up to `timeoutMs`. */
  async answerTo(id: unknown, timeoutMs = 20_000): Promise<Answer> {
    const found = (): Answer | undefined => this.answers.flat().find((answer) => answer.id === id);
    await this.until(() => found() !== undefined, timeoutMs, `an answer to id ${JSON.stringify(id)}`);
    return found()!;
  }

  /** All answers with `id`. */
  answersTo(id: unknown): Answer[] {
    return this.answers.flat().filter((answer) => answer.id === id);
  }

  async until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${what} within ${timeoutMs} ms; answers so far: ${JSON.stringify(this.answers).slice(-2_000)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Ends the session (stdin closes); the process's exit code, or 0 in-process. */
  close(): Promise<number | null> {
    return this.closeSession();
  }
}
