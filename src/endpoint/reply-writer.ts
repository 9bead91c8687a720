import type { Socket } from "node:net";
import { type HostMessage, ProtocolError, encodeFrame } from "./protocol.js";

/**
 * What the host writes on one connection. Invariant: `send` never throws for a reply it cannot frame (over
 * MAX_FRAME_BYTES): thrown there, inside a socket's handlers, it was uncaught and ended the daemon. Such a
 * reply is replaced by a short `ReplyTooLarge` error and the connection's owner ends that connection only.
 */
export class ReplyWriter {
  constructor(
    private readonly socket: Socket,
    /** A reply could not be framed: the short error is written; the owner ends the connection and its call. */
    private readonly onUnframable: (message: HostMessage, error: ProtocolError) => void,
  ) {}

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
  }
}
