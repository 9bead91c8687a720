/**
 * How many messages of one kind the host takes from a sandbox process, on average: a token bucket that
 * refills at `perSecond` up to `burst`, one token a message. The host reads a process's channel a whole
 * read at a time (framed-socket.ts), so a bucket may run into debt within one read; the debt is what
 * the reader then waits, so that over any stretch of time the host takes at most `burst + perSecond × seconds`
 * messages, plus one read's worth.
 *
 * Invariant: the figures are the host's own (its clock, its count of what it decoded), never the
 * process's.
 */
export class MessageBudget {
  private tokens: number;
  private refilledAtMs: number;

  /**
   * @param perSecond messages a second, on average
   * @param burst messages taken at once after a quiet spell
   * @param nowMs the host's monotonic clock, ms
   */
  constructor(
    readonly perSecond: number,
    readonly burst: number,
    nowMs: number,
  ) {
    this.tokens = burst;
    this.refilledAtMs = nowMs;
  }

  /** Takes one message at `nowMs`; returns how long the reader must wait before the next one, ms (0: none). */
  take(nowMs: number): number {
    this.tokens = Math.min(this.burst, this.tokens + ((nowMs - this.refilledAtMs) * this.perSecond) / 1_000);
    this.refilledAtMs = nowMs;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens * 1_000) / this.perSecond;
  }
}
