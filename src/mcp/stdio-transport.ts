import process from "node:process";
import type { Readable, Writable } from "node:stream";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { DEFAULT_MAX_MEMORY_FILE_BYTES } from "../lifecycle/write-memory.js";
import { type GateVerdict, JsonRpcGate } from "./jsonrpc-gate.js";
import { BoundedLineReader, type ReadLine } from "./line-reader.js";

/**
 * MCP over stdio (newline-delimited JSON-RPC) for `animaworks-tool mcp`, in place of the SDK's
 * `StdioServerTransport`, which closed the session on a message over 10 MiB and dropped, unanswered,
 * whatever its schemas refused. Here every line goes through the `JsonRpcGate` (jsonrpc-gate.ts): the SDK's
 * server gets only valid messages, and the client gets an error answer for everything else, so no
 * request waits forever. A line over `maxMessageBytes` is answered and skipped; the session goes on.
 *
 * Backpressure: a client that does not read its answers must not fill the server's memory (each 2-byte
 * line `x` gets a ~150-byte answer). While the output holds more than its high-water mark unread, the
 * server reads no further line (input paused, the rest of the chunk kept); it reads on at the output's
 * `drain`. Answers to requests already read are still written, so the output can grow past the mark by
 * what those requests answer; beyond `maxQueuedOutputBytes` waiting before an answer, the client is taken
 * to be gone and the session is closed (said on the log, stderr). A write error (the client closed its end:
 * EPIPE) closes the session too, instead of being thrown.
 */
export interface GuardedStdioOptions {
  /** Longest line read, bytes (see `mcpMessageLimitBytes`). */
  maxMessageBytes: number;
  /** Notes for the server's log (stderr): messages dropped without an answer. Default: none. */
  log?: (note: string) => void;
  /** Output bytes the client has not read, waiting before an answer, beyond which the session is closed. Default `MAX_QUEUED_OUTPUT_BYTES`. */
  maxQueuedOutputBytes?: number;
}

/**
 * 64 MiB: room for a few of the largest answers (a `read_memory_file` of 10 MiB, JSON-escaped) on their
 * way to a client that reads slowly; far below what a client that never reads made a server hold (GiBs).
 */
export const MAX_QUEUED_OUTPUT_BYTES = 64 * 1024 * 1024;

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
  private readonly maxQueuedOutputBytes: number;
  /** Lines read but not yet acted on, because the output was full (at most one input chunk's lines). */
  private waiting: ReadLine[] = [];
  /** Sends waiting for the output's `drain` (one shared listener, however many there are). */
  private drainWaiters: Array<() => void> = [];
  private started = false;
  private closed = false;

  constructor(
    private readonly options: GuardedStdioOptions,
    private readonly input: Readable = process.stdin,
    private readonly output: Writable = process.stdout,
  ) {
    this.lines = new BoundedLineReader(options.maxMessageBytes);
    this.maxQueuedOutputBytes = options.maxQueuedOutputBytes ?? MAX_QUEUED_OUTPUT_BYTES;
  }

  async start(): Promise<void> {
    if (this.started) throw new Error("GuardedStdioTransport already started");
    this.started = true;
    this.input.on("data", this.onData);
    this.input.on("error", this.onInputError);
    this.output.on("drain", this.onDrain);
    this.output.on("error", this.onOutputError);
  }

  /** Settles once the message is handed to the output (at its `drain` when it is full); a closed session drops it. */
  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return Promise.resolve();
    const queuedBytes = this.output.writableLength;
    if (queuedBytes > this.maxQueuedOutputBytes) {
      this.options.log?.(
        `the client has not read ${queuedBytes} bytes of answers (more than the ${this.maxQueuedOutputBytes}-byte limit); closing the session`,
      );
      this.shutDown();
      return Promise.resolve();
    }
    if (this.output.write(`${JSON.stringify(message)}\n`)) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  async close(): Promise<void> {
    this.shutDown();
  }

  /** Stops reading, settles every waiting send and tells the session once. The output stays open (what is queued may still be read). */
  private shutDown(): void {
    if (this.closed) return;
    this.closed = true;
    this.waiting = [];
    this.input.off("data", this.onData);
    this.input.off("error", this.onInputError);
    this.output.off("drain", this.onDrain);
    if (this.input.listenerCount("data") === 0) this.input.pause();
    for (const resolve of this.drainWaiters.splice(0)) resolve();
    this.onclose?.();
  }

  /** True while the output holds more than its high-water mark unread: no further line is read. */
  private get outputFull(): boolean {
    return this.output.writableNeedDrain;
  }

  private readonly onData = (chunk: Buffer | string): void => {
    this.waiting.push(...this.lines.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk));
    this.actOnWaiting();
  };

  /** Acts on the lines read, in order, until the output is full; then pauses the input until `drain`. */
  private actOnWaiting(): void {
    let next = 0;
    while (next < this.waiting.length && !this.closed && !this.outputFull) {
      this.act(this.gate.check(this.waiting[next++] as ReadLine, this.options.maxMessageBytes));
    }
    this.waiting = this.waiting.slice(next);
    if (this.closed) return;
    if (this.waiting.length > 0 || this.outputFull) this.input.pause();
    else if (this.input.isPaused()) this.input.resume();
  }

  private readonly onDrain = (): void => {
    for (const resolve of this.drainWaiters.splice(0)) resolve();
    this.actOnWaiting();
  };

  private readonly onInputError = (error: Error): void => {
    this.onerror?.(error);
  };

  /** The client closed its end of the output (EPIPE) or it failed otherwise: nobody hears answers any more. */
  private readonly onOutputError = (error: Error): void => {
    this.options.log?.(`the output failed (${(error as NodeJS.ErrnoException).code ?? error.message}); closing the session`);
    this.shutDown();
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
        // An answer that cannot be made into a line fails alone, as a handler's throw does.
        try {
          void this.send(verdict.reply as unknown as JSONRPCMessage);
        } catch (error) {
          this.onerror?.(error instanceof Error ? error : new Error(String(error)));
        }
        return;
      case "drop":
        this.options.log?.(verdict.note);
        return;
      case "ignore":
        return;
    }
  }
}
