import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { type ErrorType, ToolHostError } from "../errors.js";
import { PROJECT_ROOT } from "../project-root.js";
import type { CheckReplyMessage, CheckRequestMessage } from "./checks-thread/protocol.js";
import type { Finding } from "./findings.js";
import { type SourceCheckRequest, checkSource, loadOnlyFindings } from "./source-checks.js";
import { type ImportUse, scanImports } from "./source-scan.js";

/**
 * Where `validate`, `share` and `refresh` run the checks on a tool's text (source-checks.ts) and read the
 * helpers it imports. A crafted 1 MiB draft costs those checks up to half a second of CPU (measured: 0.5 s
 * for 15,000 schema objects; 0.1–0.2 s to read its imports), and an Anima may ask again and again, or keep
 * a hundred failing tools for every refresh to re-check: run on a shared host's event loop, that stalled
 * every other Anima's calls. So a host runs them on a thread of its own, one at a time, each bounded in
 * time and memory.
 */
export interface SourceChecker {
  /**
   * The findings about `request`'s text. A check that cannot finish (past its time or memory) is an error
   * finding, never a hang; throws `Busy` when too many checks wait already.
   */
  check(request: SourceCheckRequest): Promise<Finding[]>;
  /**
   * The imports of a JavaScript or TypeScript text (source-scan.ts). Throws `Busy` as `check` does, and
   * Timeout / MemoryLimit (the caller's text) or ExecutionError (the host's) when the reading cannot finish.
   */
  importsOf(text: string): Promise<ImportUse[]>;
  /** Stops the thread, if any; checks waiting get an error finding. */
  close(): Promise<void>;
}

/** The checks on the caller's own thread: for tests, and for callers that serve no one else. */
export class InlineSourceChecker implements SourceChecker {
  async check(request: SourceCheckRequest): Promise<Finding[]> {
    return checkSource(request);
  }

  async importsOf(text: string): Promise<ImportUse[]> {
    return scanImports(text);
  }

  async close(): Promise<void> {}
}

export interface ThreadSourceCheckerOptions {
  /** Longest one check may take before its thread is stopped and the check reported unfinished, ms. Default: 30,000. */
  timeoutMs?: number;
  /** Checks waiting behind the running one; past it, `check` throws `Busy`. Default: 64. */
  maxWaiting?: number;
  /** How long an idle thread is kept for the next check before it is stopped, ms. Default: 10,000. */
  idleMs?: number;
  /** The thread's heap limit, MB: a check past it is reported unfinished. Default: 256. */
  maxHeapMb?: number;
  /** The thread's entry file. Default: the built checks-thread/entry.js. */
  entry?: string;
}

const DEFAULT_ENTRY = join(PROJECT_ROOT, "dist", "src", "lifecycle", "checks-thread", "entry.js");

/** Why a piece of work did not finish: what happened, what to do, and the error type of a caller that throws. */
interface Unfinished {
  why: string;
  next: string;
  type: ErrorType;
}

type Outcome = CheckReplyMessage | Unfinished;

interface Job {
  id: number;
  work: { check: SourceCheckRequest } | { importsOf: string };
  resolve: (outcome: Outcome) => void;
}

const CLOSING: Unfinished = { why: "were stopped (the host is closing)", next: "run validate again", type: "ExecutionError" };
const unfinishedText = (u: Unfinished): string => `the source checks ${u.why}, so the file was not checked; ${u.next}`;

/**
 * The checks on one worker thread, started on the first check and stopped once idle. Invariants: at most
 * one check runs at a time and at most `maxWaiting` wait (each holds its text, ≤ 1 MiB by validate's
 * bound); a thread that passed its time, its heap limit or died is stopped and never answers again (its
 * events are ignored), and the next check starts a new one; the thread keeps the process alive only
 * while a check runs (a one-shot CLI exits when done).
 */
export class ThreadSourceChecker implements SourceChecker {
  private readonly timeoutMs: number;
  private readonly maxWaiting: number;
  private readonly idleMs: number;
  private readonly maxHeapMb: number;
  private readonly entry: string;
  private readonly waiting: Job[] = [];
  private running: { job: Job; timer: NodeJS.Timeout } | undefined;
  private worker: Worker | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private nextId = 1;
  private closed = false;

  constructor(options: ThreadSourceCheckerOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxWaiting = options.maxWaiting ?? 64;
    this.idleMs = options.idleMs ?? 10_000;
    this.maxHeapMb = options.maxHeapMb ?? 256;
    this.entry = options.entry ?? DEFAULT_ENTRY;
  }

  async check(request: SourceCheckRequest): Promise<Finding[]> {
    const outcome = await this.submit({ check: request });
    if ("findings" in outcome) return outcome.findings;
    const unfinished = unfinishedOf(outcome);
    // What the load said stands without the checks that would have weighed it.
    return [{ level: "error", check: "source", message: unfinishedText(unfinished) }, ...loadOnlyFindings(request)];
  }

  async importsOf(text: string): Promise<ImportUse[]> {
    const outcome = await this.submit({ importsOf: text });
    if ("imports" in outcome) return outcome.imports;
    const unfinished = unfinishedOf(outcome);
    throw new ToolHostError(
      unfinished.type,
      `the imports of the source could not be read: ${unfinishedText(unfinished)}`,
      undefined,
      unfinished.type === "ExecutionError" ? "host" : "caller",
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.splice(0)) job.resolve(CLOSING);
    this.finish(CLOSING);
    await this.stopWorker();
  }

  private submit(work: Job["work"]): Promise<Outcome> {
    if (this.closed) return Promise.resolve(CLOSING);
    if (this.waiting.length >= this.maxWaiting) {
      throw new ToolHostError(
        "Busy",
        `${this.waiting.length} tool sources are waiting to be checked already`,
        "try again in a few seconds; validate, share and refresh check one tool source at a time",
      );
    }
    return new Promise((resolve) => {
      this.waiting.push({ id: this.nextId++, work, resolve });
      this.pump();
    });
  }

  private pump(): void {
    if (this.running || this.closed) return;
    const job = this.waiting.shift();
    if (!job) return;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    const worker = this.worker ?? this.startWorker();
    worker.ref();
    const timer = setTimeout(() => {
      void this.stopWorker();
      this.finish({ why: `did not finish within ${this.timeoutMs / 1000} s`, next: "make the file smaller or simpler", type: "Timeout" });
    }, this.timeoutMs);
    this.running = { job, timer };
    try {
      worker.postMessage({ id: job.id, ...job.work } satisfies CheckRequestMessage);
    } catch (error) {
      // Data the thread cannot be sent (not plain): this job fails, the thread and the jobs after it go on.
      this.finish(failedWork(`the request could not be sent to their thread: ${error instanceof Error ? error.message : String(error)}`));
    }
  }

  /** Settles the running work with `outcome` and starts the next (or lets the thread idle). */
  private finish(outcome: Outcome): void {
    const running = this.running;
    if (!running) return;
    clearTimeout(running.timer);
    this.running = undefined;
    running.job.resolve(outcome);
    if (this.waiting.length > 0) return this.pump();
    this.worker?.unref();
    if (this.worker && !this.closed) {
      this.idleTimer = setTimeout(() => void this.stopWorker(), this.idleMs);
      this.idleTimer.unref();
    }
  }

  private startWorker(): Worker {
    const worker = new Worker(this.entry, { execArgv: [], env: {}, resourceLimits: { maxOldGenerationSizeMb: this.maxHeapMb } });
    this.worker = worker;
    // Events of a thread already given up on (stopped past its time, or replaced) are ignored.
    const current = () => this.worker === worker;
    worker.on("message", (reply: CheckReplyMessage) => {
      if (!current() || reply.id !== this.running?.job.id) return;
      this.finish(reply);
    });
    worker.on("error", (error: Error & { code?: string }) => {
      if (!current()) return;
      this.worker = undefined;
      void worker.terminate();
      this.finish(
        error.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? { why: `ran out of memory (their limit is ${this.maxHeapMb} MB)`, next: "make the file smaller or simpler", type: "MemoryLimit" }
          : failedWork(`their thread could not run: ${error.message}`),
      );
    });
    worker.on("exit", (code) => {
      if (!current()) return;
      this.worker = undefined;
      this.finish(failedWork(`their thread exited with code ${code}`));
    });
    return worker;
  }

  private async stopWorker(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    await worker?.terminate();
  }
}

/** A defect of the checks or their thread: the host's, reported with what it said. */
function failedWork(what: string): Unfinished {
  return { why: `failed (${what})`, next: "run validate again, and report it if it repeats", type: "ExecutionError" };
}

/** Why work gave no answer of the kind asked for: its thread failed or was stopped (time, heap, closing), or it answered otherwise. */
function unfinishedOf(outcome: Outcome): Unfinished {
  return "failed" in outcome ? failedWork(outcome.failed) : "why" in outcome ? outcome : failedWork("an answer of another kind");
}

let shared: ThreadSourceChecker | undefined;

/** The process's source-checks thread, made on first use (its thread starts with the first check). */
export function sharedSourceChecker(): SourceChecker {
  shared ??= new ThreadSourceChecker();
  return shared;
}
