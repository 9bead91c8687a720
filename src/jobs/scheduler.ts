import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { setTimeout as delay } from "node:timers/promises";
import PQueue from "p-queue";
import type { LogRecord } from "../config.js";
import { type NoticeSink, deliverNotices, sweepNotices } from "./notices.js";
import {
  type JobRunContext,
  type JobRunResult,
  type JobSchedulerOptions,
  type ResolvedSchedulerOptions,
  type SchedulerStats,
  resolveSchedulerOptions,
} from "./scheduler-options.js";
import { type AbortReason, type ActiveRun, abortError, saveProgress } from "./run-state.js";
import { type Job, type JobOutcome, type SubmitJobInput, type SubmitResult, jobErrorFromThrown, leaseOf } from "./store.js";

export type { JobRunContext, JobRunResult, JobRunner, JobSchedulerOptions, SchedulerStats } from "./scheduler-options.js";


/**
 * Runs background jobs from a `JobStore`. Which job runs next is decided by the store's `claim` (Animas
 * in turn, each Anima's jobs by priority, per-Anima limits counted across all workers); this class keeps
 * the global limit with p-queue, claims only as many jobs as it has free slots (so a job never waits in a
 * local queue while another Anima's arrives), renews leases, enforces timeouts and cancellation, writes
 * completion notices, and recovers jobs whose worker died.
 *
 * A run whose runner ignores its abort signal is given `cancelGraceMs`, then recorded and its slot freed;
 * the runner's eventual result is ignored. Runners are expected to stop their isolate on abort.
 */
/** Waits before each new try of a failed outcome write, ms (≈ 4 s in all, well inside a lease). */
const RECORD_RETRY_DELAYS_MS = [100, 250, 500, 1_000, 2_000];

/** How long after a failed attempt to listen for store changes a worker tries again, ms. */
const LISTEN_RETRY_MS = 1_000;

/** How long a worker gathers submit notifications before it claims (see `pumpSoon`), ms. */
const NOTIFY_COALESCE_MS = 5;

export class JobScheduler {
  readonly workerId: string;
  readonly stats: SchedulerStats = { started: 0, succeeded: 0, failed: 0, cancelled: 0, released: 0 };
  private readonly o: ResolvedSchedulerOptions;
  private readonly sink: NoticeSink;
  private readonly queue: PQueue;
  private readonly active = new Map<string, ActiveRun>();
  private readonly timers: NodeJS.Timeout[] = [];
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private coalesceTimer: NodeJS.Timeout | undefined;
  private listenRetry: NodeJS.Timeout | undefined;
  /** The store's change feed while started (see `listen`): resolves to the function that ends it. */
  private subscription: Promise<(() => Promise<void>) | undefined> | undefined;
  private started = false;
  private stopping = false;
  private pumping = false;
  private pumpAgain = false;
  private pumpScheduled = false;
  private lastPurgeAt = 0;
  private maintaining = false;
  /** Runs whose work is over but whose outcome is still being written. */
  private recording = 0;
  private changeWaiters: Array<() => void> = [];

  constructor(options: JobSchedulerOptions) {
    this.o = resolveSchedulerOptions(options);
    this.sink = {
      store: this.o.store,
      animaDirOf: this.o.animaDirOf,
      enabled: this.o.notices,
      warn: (message, job) => this.log("warn", message, job),
    };
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

  /** Starts claiming and running jobs until `stop()`. Idempotent. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.stopping = false;
    this.timers.push(setInterval(() => this.schedulePump(), this.o.pollIntervalMs));
    this.timers.push(setInterval(() => void this.maintain(), this.o.maintenanceIntervalMs));
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.o.heartbeatIntervalMs);
    void this.maintain();
    this.schedulePump();
    this.listen();
  }

  /**
   * Stores that push changes (PostgreSQL's LISTEN/NOTIFY) wake this worker on a submit anywhere, and carry
   * a cancel to the worker running the job at once; it still checks the store before acting (a claim, a
   * lease renewal). Without it, or while it is down, the polls above do the same more slowly.
   */
  private listen(): void {
    const subscribe = this.o.store.subscribe?.bind(this.o.store);
    if (!subscribe) return;
    this.subscription = subscribe((event) => {
      if (event.type === "runnable") this.pumpSoon();
      else if ([...this.active.values()].some((run) => run.job.id === event.id)) void this.heartbeat();
    }).catch((error: unknown) => {
      // Polling covers the gap; listening is tried again while this worker runs.
      this.log("warn", `listening for job changes failed (polling until it works): ${describe(error)}`);
      this.listenRetry = setTimeout(() => {
        this.listenRetry = undefined;
        if (this.started && !this.stopping) this.listen();
      }, LISTEN_RETRY_MS);
      return undefined;
    });
  }

  /**
   * Stops claiming. Waits for running jobs to finish (each is bounded by its timeout plus `cancelGraceMs`).
   * With `abortRunning`, aborts them instead and hands their leases back at once, so the store retries or
   * marks them `interrupted` under their retry policy; a run that still finishes within the grace counts.
   */
  async stop(options: { abortRunning?: boolean } = {}): Promise<void> {
    if (!this.started) return;
    this.stopping = true;
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    if (options.abortRunning) for (const run of this.active.values()) this.abort(run, "shutdown");
    // Maintenance in flight is waited for too: the caller may close the store as soon as this returns.
    while (this.busy || this.maintaining) await this.nextChange(this.o.pollIntervalMs);
    clearInterval(this.heartbeatTimer);
    await this.queue.onIdle();
    // Leases handed back above are recovered now rather than by whoever next runs maintenance.
    if (options.abortRunning) await this.maintain();
    clearTimeout(this.coalesceTimer);
    this.coalesceTimer = undefined;
    clearTimeout(this.listenRetry);
    this.listenRetry = undefined;
    const unsubscribe = await this.subscription;
    this.subscription = undefined;
    await unsubscribe?.();
    this.started = false;
  }

  /**
   * Runs until no job is queued or running anywhere in the store, then stops: the mode of a worker started
   * on demand. Runs held by other workers keep it waiting, because a dead worker's jobs come back to the
   * queue when their leases expire. Before returning it writes any notice still missing.
   */
  async runUntilDrained(): Promise<SchedulerStats> {
    this.start();
    for (;;) {
      if (this.busy || this.pumpScheduled) {
        await this.nextChange(this.o.pollIntervalMs);
        continue;
      }
      const status = await this.o.store.queueStatus();
      if (status.queued === 0 && status.running === 0 && this.active.size === 0) break;
      const startedBefore = this.stats.started;
      this.schedulePump();
      await this.nextChange(this.o.pollIntervalMs);
      // Nothing claimable yet (a retry backoff, or other workers' runs): poll rather than spin.
      if (this.stats.started === startedBefore && this.active.size === 0) await delay(this.o.pollIntervalMs);
    }
    await this.stop();
    await sweepNotices(this.sink, 0);
    return { ...this.stats };
  }

  /** Submits through the store and wakes the scheduler at once (rather than at its next poll). */
  async submit(input: SubmitJobInput): Promise<SubmitResult> {
    const submitted = await this.o.store.submit(input);
    this.schedulePump();
    return submitted;
  }

  /** Requests cancellation; a job running here is aborted at once, elsewhere at that worker's next heartbeat. */
  async cancel(anima: string, id: string): Promise<Job | undefined> {
    const job = await this.o.store.requestCancel(anima, id);
    if (job?.status === "running" && job.anima === anima) {
      for (const run of this.active.values()) if (run.job.id === id) this.abort(run, "cancel");
    }
    return job;
  }

  /** Looks for work now instead of at the next poll (e.g. after a submit by another process). */
  wake(): void {
    this.schedulePump();
  }

  /**
   * A pump a few ms from now, for submits announced by the store: under load they arrive one per submit,
   * and a claim per notification (each a transaction serialised with every other worker's) would cost
   * more than the jobs. Waiting `NOTIFY_COALESCE_MS` lets one claim take them together.
   */
  private pumpSoon(): void {
    if (this.coalesceTimer) return;
    this.coalesceTimer = setTimeout(() => {
      this.coalesceTimer = undefined;
      this.schedulePump();
    }, NOTIFY_COALESCE_MS);
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
          jobs = await this.o.store.claim({
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
      this.changed();
    }
  }

  private launch(job: Job): void {
    let settle!: () => void;
    const forced = new Promise<"forced">((resolve) => (settle = () => resolve("forced")));
    const run: ActiveRun = {
      job,
      lease: leaseOf(job),
      controller: new AbortController(),
      reason: undefined,
      settle,
      graceTimer: undefined,
      pendingProgress: undefined,
      progressInFlight: false,
    };
    // Registered before p-queue starts it, so the free-slot count is right for the very next pump. Keyed
    // by attempt too: a run that lost its lease may still be in its grace period when the job comes back.
    const key = `${job.id}#${job.attempts}`;
    this.active.set(key, run);
    this.stats.started++;
    // One line per job start and end: what an operator reading a worker's log needs to follow it.
    this.log("info", `job ${job.id} ${job.tool}:${job.action} started (attempt ${job.attempts} of ${job.maxAttempts})`, job);
    this.queue
      .add(() => this.execute(run, forced))
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
      .catch((error: unknown) => this.log("error", `job ${job.id} crashed the scheduler: ${describe(error)}`, job))
      .finally(() => {
        this.active.delete(key);
        this.changed();
      });
  }

  private async execute(run: ActiveRun, forced: Promise<"forced">): Promise<JobRunResult | "forced"> {
    const { job } = run;
    const timeout = setTimeout(() => this.abort(run, "timeout"), job.timeoutMs);
    const context: JobRunContext = {
      signal: run.controller.signal,
      reportProgress: (fraction, message = "") => this.progress(run, fraction, message),
    };
    let outcome: JobRunResult | "forced";
    try {
      const work = Promise.resolve()
        .then(() => this.o.runJob(job, context))
        .then(checkResult, (error: unknown): JobRunResult => ({ ok: false, error: jobErrorFromThrown(error) }));
      outcome = await Promise.race([work, forced]);
    } finally {
      clearTimeout(timeout);
      clearTimeout(run.graceTimer);
    }
    return outcome;
  }

  /** Turns a run's end into the job's outcome, and records it unless the run no longer owns the job. */
  private async record(run: ActiveRun, outcome: JobRunResult | "forced"): Promise<void> {
    const { job, reason } = run;
    const succeeded = outcome !== "forced" && outcome.ok;
    let result: JobOutcome;
    if (reason === "lease-lost" || (reason === "shutdown" && !succeeded)) {
      // Someone else owns the job now (or will, once the lease we give back is recovered).
      this.stats.released++;
      if (reason === "shutdown") await this.o.store.renewLeases([run.lease], 0).catch(() => undefined);
      return;
    }
    if (reason === "timeout") {
      // A deadline is a deadline: a result that arrives during the grace period does not count.
      result = { status: "failed", error: { type: "Timeout", message: `job exceeded its timeout of ${job.timeoutMs} ms` } };
    } else if (outcome !== "forced" && outcome.ok) {
      // Cancelled too late to matter: the work finished, so report it as it is.
      result = { status: "succeeded", result: outcome.result };
    } else if (reason === "cancel") {
      result = { status: "cancelled" };
    } else {
      result = { status: "failed", error: outcome === "forced" ? unreachable() : outcome.error };
    }
    let done: Job | undefined;
    // A networked store may be briefly unreachable (a server restart): the write is fenced by the lease,
    // so trying again is safe, and it keeps a finished job from ending `interrupted`.
    for (let attempt = 0; ; attempt++) {
      try {
        done = await this.o.store.complete(run.lease, result);
        break;
      } catch (error) {
        const retryInMs = RECORD_RETRY_DELAYS_MS[attempt];
        if (retryInMs === undefined || this.stopping) {
          // The lease will expire and recovery will decide (retry or interrupted).
          this.log("error", `recording the outcome of job ${job.id} failed: ${describe(error)}`, job);
          this.stats.released++;
          return;
        }
        await delay(retryInMs);
      }
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

  private abort(run: ActiveRun, reason: AbortReason): void {
    if (run.reason !== undefined) return; // the first reason decides the outcome
    run.reason = reason;
    run.controller.abort(abortError(reason, run.job));
    run.graceTimer = setTimeout(run.settle, this.o.cancelGraceMs);
  }

  private progress(run: ActiveRun, fraction: number, message: string): void {
    if (run.reason !== undefined || !this.active.has(`${run.job.id}#${run.lease.attempt}`)) return;
    saveProgress(run, { fraction, message }, this.o.store, (error) => this.log("warn", `progress of job ${run.job.id} not saved: ${describe(error)}`, run.job));
  }

  private async heartbeat(): Promise<void> {
    const runs = [...this.active.values()].filter((run) => run.reason !== "lease-lost");
    if (runs.length === 0) return;
    let states;
    try {
      states = await this.o.store.renewLeases(
        runs.map((run) => run.lease),
        this.o.leaseMs,
      );
    } catch (error) {
      this.log("warn", `renewing leases failed: ${describe(error)}`);
      return;
    }
    runs.forEach((run, i) => {
      const state = states[i];
      if (!state?.held) this.abort(run, "lease-lost");
      else if (state.cancelRequested) this.abort(run, "cancel");
    });
  }

  /** Recovers dead workers' jobs, re-writes lost notices and purges old jobs. Errors are logged, never thrown. */
  private async maintain(): Promise<void> {
    if (this.maintaining) return;
    this.maintaining = true;
    try {
      const recovered = await this.o.store.recoverExpiredLeases();
      if (recovered.requeued.length > 0) this.schedulePump();
      await deliverNotices(this.sink, recovered.ended);
      await sweepNotices(this.sink, this.o.noticeGraceMs);
      const now = Date.now();
      if (Number.isFinite(this.o.retentionMs) && now - this.lastPurgeAt >= this.o.purgeIntervalMs) {
        this.lastPurgeAt = now;
        await this.o.store.purgeFinished(this.o.retentionMs);
      }
    } catch (error) {
      this.log("warn", `job store maintenance failed: ${describe(error)}`);
    } finally {
      this.maintaining = false;
      this.changed();
    }
  }

  /** Resolves at the next state change (a run ended, a pump or maintenance finished) or after `ms`. */
  private nextChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        const index = this.changeWaiters.indexOf(done);
        if (index >= 0) this.changeWaiters.splice(index, 1);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.changeWaiters.push(done);
    });
  }

  private changed(): void {
    for (const waiter of this.changeWaiters.splice(0)) waiter();
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

function checkResult(value: JobRunResult): JobRunResult {
  if (value && value.ok === true && typeof value.result === "string") return value;
  if (value && value.ok === false && value.error) return value;
  return { ok: false, error: { type: "ExecutionError", message: "the job runner returned an invalid result" } };
}

function unreachable(): never {
  throw new Error("a run was forced to settle without having been aborted");
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
