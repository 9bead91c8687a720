import type { Socket } from "node:net";
import { ToolHostError } from "../errors.js";
import { type HostMessage, ProtocolError, chunks, encodeFrame } from "./protocol.js";

/**
 * How much reply the host queues for clients that do not read it. Without these bounds six clients that
 * never read their `audit events` replies (88 MB each) took a daemon from 446 to 980 MB.
 *
 * Invariants:
 * - a producer that awaits `drained()` between chunks (the CLI's large outputs: `audit events`) has at most
 *   `maxQueuedBytes` of its connection's reply queued, and one chunk (a frame of at most 1 Mi characters) more;
 * - while the replies queued across connections exceed `maxQueuedBytesAll`, every connection with a reply
 *   waiting to leave waits for its own to drain;
 * - a connection whose queued reply has made no progress for `stallTimeoutMs` (cut between one and two times
 *   that after the client stopped reading) is cut: its call is stopped and its slot is free.
 */
export interface OutputLimits {
  /** Reply bytes queued on one connection before its producer waits. */
  maxQueuedBytes: number;
  /** Reply bytes queued across connections before every producer with something queued waits. */
  maxQueuedBytesAll: number;
  /** A connection whose queued reply moved not a byte for this long is cut, ms. */
  stallTimeoutMs: number;
}

/**
 * 8 MiB a connection, 64 MiB in all (the 256 calls' replies are mostly small), 10 minutes without a byte
 * read. The sizes bound memory; the time only frees the slot of a client that went away without closing,
 * so it is long: an operator reading `audit events | less` may stop scrolling for a while (a full daemon
 * meanwhile refuses new calls as busy and their clients run them themselves).
 */
export const DEFAULT_OUTPUT_LIMITS: OutputLimits = {
  maxQueuedBytes: 8 * 1024 * 1024,
  maxQueuedBytesAll: 64 * 1024 * 1024,
  stallTimeoutMs: 600_000,
};

/**
 * What the host writes on one connection. Invariant: `send` never throws for a reply it cannot frame (over
 * MAX_FRAME_BYTES): thrown there, inside a socket's handlers, it was uncaught and ended the daemon. Such a
 * reply is replaced by a short `ReplyTooLarge` error and the connection's owner ends that connection only.
 */
export class ReplyWriter {
  private stallTimer: NodeJS.Timeout | undefined;
  /** Bytes that had left the queue when the stall timer was armed. */
  private flushedAtArm = 0;

  constructor(
    private readonly socket: Socket,
    private readonly limits: OutputLimits,
    /** Reply bytes queued across all connections now. */
    private readonly queuedAll: () => number,
    /** A reply could not be framed: the short error is written; the owner ends the connection and its call. */
    private readonly onUnframable: (message: HostMessage, error: ProtocolError) => void,
    /** The client read nothing of its queued reply for the stall timeout: the owner cuts the connection. */
    private readonly onStalled: () => void,
  ) {
    socket.on("close", () => clearTimeout(this.stallTimer));
  }

  send(message: HostMessage): void {
    const socket = this.socket;
    if (socket.destroyed || !socket.writable) return;
    // Frames written in one turn of the event loop (a result, then the exit code) leave in one write, so
    // the client wakes once.
    if (socket.writableCorked === 0) {
      socket.cork();
      setImmediate(() => socket.uncork());
    }
    let frame: Buffer;
    try {
      frame = encodeFrame(message);
    } catch (error) {
      if (!(error instanceof ProtocolError)) throw error;
      socket.write(encodeFrame({ type: "error", code: "ReplyTooLarge", message: "the host's reply was too large to send; the connection ends" }));
      this.onUnframable(message, error);
      return;
    }
    socket.write(frame);
    this.watchStall();
  }

  /**
   * Resolves once this connection may take more reply: at once while it is within the limits, else when
   * its queue has drained. Rejects once the connection is gone (cut, or its client left): the producer
   * stops there rather than make output nobody will read.
   */
  async drained(): Promise<void> {
    const socket = this.socket;
    while (!socket.destroyed && socket.writableNeedDrain && this.over()) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          socket.off("drain", done);
          socket.off("close", done);
          resolve();
        };
        socket.on("drain", done);
        socket.on("close", done);
      });
    }
    if (socket.destroyed) throw new ToolHostError("ExecutionError", "the client went away before it read the output");
  }

  private over(): boolean {
    return this.socket.writableLength > this.limits.maxQueuedBytes || this.queuedAll() > this.limits.maxQueuedBytesAll;
  }

  /** Bytes that have left this connection's queue (for the kernel and the client). */
  private flushed(): number {
    return this.socket.bytesWritten - this.socket.writableLength;
  }

  /** Armed while a reply is queued: cuts the connection if not a byte of it left within the stall timeout. */
  private watchStall(): void {
    if (this.stallTimer !== undefined) return;
    this.flushedAtArm = this.flushed();
    this.stallTimer = setTimeout(() => {
      this.stallTimer = undefined;
      if (this.socket.destroyed || this.socket.writableLength === 0) return;
      if (this.flushed() === this.flushedAtArm) return this.onStalled();
      this.watchStall();
    }, this.limits.stallTimeoutMs);
    this.stallTimer.unref();
  }
}

/** Output text as `stdout` or `stderr` frames of at most CHUNK_CHARS characters, ending in a newline. */
export function sendText(send: (message: HostMessage) => void, type: "stdout" | "stderr", text: string): void {
  for (const part of chunks(text.endsWith("\n") ? text : `${text}\n`)) send({ type, text: part });
}
