import process from "node:process";
import type { Readable, Writable } from "node:stream";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { DEFAULT_MAX_MEMORY_FILE_BYTES } from "../lifecycle/write-memory.js";
import { type GateVerdict, JsonRpcGate } from "./jsonrpc-gate.js";
import { BoundedLineReader } from "./line-reader.js";

/**
 * MCP over stdio (newline-delimited JSON-RPC) for `animaworks-tool mcp`, in place of the SDK's
 * `StdioServerTransport`, which closed the session on a message over 10 MiB and dropped, unanswered,
 * whatever its schemas refused. Here every line goes through the `JsonRpcGate` (jsonrpc-gate.ts): the SDK's
 * server gets only valid messages, and the client gets an error answer for everything else, so no
 * request waits forever. A line over `maxMessageBytes` is answered and skipped; the session goes on.
 */
export interface GuardedStdioOptions {
  /** Longest line read, bytes (see `mcpMessageLimitBytes`). */
  maxMessageBytes: number;
  /** Notes for the server's log (stderr): messages dropped without an answer. Default: none. */
  log?: (note: string) => void;
}

/**
 * The longest message the server reads: room for the largest content the host writes in one go
 * (`write_memory_file`'s 10 MiB, or the operator's `max_write_bytes` for a tool's write, whichever is
 * larger) in its longest JSON form (a control character escapes to six bytes, `\u001f`), and 1 MiB for
 * the rest of the message. 61 MiB with the defaults.
 */
export function mcpMessageLimitBytes(fsLimits: { maxWriteBytes: number }): number {
  return 6 * Math.max(fsLimits.maxWriteBytes, DEFAULT_MAX_MEMORY_FILE_BYTES) + 1024 * 1024;
}

export class GuardedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private readonly lines: BoundedLineReader;
  private readonly gate = new JsonRpcGate();
  private started = false;

  constructor(
    private readonly options: GuardedStdioOptions,
    private readonly input: Readable = process.stdin,
    private readonly output: Writable = process.stdout,
  ) {
    this.lines = new BoundedLineReader(options.maxMessageBytes);
  }

  async start(): Promise<void> {
    if (this.started) throw new Error("GuardedStdioTransport already started");
    this.started = true;
    this.input.on("data", this.onData);
    this.input.on("error", this.onInputError);
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve) => {
      if (this.output.write(`${JSON.stringify(message)}\n`)) resolve();
      else this.output.once("drain", resolve);
    });
  }

  async close(): Promise<void> {
    this.input.off("data", this.onData);
    this.input.off("error", this.onInputError);
    if (this.input.listenerCount("data") === 0) this.input.pause();
    this.onclose?.();
  }

  private readonly onData = (chunk: Buffer | string): void => {
    for (const line of this.lines.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk)) {
      this.act(this.gate.check(line, this.options.maxMessageBytes));
    }
  };

  private readonly onInputError = (error: Error): void => {
    this.onerror?.(error);
  };

  private act(verdict: GateVerdict): void {
    switch (verdict.kind) {
      case "pass":
        // The SDK's handlers answer; one that throws must not stop the lines after it.
        try {
          this.onmessage?.(verdict.message);
        } catch (error) {
          this.onerror?.(error instanceof Error ? error : new Error(String(error)));
        }
        return;
      case "answer":
        void this.send(verdict.reply as unknown as JSONRPCMessage);
        return;
      case "drop":
        this.options.log?.(verdict.note);
        return;
      case "ignore":
        return;
    }
  }
}
