import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { setTimeout as delay } from "node:timers/promises";
import PQueue from "p-queue";
import type { LogRecord } from "../host-options.js";
import { errorInfoOf } from "../errors.js";
import { JOB_DEFAULTS, duration } from "./defaults.js";
import { type NoticeSink, deliverNotices, sweepNotices } from "./notices.js";
import { NoticeFailures } from "./notice-failures.js";
import { StoreChangeFeed } from "./change-feed.js";
import { StoreMaintenance } from "./store-maintenance.js";
import { ChangeWaiters, untilAborted } from "./waits.js";
import { JobRun, checkedRunResult, completeRun, outcomeOf, saveProgress } from "./run-state.js";
import { type Job, type JobStore, leaseOf } from "./store.js";
import {
  type JobRunContext,
  type JobRunResult,
  type JobRunner,
  type JobWorkerOptions,
  type ResolvedSettings,
  type WorkerRunOptions,
  type WorkerStats,
  resolveWorkerSettings,
} from "./worker-settings.js";

export type { JobRunContext, JobRunResult, JobRunner, JobWorkerOptions, JobWorkerSettings, WorkerRunOptions, WorkerStats } from "./worker-settings.js";
export { resolveWorkerSettings } from "./worker-settings.js";

/**
 * The one job worker: claims jobs from a `JobStore`, runs them, records their outcomes. `JobService.runWorker`
 * drives it with the host's runner (host-runner.ts); tests and benchmarks drive it with runners of their own.
 *
 * Which job runs next is decided by the store's `claim` (Animas in turn, each Anima's jobs by priority,
 * per-Anima limits counted across all workers); this class keeps the global limit with p-queue, claims
 * only as many jobs as it has free slots (so a job never waits in a local queue while another Anima's
 * arrives), renews leases (and so sees cancels made anywhere), times each run (`JobRun`: the deadline and
 * the grace after a stop, one timer per run, carried to the runner as one AbortSignal) and writes
 * completion notices. Beside it: the store's change feed (change-feed.ts) wakes it sooner than its polls,
 * and maintenance (store-maintenance.ts) recovers jobs whose worker died and purges old ones.
 *
 * A runner that does not end after its signal aborted is abandoned `cancelGraceMs` later: the job is
 * recorded from the stop's reason and its slot freed; the runner's eventual result is ignored.
 */
export class JobWorker {
  readonly workerId: string;
  readonly stats: WorkerStats = { started: 0, succeeded: 0, failed: 0, cancelled: 0, released: 0 };
  private readonly o: ResolvedSettings;
  private readonly store: JobStore;
  private readonly runJob: JobRunner;
  private readonly sink: NoticeSink;
  private readonly queue: PQueue;
  private readonly active = new Map<string, JobRun>();
  private readonly timers: NodeJS.Timeout[] = [];
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private readonly feed: StoreChangeFeed;
  private readonly maintenance: StoreMaintenance;
  private started = false;
  private stopping = false;
  /** The stop in progress (`stop`). */
  private stopped: Promise<void> | undefined;
  /** Running jobs are being stopped and handed back (`stop({ abortRunning })`). */
  private handingBack = false;
  private pumping = false;
  private pumpAgain = false;
  private pumpScheduled = false;
  /** Runs whose work is over but whose outcome is still being written. */
  private recording = 0;
  private readonly changes = new ChangeWaiters();

  constructor(options: JobWorkerOptions) {
    this.o = resolveWorkerSettings(options);
    this.store = options.store;
    this.runJob = options.runJob;
    this.sink = {
      store: this.store,
      animaDirOf: options.animaDirOf,
      enabled: this.o.notices,
      warn: (message, job) => this.log("warn", message, job),
      failures: options.noticeFailures ?? new NoticeFailures(),
    };
    const warn = (what: string, error: unknown): void => this.log("warn", `${what}: ${describe(error)}`);
    this.feed = new StoreChangeFeed(this.store, {
      onRunnable: () => this.schedulePump(),
      // Acted on through the store: a heartbeat now renews the leases and finds the cancel there.
      onCancel: (id) => {
        if ([...this.active.values()].some((run) => run.job.id === id)) void this.heartbeat();
      },
      wanted: () => this.started && !this.stopping,
      warn,
    });
    this.maintenance = new StoreMaintenance(this.sink, this.o, {
      onRequeued: () => this.schedulePump(),
      onPassEnd: () => this.changes.notify(),
      warn,
    });
    this.workerId = options.workerId ?? `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
    this.queue = new PQueue({ concurrency: this.o.concurrency });
  }

  private get busy(): boolean {
    return this.active.size > 0 || this.recording > 0 || this.pumping;
  }

  /** Jobs running here now. */
  get running(): number {
    return this.active.size;
  }

  /**
   * Runs jobs until `signal` (or, with `untilDrained`, until the store has nothing queued or running), then
   * stops gracefully within `drainTimeoutMs` (at once on `abortRunning`). A drained worker writes any notice
   * still missing before it returns. Returns what this worker did.
   */
  async run(options: WorkerRunOptions = {}): Promise<WorkerStats> {
    this.start();
    try {
      if (options.untilDrained) await this.untilDrained(options);
      else await untilAborted(options.signal);
    } finally {
      await this.stopWithin(options);
    }
    // Notices a canceller or a dead worker failed to write are delivered before a drained worker leaves;
    // so are postponed ones (a notice that failed as its job ended is due again only 1 s later, up to
    // 10 min): once the queue is empty no worker is left to retry them, until the next submit starts one.
    // Tried once now rather than waited for: the worker `submit` starts would otherwise stay for up to the
    // backoff's 10 min; one still failing is postponed again, for the next worker.
    if (options.untilDrained && !options.signal?.aborted) await sweepNotices(this.sink, 0, { includePostponed: true });
    return { ...this.stats };
  }

  /** Starts claiming and running jobs until `stop()`. Idempotent. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.stopping = false;
    this.handingBack = false;
    this.timers.push(setInterval(() => this.schedulePump(), this.o.pollIntervalMs));
    this.timers.push(setInterval(() => void this.maintenance.pass(), this.o.maintenanceIntervalMs));
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.o.heartbeatIntervalMs);
    void this.maintenance.pass();
    this.schedulePump();
    this.feed.open();
  }

  /**
   * Stops claiming. Waits for running jobs to finish (each is bounded by its deadline plus `cancelGraceMs`).
   * With `abortRunning`, stops them (with the grace) and hands their leases back at once,
   * so the store retries or marks them `interrupted` under their retry policy; a run that still finishes
   * within the grace counts.
   */
  stop(options: { abortRunning?: boolean } = {}): Promise<void> {
    if (!this.started) return Promise.resolve();
    if (options.abortRunning) {
      this.handingBack = true;
      for (const run of this.active.values()) run.requestStop("shutdown");
    }
    this.stopped ??= this.shutdown().finally(() => (this.stopped = undefined));
    return this.stopped;
  }

  private async shutdown(): Promise<void> {
    this.stopping = true;
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    // Maintenance in flight is waited for too: the caller may close the store as soon as this returns.
    while (this.busy || this.maintenance.inProgress) await this.changes.next(this.o.pollIntervalMs);
    clearInterval(this.heartbeatTimer);
    await this.queue.onIdle();
    // Leases handed back are recovered now rather than by whoever next runs maintenance.
    if (this.handingBack) await this.maintenance.pass();
    await this.feed.close();
    this.started = false;
  }

  /** A graceful stop bounded by `drainTimeoutMs`, or a stop that hands running jobs back once `abortRunning` fires. */
  private async stopWithin(options: WorkerRunOptions): Promise<void> {
    const graceful = this.stop();
    if (options.abortRunning?.aborted) {
      await this.stop({ abortRunning: true });
      return;
    }
    const drainMs = duration(options.drainTimeoutMs, JOB_DEFAULTS.drainTimeoutMs, "drainTimeoutMs");
    const cutoff = new AbortController();
    const forceReasons = [delay(drainMs, "timeout", { signal: cutoff.signal }).catch(() => "done")];
    if (options.abortRunning) forceReasons.push(untilAborted(options.abortRunning, cutoff.signal).then(() => "abort"));
    const first = await Promise.race([graceful.then(() => "done"), ...forceReasons]);
    cutoff.abort();
    if (first !== "done") await this.stop({ abortRunning: true });
    await graceful;
  }

  /**
   * Until nothing is queued or running anywhere in the store. Runs held by other workers keep it waiting,
   * because a dead worker's jobs come back to the queue when their leases expire.
   */
  private async untilDrained(options: WorkerRunOptions): Promise<void> {
    const { signal } = options;
    const idleMs = this.o.idleCheckIntervalMs;
    while (!signal?.aborted) {
      if (this.busy || this.pumpScheduled) {
        await this.changes.next(idleMs, signal);
        continue;
      }
      if (await this.drained()) {
        if (!options.mayLeave || (await options.mayLeave(() => this.drained()))) return;
        continue;
      }
      const startedBefore = this.stats.started;
      this.schedulePump();
      await this.changes.next(idleMs, signal);
      // Nothing claimable yet (a retry backoff, or other workers' runs): look again later rather than spin.
      if (this.stats.started === startedBefore && this.active.size === 0)
        await delay(idleMs, undefined, signal ? { signal } : undefined).catch(() => undefined);
    }
  }

  private async drained(): Promise<boolean> {
    const status = await this.store.queueStatus();
    return status.queued === 0 && status.running === 0 && this.active.size === 0;
  }

  private schedulePump(): void {
    if (this.pumpScheduled || !this.started || this.stopping) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      void this.pump();
    });
  }

  private async pump(): Promise<void> {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.pumpAgain = false;
        const free = this.o.concurrency - this.active.size;
        if (free <= 0 || this.stopping) break;
        let jobs: Job[];
        try {
          jobs = await this.store.claim({
            owner: this.workerId,
            leaseMs: this.o.leaseMs,
            limit: free,
            perAnimaLimit: this.o.perAnimaConcurrency,
          });
        } catch (error) {
          this.log("warn", `claiming jobs failed: ${describe(error)}`);
          break;
        }
        for (const job of jobs) this.launch(job);
      } while (this.pumpAgain);
    } finally {
      this.pumping = false;
      this.changes.notify();
    }
  }

  private launch(job: Job): void {
    let abandon!: () => void;
    const abandoned = new Promise<"abandoned">((resolve) => (abandon = () => resolve("abandoned")));
    const run = new JobRun(job, leaseOf(job), this.o.cancelGraceMs, abandon);
    // Registered before p-queue starts it, so the free-slot count is right for the very next pump. Keyed
    // by attempt too: a run that lost its lease may still be in its grace period when the job comes back.
    const key = `${job.id}#${job.attempts}`;
    this.active.set(key, run);
    this.stats.started++;
    if (this.handingBack) run.requestStop("shutdown"); // claimed while stopping: handed back like the rest
    // One line per job start and end: what an operator reading a worker's log needs to follow it.
    this.log("info", `job ${job.id} ${job.tool}:${job.action} started (attempt ${job.attempts} of ${job.maxAttempts})`, job);
    this.queue
      .add(() => this.execute(run, key, abandoned))
      .then((outcome) => {
        // The work is over: free the slot now rather than after the outcome is written, so the claim for
        // the next job joins the outcome's write in one group commit (one fsync instead of two). The
        // outcome is queued first (record() below runs synchronously up to the store call), so the claim
        // already sees this job finished when it counts the Anima's running jobs.
        this.active.delete(key);
        this.recording++;
        this.schedulePump();
        return this.record(run, outcome).finally(() => {
          this.recording--;
          // A store that commits each write on its own may have run the claim above before this outcome,
          // still counting the job against its Anima's limit: look again now rather than at the next poll.
          this.schedulePump();
        });
      })
      .catch((error: unknown) => this.log("error", `job ${job.id} crashed the worker: ${describe(error)}`, job))
      .finally(() => {
        this.active.delete(key);
        this.changes.notify();
      });
  }

  private async execute(run: JobRun, key: string, abandoned: Promise<"abandoned">): Promise<JobRunResult | "abandoned"> {
    const context: JobRunContext = {
      signal: run.signal,
      deadline: run.deadline,
      stopRequested: () => run.stopError,
      reportProgress: (fraction, message = "") => this.progress(run, key, fraction, message),
    };
    try {
      const work = Promise.resolve()
        .then(() => this.runJob(run.job, context))
        .then(checkedRunResult, (error: unknown): JobRunResult => ({ ok: false, error: errorInfoOf(error) }));
      return await Promise.race([work, abandoned]);
    } finally {
      run.end();
    }
  }

  /** Turns a run's end into the job's outcome, and records it unless the run no longer owns the job. */
  private async record(run: JobRun, ended: JobRunResult | "abandoned"): Promise<void> {
    const { job } = run;
    const outcome = outcomeOf(run, ended);
    if (!outcome) {
      // Someone else owns the job now (or will, once the lease we give back is recovered).
      this.stats.released++;
      if (run.reason === "shutdown") await this.store.renewLeases([run.lease], 0).catch(() => undefined);
      return;
    }
    const done = await completeRun(this.store, run, outcome, () => this.stopping, this.o.leaseMs);
    if (done && "failed" in done) {
      this.log("error", `recording the outcome of job ${job.id} failed: ${describe(done.failed)}`, job);
      this.stats.released++;
      return;
    }
    if (!done) {
      this.stats.released++;
      this.log("warn", `job ${job.id} lost its lease before its outcome was recorded; outcome dropped`, job);
      return;
    }
    if (done.status === "succeeded") this.stats.succeeded++;
    else if (done.status === "cancelled") this.stats.cancelled++;
    else this.stats.failed++;
    const took = done.startedAt !== undefined && done.finishedAt !== undefined ? ` after ${done.finishedAt - done.startedAt} ms` : "";
    this.log("info", `job ${job.id} ${job.tool}:${job.action} ${done.status}${took}${done.error ? ` (${done.error.type})` : ""}`, job);
    await deliverNotices(this.sink, [done]);
  }

  private progress(run: JobRun, key: string, fraction: number, message: string): void {
    if (run.stopRequested || !this.active.has(key)) return;
    saveProgress(run, { fraction, message }, this.store, (error) => this.log("warn", `progress of job ${run.job.id} not saved: ${describe(error)}`, run.job));
  }

  private async heartbeat(): Promise<void> {
    const runs = [...this.active.values()].filter((run) => run.reason !== "lease-lost");
    if (runs.length === 0) return;
    let states;
    try {
      states = await this.store.renewLeases(
        runs.map((run) => run.lease),
        this.o.leaseMs,
      );
    } catch (error) {
      this.log("warn", `renewing leases failed: ${describe(error)}`);
      return;
    }
    runs.forEach((run, i) => {
      const state = states[i];
      if (!state?.held) run.requestStop("lease-lost");
      else if (state.cancelRequested) run.requestStop("cancel");
    });
  }

  private log(level: LogRecord["level"], message: string, job?: Job): void {
    const record: LogRecord = { level, logger: "animaworks.host", message };
    if (job) {
      record.anima = job.anima;
      record.tool = job.tool;
    }
    this.o.onLog(record);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
