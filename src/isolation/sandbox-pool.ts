import { type ChildProcess, fork } from "node:child_process";
import { join } from "node:path";
import { PROJECT_ROOT } from "../config.js";
import type { ErrorInfo } from "../errors.js";
import type {
  CapabilityInvoker,
  CapabilityReply,
  CallOutcome,
  CallRequest,
  DescribeOutcome,
  DescribeRequest,
  Executor,
  FromSandbox,
  SandboxRequest,
  ToSandbox,
  ToolLogLine,
} from "./protocol.js";
import { monotonicMs } from "../clock.js";

/**
 * Runs isolates in supervised sandbox processes, so that a V8 fatal error or a native crash in one
 * tool costs only the calls in flight in that process, never the host.
 *
 * Invariants:
 *  - Sandbox processes get an empty environment: nothing of the host's environment is there to leak.
 *  - Each Anima sticks to one process (its warm isolates live there); new Animas go to the least busy.
 *  - Every request has a host-side deadline (its timeout plus a grace period). A process that misses it
 *    is killed; its calls fail with `SandboxCrashed` (the late call itself with `Timeout`), and a fresh
 *    process takes its place.
 *  - A process that lost an isolate's thread says it is `retiring`: it gets no new requests, a
 *    replacement starts at once, and the old one ends itself after answering what it has (its calls are
 *    tracked per child, so its exit fails only its own stragglers).
 *  - The operator's log sink is called inside try/catch: a throwing sink never becomes an uncaught error.
 */
export interface SandboxPoolOptions {
  /** Number of sandbox processes. Default: 2. */
  processes?: number;
  /** Idle warm isolates kept per process. Default: 64. */
  maxIdleIsolates?: number;
  /** Extra time past a request's own timeout before the host kills its process, ms. Default: 2,000. */
  deadlineGraceMs?: number;
  onLog?: (line: ToolLogLine) => void;
  /** Runs capabilities for the sandboxes' tools, in this (the host) process. Default: all refused. */
  invokeCapability?: CapabilityInvoker;
}

interface Pending {
  request: SandboxRequest;
  /** The child the request was sent to (or will be sent to, once it is ready). */
  child: ChildProcess | undefined;
  resolve: (outcome: CallOutcome | DescribeOutcome) => void;
  timer: NodeJS.Timeout;
  startedAt: number;
}

const CHILD_ENTRY = join(PROJECT_ROOT, "dist", "src", "isolation", "sandbox-process.js");
const CRASH_WINDOW_MS = 10_000;
const MAX_CRASHES_IN_WINDOW = 5;
const RESTART_BACKOFF_MS = 1_000;
/** A retiring child that has not ended itself by then is killed, ms. */
const RETIRE_KILL_AFTER_MS = 5_000;

class SandboxProcess {
  child: ChildProcess | undefined;
  readonly pending = new Map<number, Pending>();
  private ready = false;
  private backlog: ToSandbox[] = [];
  private crashes: number[] = [];
  private restartTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly index: number,
    private readonly pool: SandboxPool,
  ) {
    this.start();
  }

  get load(): number {
    return this.pending.size;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Bundle hashes this incarnation of the child has been sent (it caches their code). */
  private sentBundles = new Set<string>();

  send(message: ToSandbox): void {
    if (this.ready && this.child?.connected) {
      if (message.type === "request") {
        this.bind(message.id, this.child);
        // A bundle's code crosses to a process once; later requests name it by hash only.
        const bundle = message.request.bundle;
        if (this.sentBundles.has(bundle.hash)) message = { ...message, request: { ...message.request, bundle: { ...bundle, code: "" } } };
        else this.sentBundles.add(bundle.hash);
      }
      this.enqueue(this.child, message);
    } else this.backlog.push(message);
  }

  private outbox: ToSandbox[] = [];
  private outboxChild: ChildProcess | undefined;

  /**
   * Messages sent in the same event-loop iteration share one IPC write: pipelined calls cost one syscall,
   * not many. (`setImmediate`, not a microtask: answers arrive one task each, and a call started from
   * an answer would otherwise go out alone.)
   */
  private enqueue(child: ChildProcess, message: ToSandbox): void {
    if (this.outboxChild !== child) {
      this.flushOutbox();
      this.outboxChild = child;
    }
    this.outbox.push(message);
    if (this.outbox.length === 1) setImmediate(() => this.flushOutbox());
  }

  private flushOutbox(): void {
    const child = this.outboxChild;
    const messages = this.outbox;
    this.outbox = [];
    if (!child?.connected || messages.length === 0) return;
    child.send(messages.length === 1 ? (messages[0] as ToSandbox) : ({ type: "batch", messages } satisfies ToSandbox));
  }

  private bind(id: number, child: ChildProcess): void {
    const pending = this.pending.get(id);
    if (pending) pending.child = child;
  }

  private start(): void {
    this.ready = false;
    this.sentBundles = new Set();
    const child = fork(CHILD_ENTRY, [String(this.pool.maxIdleIsolates)], {
      execArgv: ["--no-node-snapshot"],
      env: {},
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      serialization: "json",
    });
    this.child = child;
    child.on("message", (message: FromSandbox) => this.onMessage(child, message));
    child.on("exit", (code, signal) => this.onExit(child, code, signal));
    child.on("error", () => {
      // 'exit' follows and handles the failure
    });
  }

  private onMessage(child: ChildProcess, message: FromSandbox): void {
    if (message.type === "batch") {
      for (const inner of message.messages) this.onMessage(child, inner);
      return;
    }
    if (message.type === "ready") {
      if (child !== this.child) return;
      this.ready = true;
      const backlog = this.backlog;
      this.backlog = [];
      for (const queued of backlog) this.send(queued);
    } else if (message.type === "needBundle") {
      // The child dropped that bundle from its cache: send the request again, code included.
      const pending = this.pending.get(message.id);
      if (pending && child === this.child && child.connected) child.send({ type: "request", id: message.id, request: pending.request } satisfies ToSandbox);
    } else if (message.type === "retiring") {
      this.retire(child);
    } else if (message.type === "response") {
      const pending = this.pending.get(message.id);
      if (!pending) return;
      this.pending.delete(message.id);
      clearTimeout(pending.timer);
      pending.resolve(message.outcome);
    } else if (message.type === "capability") {
      const { capabilityId } = message;
      void this.pool
        .invokeCapability(message.context, message.name, message.argsJson)
        .catch((): CapabilityReply => ({ ok: false, error: { type: "ExecutionError", message: `${message.name} failed on the host` } }))
        .then((reply) => {
          if (child.connected) child.send({ type: "capabilityReply", capabilityId, reply } satisfies ToSandbox);
        });
    } else if (message.type === "log") {
      try {
        this.pool.onLog(message.line);
      } catch {
        // a broken log sink must not take the host down
      }
    }
  }

  /** Stops sending to `child` and starts its replacement; `child` ends itself once it has answered. */
  private retire(child: ChildProcess): void {
    if (child !== this.child) return;
    this.child = undefined;
    this.ready = false;
    const killTimer = setTimeout(() => child.kill("SIGKILL"), RETIRE_KILL_AFTER_MS);
    child.once("exit", () => clearTimeout(killTimer));
    if (!this.pool.closing) this.start();
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    const reason = signal ? `signal ${signal}` : `exit code ${code}`;
    const crashed: ErrorInfo = { type: "SandboxCrashed", message: `the sandbox process stopped (${reason}) while the call was running`, hint: "retry the call; if it keeps failing, the tool is crashing its sandbox" };
    this.failAll(crashed, child);
    if (child !== this.child) return; // a retired child: its replacement is already running
    this.child = undefined;
    this.ready = false;
    // Requests queued for the restart are kept: they were never sent to the dead process.
    if (this.pool.closing) return;
    const now = Date.now();
    this.crashes = [...this.crashes.filter((t) => now - t < CRASH_WINDOW_MS), now];
    const delay = this.crashes.length > MAX_CRASHES_IN_WINDOW ? RESTART_BACKOFF_MS : 0;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (!this.pool.closing) this.start();
    }, delay);
  }

  /** Fails the pending requests sent to `child` (all, when no child is named). */
  failAll(error: ErrorInfo, child?: ChildProcess): void {
    for (const [id, pending] of this.pending) {
      if (child && pending.child !== child) continue;
      this.pending.delete(id);
      clearTimeout(pending.timer);
      pending.resolve(failureFor(pending, error));
    }
  }

  /** Asks the child to stop request `id`; one still waiting for a (re)start is answered here at once. */
  abort(id: number): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    if (pending.child) {
      if (pending.child.connected) this.enqueue(pending.child, { type: "abort", id });
      return;
    }
    this.backlog = this.backlog.filter((m) => !(m.type === "request" && m.id === id));
    this.pending.delete(id);
    clearTimeout(pending.timer);
    pending.resolve(failureFor(pending, { type: "ExecutionError", message: "the call was stopped by its caller before it finished" }));
  }

  /** Kills the process because a request overran its deadline; that request fails as a timeout. */
  killForDeadline(id: number): void {
    const late = this.pending.get(id);
    if (!late) return;
    this.pending.delete(id);
    const timeoutMs = late.request.timeoutMs;
    late.resolve(failureFor(late, { type: "Timeout", message: `the tool did not finish within ${timeoutMs} ms and its sandbox was restarted` }));
    // Kill the process that has the request; if it was still queued for a restart, just unqueue it.
    if (late.child) late.child.kill("SIGKILL");
    else this.backlog = this.backlog.filter((m) => !(m.type === "request" && m.id === id));
  }

  async stop(): Promise<void> {
    if (this.restartTimer) clearTimeout(this.restartTimer);
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    if (child.connected) child.send({ type: "shutdown" } satisfies ToSandbox);
    const timer = setTimeout(() => child.kill("SIGKILL"), 2_000);
    await exited;
    clearTimeout(timer);
  }
}

function failureFor(pending: Pending, error: ErrorInfo): CallOutcome | DescribeOutcome {
  if (pending.request.op === "describe") return { ok: false, error: { ...error, type: "LoadError" } };
  return { ok: false, error, durationMs: monotonicMs() - pending.startedAt };
}

export class SandboxPool implements Executor {
  readonly maxIdleIsolates: number;
  readonly onLog: (line: ToolLogLine) => void;
  readonly invokeCapability: CapabilityInvoker;
  closing = false;
  private readonly processes: SandboxProcess[];
  private readonly deadlineGraceMs: number;
  private readonly affinity = new Map<string, SandboxProcess>();
  private nextId = 1;

  constructor(options: SandboxPoolOptions = {}) {
    this.maxIdleIsolates = options.maxIdleIsolates ?? 64;
    this.onLog = options.onLog ?? (() => {});
    this.invokeCapability =
      options.invokeCapability ?? (async () => ({ ok: false, error: { type: "PermissionDenied", message: "capabilities are not available in this host" } }));
    this.deadlineGraceMs = options.deadlineGraceMs ?? 2_000;
    const count = Math.max(1, Math.floor(options.processes ?? 2));
    this.processes = Array.from({ length: count }, (_, index) => new SandboxProcess(index, this));
  }

  describe(request: DescribeRequest): Promise<DescribeOutcome> {
    return this.dispatch(this.leastBusy(), request) as Promise<DescribeOutcome>;
  }

  call(request: CallRequest, signal?: AbortSignal): Promise<CallOutcome> {
    let target = this.affinity.get(request.context.anima);
    if (!target) {
      target = this.leastBusy();
      this.affinity.set(request.context.anima, target);
    }
    return this.dispatch(target, request, signal) as Promise<CallOutcome>;
  }

  /** Process ids of the sandbox processes (for supervision tests and operators). */
  pids(): Array<number | undefined> {
    return this.processes.map((p) => p.pid);
  }

  /** Process id of the sandbox process an Anima's calls go to, if it has made any. */
  pidFor(anima: string): number | undefined {
    return this.affinity.get(anima)?.pid;
  }

  async close(): Promise<void> {
    this.closing = true;
    for (const process of this.processes) process.failAll({ type: "SandboxCrashed", message: "the host is shutting down" });
    await Promise.all(this.processes.map((p) => p.stop()));
  }

  stuckEntries(): number {
    return 0;
  }

  private leastBusy(): SandboxProcess {
    let best = this.processes[0] as SandboxProcess;
    for (const candidate of this.processes) if (candidate.load < best.load) best = candidate;
    return best;
  }

  private dispatch(target: SandboxProcess, request: SandboxRequest, signal?: AbortSignal): Promise<CallOutcome | DescribeOutcome> {
    if (this.closing) {
      const error: ErrorInfo = { type: "SandboxCrashed", message: "the host is shutting down" };
      return Promise.resolve(request.op === "describe" ? { ok: false, error: { ...error, type: "LoadError" } } : { ok: false, error, durationMs: 0 });
    }
    const id = this.nextId++;
    const outcome = new Promise<CallOutcome | DescribeOutcome>((resolve) => {
      const timer = setTimeout(() => target.killForDeadline(id), request.timeoutMs + this.deadlineGraceMs);
      target.pending.set(id, { request, child: undefined, resolve, timer, startedAt: monotonicMs() });
      target.send({ type: "request", id, request });
    });
    if (!signal) return outcome;
    // The sandbox disposes the call's isolate and answers as usual; the deadline kill still backs it up.
    const abort = () => target.abort(id);
    if (signal.aborted) abort();
    else signal.addEventListener("abort", abort, { once: true });
    return outcome.finally(() => signal.removeEventListener("abort", abort));
  }
}
