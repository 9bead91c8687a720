import { join } from "node:path";
import { canonicalJson } from "../canonical-json.js";
import { setTimeout as delay } from "node:timers/promises";
import { workerEnvironment } from "../config.js";
import { PROJECT_ROOT } from "../project-root.js";
import { type ErrorEnvelope, ToolHostError, errorEnvelope, errorInfoOf } from "../errors.js";
import type { AuditWriterSource, ToolHost } from "../host-api.js";
import { type PreparedCallRunner, preparedCallsOf } from "../prepared-calls.js";
import { resolveAnima } from "../registry/animas.js";
import { type NoticeSink, deliverNotices } from "./notices.js";
import { NoticeFailures } from "./notice-failures.js";
import { checkJobArgsBytes } from "./limits.js";
import { JOB_DEFAULTS, MAX_TIMER_MS } from "./defaults.js";
import { profileTimeoutMs } from "../registry/profile.js";
import { hostJobRunner } from "./host-runner.js";
import { JobWorker, type JobWorkerSettings, type WorkerRunOptions, type WorkerStats } from "./worker.js";
import { resolveWorkerSettings } from "./worker-settings.js";
import { SqliteJobStore } from "./sqlite-store.js";
import { PostgresJobStore } from "./postgres-store.js";
import { type Job, type JobStatus, type JobStore, isTerminal } from "./store.js";
import { jobFailure, jobOutputValue } from "./view.js";
import { liveWorkers, registerWorker, startWorkerProcess } from "./workers.js";

/**
 * The library API of background jobs (docs/design.md §8), used by the CLI's `submit`, `jobs` and `serve`.
 *
 * Submit = `prepare` (validation, and the tool bundle current now) + the bundle stored by its hash + the
 * job stored durably; so a job always runs the tool version it was submitted with, whatever edits follow.
 * Run = the stored bundle back into a `PreparedCall` + `runPrepared`, in the sandbox (host-runner.ts). Both
 * steps are the host's `PreparedCallRunner` (prepared-calls.ts), which every host made by `createHost` has.
 *
 * Scoping: every method takes the acting Anima, and another Anima's job id is answered exactly like an
 * unknown one (`NotFound`, CLI exit 2), so ids of other Animas cannot even be probed.
 */

export interface JobServiceOptions {
  /** The host whose tools jobs call, made by `createHost` (it prepares calls at submit and runs them in the worker). A worker's host should use process isolation. */
  host: ToolHost;
  /**
   * Where jobs are kept. Default: a `PostgresJobStore` when the host's config has a `jobsUrl`, else a
   * `SqliteJobStore` at `jobPaths(dataDir).store`; opened on first use and closed by `close()`.
   */
  store?: JobStore;
  /** Timeout of a job whose profile has no `timeout_seconds`, ms. Default: 1,800,000 (30 min; `JOB_DEFAULTS`). */
  defaultTimeoutMs?: number;
  /** The worker's settings for `runWorker` (worker.ts `JobWorkerSettings`: concurrency 4, per Anima 2, …; defaults in defaults.ts). */
  worker?: JobWorkerSettings;
}

export interface SubmitOptions {
  /** Integer; higher runs first. Default: 0. */
  priority?: number;
  /** Per Anima: a second submit with this key returns the first job (while it is kept) instead of queueing another. */
  idempotencyKey?: string;
}

export interface SubmittedJob {
  job: Job;
  /** False when the idempotency key matched an earlier job, which is returned as it is now. */
  created: boolean;
  /** The action's EXECUTION_PROFILE says `background_eligible: true`. */
  backgroundEligible: boolean;
  /** The profile's `expected_seconds`, when it gives one. */
  expectedSeconds?: number;
}

export interface WaitOptions {
  /** Give up after this long with a `Timeout` error (the job goes on), ms. Default: no limit. */
  timeoutMs?: number;
  /** Called with the job at the start and whenever its status, attempt or progress changes. */
  onProgress?: (job: Job) => void;
  /** Default: 250 ms. */
  pollIntervalMs?: number;
  signal?: AbortSignal;
}

/**
 * How `runWorker` runs: the worker's own run options (worker-settings.ts `WorkerRunOptions`: `untilDrained`,
 * `signal`, `abortRunning`, `drainTimeoutMs`), less `mayLeave`, which the service decides itself.
 */
export type RunWorkerOptions = Omit<WorkerRunOptions, "mayLeave">;

/**
 * A finished job's result (`JobService.result`), as a direct call's `-j` spells it: its output (an object
 * result as the object, anything else as its text), or its error as the JSON edges spell it; a cancelled
 * job's error carries the partial result its tool returned, if it returned one, as `output`.
 */
export type JobResult = { status: "ok"; output: string | Record<string, unknown> } | (ErrorEnvelope & { output?: string | Record<string, unknown> });

/** Where the embedded backend keeps its files under a data dir. */
export function jobPaths(dataDir: string): { store: string; workersDir: string; workerLog: string } {
  const root = join(dataDir, "state", "animaworks-tool");
  return { store: join(root, "jobs.sqlite"), workersDir: join(root, "workers"), workerLog: join(dataDir, "logs", "animaworks-tool", "worker.log") };
}

/** AnimaWorks' warning for submitting an action not marked long-running (docs/animaworks-reference.md §8.6), or undefined. */
export function eligibilityWarning(submitted: SubmittedJob): string | undefined {
  if (submitted.backgroundEligible) return undefined;
  const { tool, action } = submitted.job;
  // Only a profile's own expected_seconds is quoted: an action without one has no expectation to state.
  const expected = submitted.expectedSeconds !== undefined ? `expected ~${submitted.expectedSeconds}s` : "no EXECUTION_PROFILE entry";
  return `Warning: ${tool} ${action} is not marked as long-running (${expected}). Consider running directly instead.`;
}

export class JobService {
  readonly paths: ReturnType<typeof jobPaths>;
  private readonly host: ToolHost;
  private readonly defaultTimeoutMs: number;
  private openedStore: JobStore | undefined;
  private readonly ownsStore: boolean;
  /** Notices this service's workers, cancels and recoveries could not write: logged once per Anima and failure. */
  private readonly noticeFailures = new NoticeFailures();

  constructor(private readonly options: JobServiceOptions) {
    this.host = options.host;
    this.paths = jobPaths(options.host.config.dataDir);
    this.openedStore = options.store;
    this.ownsStore = options.store === undefined;
    const timeout = options.defaultTimeoutMs ?? JOB_DEFAULTS.timeoutMs;
    if (!Number.isSafeInteger(timeout) || timeout < 1 || timeout > MAX_TIMER_MS)
      throw new TypeError(`defaultTimeoutMs must be a whole number of ms from 1 to ${MAX_TIMER_MS}`);
    this.defaultTimeoutMs = timeout;
    // A wrong worker setting fails here, where it was given, rather than when a worker first starts.
    if (options.worker) resolveWorkerSettings(options.worker);
  }

  /** Validates the call (throwing `ToolHostError` before anything is stored), then records the job durably. */
  async submit(anima: string, schemaName: string, args: unknown, options: SubmitOptions = {}): Promise<SubmittedJob> {
    let prepared: Awaited<ReturnType<PreparedCallRunner["prepare"]>>;
    try {
      prepared = await preparedCallsOf(this.host).prepare(anima, schemaName, args);
    } catch (error) {
      // A refused submission is a refused management command: recorded (issue #34, nothing lost unseen).
      const info = errorInfoOf(error);
      (this.host as ToolHost & Partial<AuditWriterSource>).auditWriter?.append({
        kind: "refusal",
        anima,
        command: "submit_job",
        // (The audit log bounds every field of a record itself.)
        target: typeof schemaName === "string" ? schemaName : String(schemaName),
        errorType: info.type,
        errorFault: info.fault,
        reason: info.message,
      });
      throw error;
    }
    const profile = prepared.profile;
    // The profile is part of the version pinned here: a later edit of timeout_seconds does not change this job.
    const timeoutMs = profileTimeoutMs(profile) ?? this.defaultTimeoutMs;
    // Canonical key order, so that the same arguments given in another order are the same work for an idempotency key.
    const argsJson = canonicalJson(JSON.parse(prepared.argsJson));
    // Checked before the bundle is stored: arguments too large for a job are refused having stored nothing.
    checkJobArgsBytes(argsJson);
    const store = this.store();
    await store.putBundle(prepared.bundle.hash, prepared.bundle.code);
    const { job, created } = await store.submit({
      anima: prepared.anima,
      tool: prepared.tool,
      action: prepared.action,
      schemaName: prepared.schemaName,
      argsJson,
      bundleHash: prepared.bundle.hash,
      timeoutMs,
      ...(options.priority !== undefined ? { priority: options.priority } : {}),
      ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {}),
      // Retrying a run lost to a crash is the tool's promise that the action is safe to run twice: only
      // its profile can make it, never the submitter.
      ...(profile?.retry ? { maxAttempts: profile.retry.attempts, retryBackoffMs: Math.round((profile.retry.backoff ?? 1) * 1000) } : {}),
    });
    return {
      job,
      created,
      backgroundEligible: profile?.background_eligible === true,
      ...(profile?.expected_seconds !== undefined ? { expectedSeconds: profile.expected_seconds } : {}),
    };
  }

  /** The Anima's jobs, newest first (default: the 100 newest; at most `MAX_LISTED_JOBS`, 1,000). */
  async list(anima: string, options: { status?: JobStatus | readonly JobStatus[]; limit?: number } = {}): Promise<Job[]> {
    await this.checkAnima(anima);
    return this.store().list(anima, options);
  }

  /**
   * The Anima's job; `NotFound` for an unknown id and for another Anima's. A running job whose lease ran
   * out (its worker died) is recovered here, as a worker's maintenance would: it then reads as
   * interrupted (or queued again, under its retry policy) instead of "running" until a worker starts.
   */
  async get(anima: string, id: string): Promise<Job> {
    await this.checkAnima(anima);
    let job = await this.store().get(anima, id);
    if (!job) throw notFound(anima, id);
    if (job.status === "running" && job.leaseExpiresAt !== undefined && job.leaseExpiresAt <= Date.now()) {
      const recovered = await this.store().recoverExpiredLeases();
      await deliverNotices(this.noticeSink(), recovered.ended);
      job = (await this.store().get(anima, id)) ?? job;
    }
    return job;
  }

  /**
   * A queued job is cancelled at once (and its notice written now); a running one is flagged and its worker
   * aborts it at its next heartbeat; a finished one is returned unchanged.
   */
  async cancel(anima: string, id: string): Promise<Job> {
    await this.checkAnima(anima);
    const job = await this.store().requestCancel(anima, id);
    if (!job) throw notFound(anima, id);
    if (job.status === "cancelled" && job.notifiedAt === undefined) await deliverNotices(this.noticeSink(), [job]);
    return job;
  }

  /** A finished job's output or error. A job not finished yet is `InvalidArguments` (nothing to show yet). */
  async result(anima: string, id: string): Promise<JobResult> {
    const job = await this.get(anima, id);
    if (!isTerminal(job.status)) {
      throw new ToolHostError("InvalidArguments", `job ${id} is ${job.status} and has no result yet`, `wait for it: animaworks-tool jobs wait ${id}`);
    }
    return resultOf(job);
  }

  /** Resolves with the job once it is finished. `Timeout` when `timeoutMs` passes first (the job itself goes on). */
  async wait(anima: string, id: string, options: WaitOptions = {}): Promise<Job> {
    const pollMs = options.pollIntervalMs ?? JOB_DEFAULTS.waitPollIntervalMs;
    const deadline = options.timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + options.timeoutMs;
    let seen = "";
    for (;;) {
      const job = await this.get(anima, id);
      const state = `${job.status}|${job.attempts}|${job.cancelRequested}|${job.progress?.fraction}|${job.progress?.message}`;
      if (state !== seen) {
        seen = state;
        options.onProgress?.(job);
      }
      if (isTerminal(job.status)) return job;
      const leftMs = deadline - Date.now();
      if (leftMs <= 0) {
        throw new ToolHostError(
          "Timeout",
          `job ${id} is still ${job.status} after waiting ${options.timeoutMs} ms`,
          `it goes on; check later with: animaworks-tool jobs show ${id}`,
        );
      }
      await delay(Math.min(pollMs, leftMs), undefined, options.signal ? { signal: options.signal } : undefined);
    }
  }

  /** True when some worker (this machine or another sharing the data dir) is registered and alive. */
  workerRunning(): boolean {
    return liveWorkers(this.paths.workersDir).length > 0;
  }

  /**
   * Starts a detached `animaworks-tool serve --until-drained` unless a worker is alive. Returns its pid, or
   * undefined when one was running already. The worker uses this host's data dir and default options.
   */
  ensureWorker(): number | undefined {
    if (this.workerRunning()) return undefined;
    const dataDir = this.host.config.dataDir;
    return startWorkerProcess({
      // The URL goes in the worker's environment, not its argv: other users could read it (and its password) in ps.
      argv: ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", dataDir, "serve", "--until-drained"],
      workersDir: this.paths.workersDir,
      logFile: this.paths.workerLog,
      env: workerEnvironment(this.host.config.jobsUrl),
      cwd: dataDir,
    });
  }

  /**
   * Runs jobs in this process until `signal` (or, with `untilDrained`, until the store has nothing queued or
   * running), registered as a live worker meanwhile. Returns what this worker did.
   */
  async runWorker(options: RunWorkerOptions = {}): Promise<WorkerStats> {
    const worker = new JobWorker({
      onLog: this.host.config.onLog,
      ...this.options.worker,
      store: this.store(),
      runJob: hostJobRunner(preparedCallsOf(this.host), (hash) => this.store().getBundle(hash)),
      animaDirOf: (anima) => this.animaDirOf(anima),
      noticeFailures: this.noticeFailures,
    });
    const mode = options.untilDrained ? "until-drained" : "serve";
    let registration = registerWorker(this.paths.workersDir, mode);
    try {
      return await worker.run({
        ...options,
        // Leave in this order: record gone first, then one last look. A submit commits its job before it
        // looks for workers, so one that still saw our record committed before this look and is seen by it;
        // one that did not see the record starts a worker of its own.
        mayLeave: async (drained) => {
          registration.remove();
          if (await drained()) return true;
          registration = registerWorker(this.paths.workersDir, mode);
          return false;
        },
      });
    } finally {
      registration.remove();
    }
  }

  async close(): Promise<void> {
    if (this.ownsStore && this.openedStore) await this.openedStore.close();
    this.openedStore = undefined;
  }

  /** The store the host's configuration names: PostgreSQL for a `jobsUrl`, else the embedded SQLite file. */
  private store(): JobStore {
    const url = this.host.config.jobsUrl;
    this.openedStore ??= url ? new PostgresJobStore({ url }) : new SqliteJobStore({ path: this.paths.store });
    return this.openedStore;
  }

  private animaDirOf(anima: string): string {
    return join(this.host.config.dataDir, "animas", anima);
  }

  private noticeSink(): NoticeSink {
    const onLog = this.host.config.onLog;
    return {
      store: this.store(),
      animaDirOf: (anima) => this.animaDirOf(anima),
      enabled: this.options.worker?.notices ?? JOB_DEFAULTS.notices,
      warn: (message, job) => onLog({ level: "warn", logger: "animaworks.host", message, ...(job ? { anima: job.anima, tool: job.tool } : {}) }),
      failures: this.noticeFailures,
    };
  }

  /** An unknown Anima is the same error as for a tool call (NotFound, naming the known ones). */
  private async checkAnima(anima: string): Promise<void> {
    await resolveAnima(this.host.config.dataDir, anima);
  }
}

export function resultOf(job: Job): JobResult {
  const output = jobOutputValue(job);
  if (job.status === "succeeded") return { status: "ok", output: output ?? "" };
  return { ...errorEnvelope(jobFailure(job)), ...(output !== undefined ? { output } : {}) };
}

function notFound(anima: string, id: string): ToolHostError {
  return new ToolHostError("NotFound", `Anima "${anima}" has no job "${id}"`, "animaworks-tool jobs list shows this Anima's jobs");
}
