import type { WarmPoolStats } from "../wire/messages.js";

/** A process that has not answered a `stats` request by then is reported without figures, ms. */
const STATS_TIMEOUT_MS = 1_000;

/**
 * A sandbox process slot's requests for its child's warm pool figures (child-handle.ts): each is
 * settled by the child's answer, or without figures when none comes in time.
 */
export class WarmPoolStatsRequests {
  private nextStatsId = 1;
  private readonly waiters = new Map<number, (stats: WarmPoolStats | undefined) => void>();

  /** Sends a request with a new id through `send`; the figures it is answered with, or undefined when late. */
  request(send: (statsId: number) => void): Promise<WarmPoolStats | undefined> {
    const statsId = this.nextStatsId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.waiters.get(statsId)?.(undefined), STATS_TIMEOUT_MS);
      this.waiters.set(statsId, (stats) => {
        clearTimeout(timer);
        this.waiters.delete(statsId);
        resolve(stats);
      });
      send(statsId);
    });
  }

  /** The child's answer to request `statsId` (one no longer awaited is ignored). */
  answer(statsId: number, stats: WarmPoolStats): void {
    this.waiters.get(statsId)?.(stats);
  }
}
