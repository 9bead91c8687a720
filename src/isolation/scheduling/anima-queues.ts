import { type ErrorInfo, ToolHostError } from "../../errors.js";
import type { CallOutcome, CallRequest, DescribeOutcome, DescribeRequest, Executor } from "../wire/messages.js";

/**
 * Per-Anima call limits, in front of the executor: each Anima runs at most
 * `maxConcurrentPerAnima` calls at once while another Anima has calls in flight or waiting; its further
 * calls wait in its own queue, and a call that finds that queue full fails at once with `Busy`.
 *
 * Invariants:
 *  - Counts are the host's own (calls it handed to the executor and that have not ended): nothing a
 *    sandbox says changes them.
 *  - Work-conserving: an Anima alone on the host is not held back (pipelined calls keep their speed).
 *  - Waiting calls are admitted round-robin over the Animas that have some, one at a time, so that one
 *    Anima's long queue does not delay another's turn.
 *  - A call's timeout starts when it is admitted; a caller that gives up (its signal) while the call
 *    waits removes it from the queue, and it ends without having run.
 *  - A call whose signal aborted ends with the signal's reason when that is a `ToolHostError` (a job's
 *    run signal says `Timeout` at the job's deadline, or names the cancel), else as `ExecutionError`:
 *    the one signal carries both the stop and why.
 *  - Background jobs pass through the same gate (their own per-Anima limit is lower).
 */
export interface AnimaQueueLimits {
  /** Calls of one Anima running at once while others have work. Default: 8. */
  maxConcurrentPerAnima: number;
  /** Calls of one Anima waiting for a turn; one more fails at once with `Busy`. Default: 1,000. */
  maxQueuedPerAnima: number;
}

interface Waiting {
  admit: () => void;
}

interface AnimaShare {
  running: number;
  queue: Waiting[];
}

export class AnimaQueues implements Executor {
  private readonly animas = new Map<string, AnimaShare>();
  private running = 0;
  private queued = 0;

  constructor(
    private readonly inner: Executor,
    private readonly limits: AnimaQueueLimits,
  ) {}

  describe(request: DescribeRequest): Promise<DescribeOutcome> {
    return this.inner.describe(request);
  }

  async call(request: CallRequest, signal?: AbortSignal): Promise<CallOutcome> {
    const anima = request.context.anima;
    let share = this.animas.get(anima);
    if (!share) this.animas.set(anima, (share = { running: 0, queue: [] }));
    if (this.mayRun(share)) {
      share.running++;
      this.running++;
    } else {
      if (share.queue.length >= this.limits.maxQueuedPerAnima) return refused(busy(anima, share, this.limits));
      // Admitted by `pump`, which counts the call as running when it admits it.
      const admitted = await this.wait(share, signal);
      if (!admitted) {
        this.forgetIfIdle(anima, share);
        return refused(stoppedBy(signal, { type: "ExecutionError", fault: "caller", message: "the call was stopped by its caller before it started" }));
      }
    }
    try {
      const outcome = await this.inner.call(request, signal);
      return outcome.ok || !signal?.aborted ? outcome : { ...outcome, error: stoppedBy(signal, outcome.error) };
    } finally {
      share.running--;
      this.running--;
      this.pump();
      this.forgetIfIdle(anima, share);
    }
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  stuckEntries(): number {
    return this.inner.stuckEntries();
  }

  /** Calls running and waiting for `anima` (for tests and operators). */
  countsOf(anima: string): { running: number; queued: number } {
    const share = this.animas.get(anima);
    return { running: share?.running ?? 0, queued: share?.queue.length ?? 0 };
  }

  /** Under its limit, or nobody else has calls running or waiting. */
  private mayRun(share: AnimaShare): boolean {
    if (share.running < this.limits.maxConcurrentPerAnima) return true;
    const othersRunning = this.running - share.running;
    const othersQueued = this.queued - share.queue.length;
    return othersRunning === 0 && othersQueued === 0;
  }

  private wait(share: AnimaShare, signal: AbortSignal | undefined): Promise<boolean> {
    if (signal?.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const waiting: Waiting = {
        admit: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve(true);
        },
      };
      const onAbort = () => {
        const index = share.queue.indexOf(waiting);
        if (index < 0) return;
        share.queue.splice(index, 1);
        this.queued--;
        resolve(false);
        this.pump(); // others may now run beyond their limit
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      share.queue.push(waiting);
      this.queued++;
    });
  }

  /** Admits waiting calls round-robin over the Animas that have some, while each may run. */
  private pump(): void {
    let admittedOne = true;
    while (admittedOne && this.queued > 0) {
      admittedOne = false;
      for (const [anima, share] of this.animas) {
        if (share.queue.length === 0 || !this.mayRun(share)) continue;
        const next = share.queue.shift() as Waiting;
        this.queued--;
        // Counted as running now, before it resumes, so that the next turn of this loop sees it.
        share.running++;
        this.running++;
        next.admit();
        admittedOne = true;
        // Round-robin: the Anima just served goes to the back of the turn order.
        this.animas.delete(anima);
        this.animas.set(anima, share);
        break;
      }
    }
  }

  private forgetIfIdle(anima: string, share: AnimaShare): void {
    if (share.running === 0 && share.queue.length === 0) this.animas.delete(anima);
  }
}

function busy(anima: string, share: AnimaShare, limits: AnimaQueueLimits): ErrorInfo {
  return {
    type: "Busy",
    fault: "host",
    message: `Anima "${anima}" already has ${share.running} call${share.running === 1 ? "" : "s"} running and ${share.queue.length} waiting, the most the host queues for one Anima`,
    hint: `retry when some have finished (limits: maxConcurrentCallsPerAnima ${limits.maxConcurrentPerAnima}, maxQueuedCallsPerAnima ${limits.maxQueuedPerAnima})`,
  };
}

/** Why a call whose signal aborted ended: the signal's reason when it is one of the host's errors. */
function stoppedBy(signal: AbortSignal | undefined, otherwise: ErrorInfo): ErrorInfo {
  const reason: unknown = signal?.reason;
  return reason instanceof ToolHostError ? reason.toInfo() : otherwise;
}

function refused(error: ErrorInfo): CallOutcome {
  return { ok: false, error, durationMs: 0 };
}
