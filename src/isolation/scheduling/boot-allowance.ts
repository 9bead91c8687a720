import { THRESHOLDS } from "./judge.js";

/**
 * The host's allowance for a Python interpreter's boot: time at the start of an Anima's call (or its
 * personal tool's load) that the judge does not count as its use (placement.ts `started`, `graceMs`). A
 * boot is not the tool running long, but a tool's own code can spend the allowance instead, so it is the
 * Anima's, kept small and rare. Used by `CordonPool`, which asks only for a request that the host's own
 * record says must boot an interpreter there (pool/interpreters-sent.ts).
 *
 * Invariants:
 *  - One allowance per (process slot, Anima) per `THRESHOLDS.pythonBootAllowanceRenewedAfterMs`: a window
 *    of `THRESHOLDS.pythonBootAllowanceMs` from the first request that needed it. Requests that need one
 *    later in that window share its end; after it, none until the renewal. So N Python tools, or N
 *    requests at once, get one window between them, not N.
 *  - Kept per slot, which outlives its processes: a restart (a crash, a demotion in place) renews nothing.
 *  - Pure bookkeeping on the host's clock: nothing a sandbox process says enters it.
 */
export class BootAllowances {
  /** When each (slot, Anima)'s current allowance window began. */
  private readonly windows = new Map<string, number>();

  /** The allowance, ms from `now`, of a request of `anima` on `slot` that boots an interpreter now (0: none left). */
  grant(slot: number, anima: string, now: number): number {
    const key = `${slot}\0${anima}`;
    const began = this.windows.get(key);
    if (began === undefined || now - began >= THRESHOLDS.pythonBootAllowanceRenewedAfterMs) {
      this.forgetExpired(now);
      this.windows.set(key, now);
      return THRESHOLDS.pythonBootAllowanceMs;
    }
    return Math.max(0, began + THRESHOLDS.pythonBootAllowanceMs - now);
  }

  /** Windows that ended their renewal period are as good as absent: dropped so the record stays as small as the Animas active lately. */
  private forgetExpired(now: number): void {
    for (const [key, began] of this.windows) if (now - began >= THRESHOLDS.pythonBootAllowanceRenewedAfterMs) this.windows.delete(key);
  }
}
