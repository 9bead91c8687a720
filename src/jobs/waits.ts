/** The worker's waits on its own state and on signals, each bounded or cancellable. */

/**
 * Wakes whoever waits for the next change of a worker's state (a run ended, a claim or maintenance
 * finished). Every wait is bounded by a time and may be cut short by a signal.
 */
export class ChangeWaiters {
  private waiters: Array<() => void> = [];

  /** Resolves at the next `notify()`, after `ms`, or when `signal` aborts, whichever is first. */
  next(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        const index = this.waiters.indexOf(done);
        if (index >= 0) this.waiters.splice(index, 1);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.push(done);
      if (signal?.aborted) done();
      else signal?.addEventListener("abort", done, { once: true });
    });
  }

  notify(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }
}

/** Resolves when `signal` aborts (never without one, unless `cancel` aborts: then it stays pending). */
export function untilAborted(signal: AbortSignal | undefined, cancel?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (!signal) return; // runs until the process ends
    if (signal.aborted) return resolve();
    const done = () => resolve();
    signal.addEventListener("abort", done, { once: true });
    cancel?.addEventListener("abort", () => signal.removeEventListener("abort", done), { once: true });
  });
}
