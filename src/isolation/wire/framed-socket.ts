import type { Duplex } from "node:stream";
import { FrameDecoder, FrameError, encodeFrames } from "./frames.js";

/**
 * One end of the framed channel (frames.ts) over a stream socket: the host's end of each sandbox
 * process's channel, and the sandbox process's end of its own. Messages written in one call share one
 * write (pipelined calls cost one syscall, not many).
 *
 * Invariants:
 *  - `onMessage` gets each decoded value in order; after `onBroken` (a framing error, or more than
 *    `maxUnreadBytes` written that the peer has not read) nothing more is delivered or written.
 *  - Each 'data' event decodes at most one read's bytes: the work one peer's bytes cost per turn of the
 *    event loop is bounded by the read size and `maxFrameBytes`, and other sockets get their turn.
 */
export interface FramedSocketOptions {
  /** Largest frame accepted from the peer, bytes. */
  maxFrameBytes: number;
  /**
   * Bytes written that the peer may leave unread before the channel counts as broken (a peer that
   * stops reading would otherwise make this side buffer without end). Default: no limit.
   */
  maxUnreadBytes?: number;
  onMessage: (raw: unknown) => void;
  /** The peer broke the framing or stopped reading; called once. */
  onBroken: (reason: string) => void;
  /** The peer closed its end (or the socket failed). */
  onClose?: () => void;
}

export class FramedSocket {
  private readonly decoder: FrameDecoder;
  private broken = false;
  private closed = false;

  constructor(
    private readonly socket: Duplex,
    private readonly options: FramedSocketOptions,
  ) {
    this.decoder = new FrameDecoder(options.maxFrameBytes);
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", () => {
      // a peer gone away: 'close' follows
    });
    socket.on("close", () => {
      this.closed = true;
      this.options.onClose?.();
    });
  }

  /** True while messages can be written. */
  get open(): boolean {
    return !this.closed && !this.broken && this.socket.writable;
  }

  /** Bytes written and not yet taken by the kernel. */
  get unreadBytes(): number {
    return this.socket.writableLength;
  }

  /** Writes `messages` in one write; `written` is called once the kernel has them (false: not written). */
  send(messages: readonly unknown[], written?: (ok: boolean) => void): void {
    if (!this.open || messages.length === 0) {
      written?.(false);
      return;
    }
    this.socket.write(encodeFrames(messages), (error) => written?.(!error));
    const limit = this.options.maxUnreadBytes;
    if (limit !== undefined && this.socket.writableLength > limit) this.break(`left ${this.socket.writableLength} bytes unread, over the ${limit}-byte limit`);
  }

  /** Resolves once `message` was handed to the kernel (false when the channel is closed or broke). */
  sendAndWait(message: unknown): Promise<boolean> {
    return new Promise((resolve) => this.send([message], resolve));
  }

  /** Stops reading and writing (the process is being replaced). */
  close(): void {
    this.broken = true;
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    if (this.broken) return;
    let messages: unknown[];
    try {
      messages = this.decoder.push(chunk);
    } catch (error) {
      return this.break(error instanceof FrameError ? `sent ${error.message}` : "sent bytes that could not be read");
    }
    for (const message of messages) {
      if (this.broken) return;
      this.options.onMessage(message);
    }
  }

  private break(reason: string): void {
    if (this.broken) return;
    this.broken = true;
    this.socket.pause();
    this.options.onBroken(reason);
  }
}
