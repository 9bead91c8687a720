import { FrameDecoder, MAX_FRAME_BYTES, ProtocolError } from "./protocol.js";

/**
 * What the endpoint's connections may hold at once. Each connection may announce a frame of up to
 * `MAX_FRAME_BYTES` (16 MiB) and send all but its last byte: without these bounds, forty connections of the
 * same user held 650 MB in a daemon for as long as they stayed open.
 *
 * Invariants:
 * - at most `maxConnections` connections are open; one more is refused at once (`busy`: the client runs its
 *   call itself);
 * - the bytes of unfinished frames held across all connections stay within `maxPendingFrameBytes` (and one
 *   read chunk): the connection whose bytes cross it is cut;
 * - a frame, once begun, arrives whole within `frameTimeoutMs`, at any point of a connection (the first
 *   message's own timer covers only a connection that says nothing).
 */
export interface ConnectionLimits {
  /** Connections open at once. */
  maxConnections: number;
  /** Bytes of unfinished frames held across all connections. */
  maxPendingFrameBytes: number;
  /** How long a begun frame may take to arrive whole, ms. */
  frameTimeoutMs: number;
}

/** Room for the 256 calls served at once (`maxActiveCalls`) and as many status requests; four largest frames; 10 s. */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  maxConnections: 512,
  maxPendingFrameBytes: 4 * MAX_FRAME_BYTES,
  frameTimeoutMs: 10_000,
};

/** A connection's frames would take the host past its budget of unfinished frames: the connection is cut. */
export class FrameBudgetError extends ProtocolError {}

/** The counts shared by an endpoint's connections. */
export class ConnectionBudget {
  private open = 0;
  private pendingBytes = 0;

  constructor(readonly limits: ConnectionLimits) {}

  /** Takes a connection slot; false when all are taken (nothing is taken then). */
  admit(): boolean {
    if (this.open >= this.limits.maxConnections) return false;
    this.open++;
    return true;
  }

  /** Gives back a slot `admit` took. */
  leave(): void {
    this.open--;
  }

  /** Bytes of unfinished frames held now across connections. */
  get pendingFrameBytes(): number {
    return this.pendingBytes;
  }

  /** A connection's held bytes went from `before` to `after`; false when the total is now over the limit. */
  hold(before: number, after: number): boolean {
    this.pendingBytes += after - before;
    return after <= before || this.pendingBytes <= this.limits.maxPendingFrameBytes;
  }
}

/**
 * One connection's frames, read within the budget: a `FrameDecoder` whose unfinished bytes count against
 * the shared budget and whose begun frame is timed. After `stop()` nothing more is read or held (a
 * connection whose reply is complete has nothing more to say).
 */
export class BudgetedFrameReader {
  private decoder: FrameDecoder | undefined = new FrameDecoder();
  private frameTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly budget: ConnectionBudget,
    /** Called once a begun frame has not arrived whole within the limit. */
    private readonly onFrameTimeout: (timeoutMs: number) => void,
  ) {}

  /** The values of the frames `chunk` completes. Throws ProtocolError (FrameBudgetError over the budget). */
  push(chunk: Buffer): unknown[] {
    const decoder = this.decoder;
    if (!decoder) return [];
    const before = decoder.pendingBytes;
    let values: unknown[];
    try {
      values = decoder.push(chunk);
    } catch (error) {
      this.stop();
      throw error;
    }
    if (!this.budget.hold(before, decoder.pendingBytes)) {
      const held = this.budget.pendingFrameBytes;
      this.stop();
      throw new FrameBudgetError(
        `the host holds ${held} bytes of unfinished frames, more than its ${this.budget.limits.maxPendingFrameBytes}-byte limit across connections`,
      );
    }
    if (decoder.pendingBytes === 0) this.clearTimer();
    else if (this.frameTimer === undefined || values.length > 0) this.startTimer();
    return values;
  }

  /** Gives back what this connection held; later chunks are dropped unread. Idempotent. */
  stop(): void {
    this.clearTimer();
    if (this.decoder) this.budget.hold(this.decoder.pendingBytes, 0);
    this.decoder = undefined;
  }

  /** A new frame began: it has the whole timeout from now. */
  private startTimer(): void {
    this.clearTimer();
    const timeoutMs = this.budget.limits.frameTimeoutMs;
    this.frameTimer = setTimeout(() => {
      this.frameTimer = undefined;
      this.onFrameTimeout(timeoutMs);
    }, timeoutMs);
    this.frameTimer.unref();
  }

  private clearTimer(): void {
    clearTimeout(this.frameTimer);
    this.frameTimer = undefined;
  }
}
