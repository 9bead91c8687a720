import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { type ErrorType, ToolHostError } from "../errors.js";
import { FrameDecoder, FrameError, encodeFrame } from "../isolation/wire/frames.js";
import { PROJECT_ROOT } from "../project-root.js";
import { type CheckReplyMessage, type CheckRequestMessage, MAX_REPLY_FRAME_BYTES, type ReadyMessage } from "./checks-process/protocol.js";
import { FairQueue } from "./fair-queue.js";
import type { Finding } from "./findings.js";
import { type SourceCheckRequest, checkSource, loadOnlyFindings } from "./source-checks.js";
import { type ImportUse, scanImports } from "./source-scan.js";
import { type SchemaCheckRequest, type SchemaChecker, checkAndCompile } from "../registry/schema-compile.js";
import type { SchemaCheck } from "../registry/schemas.js";

/**
 * Where `validate`, `share` and `refresh` run the checks on a tool's text (source-checks.ts) and read the
 * helpers it imports, and where a host's load checks and compiles a large tool schema
 * (registry/schema-compile.ts). A crafted 1 MiB draft costs those checks up to half a second of CPU
 * (measured: 0.5 s for 15,000 schema objects; 0.1–0.2 s to read its imports), and an Anima may ask again
 * and again, or keep a hundred failing tools for every refresh to re-check: run on a shared host's event
 * loop, that stalled every other Anima's calls. So a host runs them in a process of its own, one at a time, each bounded in
 * time and memory: a process rather than a thread, so that a defect of the checks that aborts V8 itself
 * (a heap or size limit V8 treats as fatal: one did, before literal reading was bounded) ends that process
 * only, never the daemon serving every Anima.
 */
export interface SourceChecker extends SchemaChecker {
  /**
   * The findings about `request`'s text. A check that cannot finish (past its time or memory) is an error
   * finding, never a hang; throws `Busy` when too many checks wait already.
   */
  check(request: SourceCheckRequest, asker?: string): Promise<Finding[]>;
  /**
   * The imports of a JavaScript or TypeScript text (source-scan.ts). Throws `Busy` as `check` does, and
   * Timeout / MemoryLimit (the caller's text) or ExecutionError (the host's) when the reading cannot finish.
   */
  importsOf(text: string, asker?: string): Promise<ImportUse[]>;
  /** Stops the process, if any; checks waiting get an error finding. */
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

  async checkSchemas(request: SchemaCheckRequest): Promise<SchemaCheck> {
    return checkAndCompile(request);
  }

  async close(): Promise<void> {}
}

export interface ProcessSourceCheckerOptions {
  /** Longest one check may take before its process is stopped and the check reported unfinished, ms. Default: 30,000. */
  timeoutMs?: number;
  /** Checks waiting behind the running one, in all; past it, `check` throws `Busy`. Default: 64. */
  maxWaiting?: number;
  /**
   * Checks one asker (an Anima) may have waiting; past it, its next throws `Busy`. Askers are served in
   * turn, so one Anima's many checks never hold another's one back. Default: 8.
   */
  maxWaitingPerAsker?: number;
  /** How long an idle process is kept for the next check before it is stopped, ms. Default: 10,000. */
  idleMs?: number;
  /** The process's heap limit, MB: a check past it is reported unfinished. Default: 256. */
  maxHeapMb?: number;
  /** The process's entry file. Default: the built checks-process/entry.js. */
  entry?: string;
  /**
   * Longest a new process may take to start (to say it is ready), ms: its start is not counted in a
   * check's time, and a start past it fails the check as the host's fault. Default: 30,000.
   */
  startTimeoutMs?: number;
}

const DEFAULT_ENTRY = join(PROJECT_ROOT, "dist", "src", "lifecycle", "checks-process", "entry.js");

/** What is kept of the process's stderr (the last bytes): V8's reason when it aborts. */
const STDERR_TAIL_BYTES = 4096;

/** Why a piece of work did not finish: what happened, what to do, and the error type of a caller that throws. */
interface Unfinished {
  why: string;
  next: string;
  type: ErrorType;
}

type Outcome = CheckReplyMessage | Unfinished;

interface Job {
  id: number;
  /** Sent again once already: its process had died unseen (see the exit handler). */
  retried?: boolean;
  work: { check: SourceCheckRequest } | { importsOf: string } | { schemas: SchemaCheckRequest };
  resolve: (outcome: Outcome) => void;
}

/** The work being checked: `sent` once its process was ready and has it; `toUsedChild`: that process had answered before. */
interface Running {
  job: Job;
  /** Its start's bound until sent, then its time's. */
  timer: NodeJS.Timeout | undefined;
  sent: boolean;
  toUsedChild: boolean;
}

const CLOSING: Unfinished = { why: "were stopped (the host is closing)", next: "run validate again", type: "ExecutionError" };
const unfinishedText = (u: Unfinished): string => `the source checks ${u.why}, so the file was not checked; ${u.next}`;

/**
 * The checks in one child process, started on the first check and stopped once idle. Invariants: at most
 * one check runs at a time and at most `maxWaiting` wait (each holds its text, ≤ 1 MiB by validate's
 * bound); a process that passed its time, its heap limit or died is killed and never answers again (its
 * events are ignored), and the next check starts a new one; the process keeps the host's process alive
 * only while a check runs (a one-shot CLI exits when done). It starts with no environment and Node's
 * permission model: it reads the host's own files and nothing else, and starts nothing.
 */
export class ProcessSourceChecker implements SourceChecker {
  private readonly timeoutMs: number;
  private readonly idleMs: number;
  private readonly maxHeapMb: number;
  private readonly entry: string;
  private readonly waiting: FairQueue<Job>;
  private running: Running | undefined;
  private child: ChildProcess | undefined;
  /** The current process said it is ready; how many checks it has answered. */
  private childReady = false;
  private childAnswered = 0;
  private readonly startTimeoutMs: number;
  private idleTimer: NodeJS.Timeout | undefined;
  private nextId = 1;
  private closed = false;

  constructor(options: ProcessSourceCheckerOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.startTimeoutMs = options.startTimeoutMs ?? 30_000;
    this.waiting = new FairQueue(options.maxWaiting ?? 64, options.maxWaitingPerAsker ?? 8);
    this.idleMs = options.idleMs ?? 10_000;
    this.maxHeapMb = options.maxHeapMb ?? 256;
    this.entry = options.entry ?? DEFAULT_ENTRY;
  }

  async check(request: SourceCheckRequest, asker = ""): Promise<Finding[]> {
    const outcome = await this.submit({ check: request }, asker);
    if ("findings" in outcome) return outcome.findings;
    const unfinished = unfinishedOf(outcome);
    // What the load said stands without the checks that would have weighed it.
    return [{ level: "error", check: "source", message: unfinishedText(unfinished) }, ...loadOnlyFindings(request)];
  }

  async importsOf(text: string, asker = ""): Promise<ImportUse[]> {
    const outcome = await this.submit({ importsOf: text }, asker);
    if ("imports" in outcome) return outcome.imports;
    const unfinished = unfinishedOf(outcome);
    throw new ToolHostError(
      unfinished.type,
      `the imports of the source could not be read: ${unfinishedText(unfinished)}`,
      undefined,
      unfinished.type === "ExecutionError" ? "host" : "caller",
    );
  }

  /** A tool's schemas checked and compiled here, for a host's load (registry/schema-compile.ts); throws as `importsOf` does. */
  async checkSchemas(request: SchemaCheckRequest, asker = ""): Promise<SchemaCheck> {
    const outcome = await this.submit({ schemas: request }, asker);
    if ("schemaCheck" in outcome) return outcome.schemaCheck;
    const unfinished = unfinishedOf(outcome);
    const fault = unfinished.type === "ExecutionError" ? "host" : "tool";
    throw new ToolHostError(unfinished.type, `its schemas could not be checked: the checks ${unfinished.why}`, "the tool's next use loads it again", fault);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.drain()) job.resolve(CLOSING);
    this.finish(CLOSING);
    await this.stopChild();
  }

  private submit(work: Job["work"], asker: string): Promise<Outcome> {
    if (this.closed) return Promise.resolve(CLOSING);
    return new Promise((resolve) => {
      const refused = this.waiting.push(asker, { id: this.nextId++, work, resolve });
      if (refused === "all") {
        throw new ToolHostError(
          "Busy",
          `${this.waiting.length} tool sources are waiting to be checked already`,
          "try again in a few seconds; validate, share and refresh check one tool source at a time",
        );
      }
      if (refused === "asker") {
        throw new ToolHostError(
          "Busy",
          `${this.waiting.waitingOf(asker)} tool sources${asker ? ` of ${asker}` : ""} are waiting to be checked already`,
          "try again once they are checked: validate, share and refresh check one tool source at a time, each Anima's in turn",
        );
      }
      this.pump();
    });
  }

  private pump(): void {
    if (this.running || this.closed) return;
    const job = this.waiting.shift();
    if (!job) return;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    this.running = { job, timer: undefined, sent: false, toUsedChild: false };
    this.dispatch();
  }

  /** Sends the running work to the process once it is ready, starting one if there is none. */
  private dispatch(): void {
    const running = this.running;
    if (!running || running.sent) return;
    let child = this.child;
    if (!child) {
      try {
        child = this.startChild();
      } catch (error) {
        return this.finish(failedWork(`their process could not start: ${error instanceof Error ? error.message : String(error)}`));
      }
    }
    hold(child, true);
    if (!this.childReady) {
      // A process's start is not the check's time (the text did not cause it): bounded on its own.
      running.timer ??= setTimeout(() => {
        void this.stopChild();
        this.finish(failedWork(`their process did not start within ${this.startTimeoutMs / 1000} s`));
      }, this.startTimeoutMs);
      return;
    }
    clearTimeout(running.timer);
    running.sent = true;
    running.toUsedChild = this.childAnswered > 0;
    running.timer = setTimeout(() => {
      void this.stopChild();
      this.finish({ why: `did not finish within ${this.timeoutMs / 1000} s`, next: "make the file smaller or simpler", type: "Timeout" });
    }, this.timeoutMs);
    try {
      // A request JSON cannot hold (a BigInt, a cycle) throws here, nothing sent.
      child.stdin?.write(encodeFrame({ id: running.job.id, ...running.job.work } satisfies CheckRequestMessage));
    } catch (error) {
      // This job fails; the process and the jobs after it go on.
      this.finish(failedWork(`the request could not be sent to their process: ${error instanceof Error ? error.message : String(error)}`));
    }
  }

  /** Settles the running work with `outcome` and starts the next (or lets the process idle). */
  private finish(outcome: Outcome): void {
    const running = this.running;
    if (!running) return;
    clearTimeout(running.timer);
    this.running = undefined;
    running.job.resolve(outcome);
    if (this.waiting.length > 0) return this.pump();
    if (this.child) hold(this.child, false);
    if (this.child && !this.closed) {
      this.idleTimer = setTimeout(() => void this.stopChild(), this.idleMs);
      this.idleTimer.unref();
    }
  }

  private startChild(): ChildProcess {
    const child = spawn(process.execPath, [`--max-old-space-size=${this.maxHeapMb}`, "--permission", `--allow-fs-read=${PROJECT_ROOT}`, this.entry], {
      stdio: ["pipe", "pipe", "pipe"],
      env: {},
    });
    this.child = child;
    this.childReady = false;
    this.childAnswered = 0;
    let stderr = "";
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => (stderr = (stderr + chunk).slice(-STDERR_TAIL_BYTES)));
    child.stdin?.on("error", () => {
      // a process gone away: its exit says why
    });
    // Events of a process already given up on (killed past its time, or replaced) are ignored.
    const current = () => this.child === child;
    // The host decodes the replies itself, each bounded: one over MAX_REPLY_FRAME_BYTES ends the process.
    const decoder = new FrameDecoder(MAX_REPLY_FRAME_BYTES);
    child.stdout?.on("data", (chunk: Buffer) => {
      if (!current()) return;
      let replies: unknown[];
      try {
        replies = decoder.push(chunk);
      } catch (error) {
        void this.stopChild();
        return this.finish(failedWork(`their process sent ${error instanceof FrameError ? error.message : "an answer that could not be read"}`));
      }
      for (const reply of replies as Array<CheckReplyMessage | ReadyMessage>) {
        if (!current()) return;
        if ("ready" in reply) {
          this.childReady = true;
          this.dispatch();
        } else if (reply.id === this.running?.job.id) {
          this.childAnswered++;
          this.finish(reply);
        }
      }
    });
    child.on("error", (error) => {
      if (!current()) return;
      this.child = undefined;
      child.kill("SIGKILL");
      this.finish(failedWork(`their process could not run: ${error.message}`));
    });
    child.on("exit", (code, signal) => {
      if (!current()) return;
      this.child = undefined;
      // The exit may come before the last of stderr: V8's reason is read once the pipe has closed, and
      // given to the work that was running at the exit only.
      const job = this.running?.job;
      const settle = () => {
        const running = this.running;
        if (job === undefined || running?.job !== job) return;
        if (running.sent && running.toUsedChild && !job.retried) {
          // A process that had answered before, and died as this request reached it (killed while idle,
          // its exit not yet seen): the request goes once more, to a new process. One that fails there
          // too is answered below (a text that ends the process costs two starts, no more).
          job.retried = true;
          clearTimeout(running.timer);
          running.timer = undefined;
          running.sent = false;
          return this.dispatch();
        }
        this.finish(
          /heap out of memory|Reached heap limit/i.test(stderr)
            ? { why: `ran out of memory (their limit is ${this.maxHeapMb} MB)`, next: "make the file smaller or simpler", type: "MemoryLimit" }
            : failedWork(`their process exited with ${signal ?? `code ${code}`}${lastLine(stderr)}`),
        );
      };
      if (child.stderr && !child.stderr.readableEnded) child.stderr.once("close", settle);
      else settle();
    });
    return child;
  }

  private async stopChild(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    hold(child, true); // until it has exited: a caller awaiting close is kept alive for it
    child.kill("SIGKILL");
    await exited;
  }
}

/** Whether the child (its process and pipes) keeps the host's event loop alive. */
function hold(child: ChildProcess, busy: boolean): void {
  const handles = [child, child.stdin, child.stdout, child.stderr] as Array<{ ref?: () => void; unref?: () => void } | null | undefined>;
  for (const handle of handles) (busy ? handle?.ref : handle?.unref)?.call(handle);
}

/** The last non-empty line of a process's stderr, as ": line", bounded; "" when none. */
function lastLine(stderr: string): string {
  const line = stderr
    .split("\n")
    .map((l) => l.trim())
    .findLast((l) => l !== "");
  return line ? `: ${line.slice(0, 200)}` : "";
}

/** A defect of the checks or their process: the host's, reported with what it said. */
function failedWork(what: string): Unfinished {
  return { why: `failed (${what})`, next: "run validate again, and report it if it repeats", type: "ExecutionError" };
}

/** Why work gave no answer of the kind asked for: its process failed or was stopped (time, heap, closing), or it answered otherwise. */
function unfinishedOf(outcome: Outcome): Unfinished {
  return "failed" in outcome ? failedWork(outcome.failed) : "why" in outcome ? outcome : failedWork("an answer of another kind");
}

let shared: ProcessSourceChecker | undefined;

/** The host process's source checker, made on first use (its process starts with the first check). */
export function sharedSourceChecker(): SourceChecker {
  shared ??= new ProcessSourceChecker();
  return shared;
}
