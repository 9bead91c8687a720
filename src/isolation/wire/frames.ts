/**
 * The bytes of the channel between the host and a sandbox process (the child's fd 3, a Unix stream
 * socket), both ways: each message is one frame, `[u32 big-endian length][length bytes of UTF-8 JSON]`.
 *
 * It replaces Node's IPC channel, which was not made for a hostile peer: its reader parses
 * newline-delimited JSON inside Node, where one malformed line is an uncaught exception that ends the
 * host, and a line without end is buffered whole (451 MiB grew the host to ~610 MB and ended it with
 * `RangeError: Invalid string length`). Here the host decodes the bytes itself.
 *
 * Invariants of `FrameDecoder`:
 *  - A frame's length is read before any byte of its body is kept; a length over `maxFrameBytes` is
 *    refused at once. At most `maxFrameBytes` + one read's bytes are ever held for one sender.
 *  - Each frame costs one `JSON.parse` of at most `maxFrameBytes`: the work a message can cost the
 *    receiver is bounded by the cap.
 *  - After its first `FrameError` a decoder is spent: it refuses everything after (a stream whose
 *    framing broke cannot be trusted to find its next frame).
 */

export const FRAME_HEADER_BYTES = 4;

/** The sandbox process's fd of the channel (0–2 stdio; 4 bwrap's seccomp program, 5 the bulk pipe). */
export const CHANNEL_FD = 3;

/**
 * Largest frame the host reads from a sandbox process, bytes. Larger strings (a tool's result, the
 * arguments of a large write) cross in `part` messages of `PART_CHARS` characters each (messages.ts),
 * so a frame never needs more: a part's JSON is at most 6 bytes per character (`\u0001`).
 */
export const MAX_FRAME_FROM_SANDBOX_BYTES = 1024 * 1024;

/** Characters per `part` message; its frame stays below `MAX_FRAME_FROM_SANDBOX_BYTES` whatever it holds. */
export const PART_CHARS = 128 * 1024;

/**
 * Largest frame a sandbox process reads from the host, bytes. The host is trusted; the cap only stops
 * a corrupted stream from making the process buffer without end (a bundle of many MB fits).
 */
export const MAX_FRAME_FROM_HOST_BYTES = 512 * 1024 * 1024;

/** The byte stream broke the framing: the sender is replaced (the host) or ignored (the sandbox process). */
export class FrameError extends Error {
  override readonly name = "FrameError";
}

/** One frame holding `message`'s JSON. */
export function encodeFrame(message: unknown): Buffer {
  return encodeFrames([message]);
}

/** The frames of `messages`, in order, in one buffer (one allocation, one write). */
export function encodeFrames(messages: readonly unknown[]): Buffer {
  const texts = messages.map((message) => JSON.stringify(message));
  const sizes = texts.map((text) => Buffer.byteLength(text));
  const frames = Buffer.allocUnsafe(sizes.reduce((sum, size) => sum + FRAME_HEADER_BYTES + size, 0));
  let offset = 0;
  texts.forEach((text, index) => {
    offset = frames.writeUInt32BE(sizes[index] as number, offset);
    offset += frames.write(text, offset, "utf8");
  });
  return frames;
}

export class FrameDecoder {
  private readonly pieces: Buffer[] = [];
  private heldBytes = 0;
  /** Body length of the frame being read, or -1 while its header is awaited. */
  private bodyBytes = -1;
  private failure: FrameError | undefined;

  constructor(readonly maxFrameBytes: number) {}

  /** Bytes held for the frame being read. */
  get held(): number {
    return this.heldBytes;
  }

  /** The messages completed by `chunk`, in order. Throws `FrameError` when the bytes break the framing. */
  push(chunk: Buffer): unknown[] {
    if (this.failure) throw this.failure;
    this.pieces.push(chunk);
    this.heldBytes += chunk.length;
    const messages: unknown[] = [];
    for (;;) {
      if (this.bodyBytes < 0) {
        if (this.heldBytes < FRAME_HEADER_BYTES) break;
        const length = this.take(FRAME_HEADER_BYTES).readUInt32BE(0);
        if (length > this.maxFrameBytes) throw this.fail(`a frame of ${length} bytes, over the ${this.maxFrameBytes}-byte limit`);
        if (length === 0) throw this.fail("an empty frame");
        this.bodyBytes = length;
      }
      if (this.heldBytes < this.bodyBytes) break;
      const body = this.take(this.bodyBytes);
      this.bodyBytes = -1;
      try {
        messages.push(JSON.parse(body.toString("utf8")));
      } catch {
        throw this.fail(`a frame of ${body.length} bytes that is not JSON`);
      }
    }
    return messages;
  }

  private fail(what: string): FrameError {
    this.failure = new FrameError(what);
    this.pieces.length = 0;
    this.heldBytes = 0;
    return this.failure;
  }

  /** The next `bytes` bytes, removed (a view where one piece holds them, else one copy). */
  private take(bytes: number): Buffer {
    this.heldBytes -= bytes;
    const first = this.pieces[0] as Buffer;
    if (first.length >= bytes) {
      if (first.length === bytes) this.pieces.shift();
      else this.pieces[0] = first.subarray(bytes);
      return first.subarray(0, bytes);
    }
    const out = Buffer.allocUnsafe(bytes);
    let offset = 0;
    while (offset < bytes) {
      const piece = this.pieces[0] as Buffer;
      const used = Math.min(piece.length, bytes - offset);
      piece.copy(out, offset, 0, used);
      offset += used;
      if (used === piece.length) this.pieces.shift();
      else this.pieces[0] = piece.subarray(used);
    }
    return out;
  }
}
