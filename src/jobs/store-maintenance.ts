import { type NoticeSink, deliverNotices, sweepNotices } from "./notices.js";
import type { ResolvedSettings } from "./worker-settings.js";

/**
 * A worker's periodic care of the job store it shares with other workers (worker.ts): it recovers the jobs
 * of workers whose leases expired (the store requeues them or ends them under their retry policy), writes
 * the completion notices of the jobs so ended and of those whose notice a canceller or a dead worker left
 * unwritten for `noticeGraceMs`, and purges finished jobs older than `retentionMs`, at most once per
 * `purgeIntervalMs`.
 *
 * Invariants:
 *  - One pass at a time: a pass asked for while one runs is skipped, not queued.
 *  - A pass never throws: a failure is reported through `warn`, and the next pass tries again.
 *  - `inProgress` holds from a pass's start until just before `onPassEnd`: a worker that stops waits for
 *    it, since its caller may close the store as soon as the worker has stopped.
 */
export class StoreMaintenance {
  private running = false;
  private lastPurgeAt = 0;

  constructor(
    /** Where notices go; its store is the one maintained. */
    private readonly sink: NoticeSink,
    private readonly settings: Pick<ResolvedSettings, "noticeGraceMs" | "retentionMs" | "purgeIntervalMs">,
    private readonly events: {
      /** Jobs went back to the queue: they can be claimed now. */
      onRequeued: () => void;
      /** A pass ended, well or not (`inProgress` is false again). */
      onPassEnd: () => void;
      warn: (what: string, error: unknown) => void;
    },
  ) {}

  get inProgress(): boolean {
    return this.running;
  }

  /** Recovers dead workers' jobs, re-writes lost notices and purges old jobs (see the class). */
  async pass(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const { store } = this.sink;
    try {
      const recovered = await store.recoverExpiredLeases();
      if (recovered.requeued.length > 0) this.events.onRequeued();
      await deliverNotices(this.sink, recovered.ended);
      await sweepNotices(this.sink, this.settings.noticeGraceMs);
      const now = Date.now();
      if (Number.isFinite(this.settings.retentionMs) && now - this.lastPurgeAt >= this.settings.purgeIntervalMs) {
        this.lastPurgeAt = now;
        await store.purgeFinished(this.settings.retentionMs);
      }
    } catch (error) {
      this.events.warn("job store maintenance failed", error);
    } finally {
      this.running = false;
      this.events.onPassEnd();
    }
  }
}
