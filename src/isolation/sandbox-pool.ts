import type { ErrorInfo } from "../errors.js";
import { type CapabilityLimits, CallLedger, CapabilityBudget } from "./call-ledger.js";
import type { CallContext, CapabilityInvoker, CallOutcome, CallRequest, DescribeOutcome, DescribeRequest, Executor, SandboxRequest, ToolLogLine } from "./protocol.js";
import { type ProcessOwner, SandboxProcess } from "./sandbox-child.js";
import { type OsSandboxMode, type OsSandboxStatus, osSandboxStatus } from "./os-sandbox.js";
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
 *  - A sandbox process holds no authority. Its messages are decoded against the protocol's union and
 *    name only the id of a request the host sent to that very process and that is still in flight; the
 *    host takes the Anima, its directory, the tool and the job from its own record of that request, and
 *    keeps the call's limits on its own counts (`CallLedger`). A message that fails to decode, names a
 *    request the host never sent to that process, or claims anything else is a protocol violation: it
 *    is reported, and the process is killed and replaced (its calls in flight fail as `SandboxCrashed`).
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
  /** Capability calls and bytes in flight, per call, per Anima and for the host (defaults: `CapabilityLimits`). */
  capabilityLimits?: Partial<CapabilityLimits>;
  /** Told of each capability request a host-side limit refused. */
  onRefusal?: (context: CallContext, name: string, error: ErrorInfo) => void;
  /** Told of each protocol violation by a sandbox process (the process is killed and replaced). */
  onViolation?: (message: string) => void;
  /** Start sandbox processes inside bubblewrap (os-sandbox.ts): "auto", "required" or "off". Default: "auto". */
  osSandbox?: OsSandboxMode;
}

/** Request ids whose process is remembered, to tell a late answer from a forged one. */
const SENT_TO_REMEMBERED = 65_536;

export class SandboxPool implements Executor, ProcessOwner {
  readonly maxIdleIsolates: number;
  readonly onLog: (line: ToolLogLine) => void;
  readonly invokeCapability: CapabilityInvoker;
  readonly onViolation: (message: string) => void;
  readonly osSandbox: OsSandboxStatus;
  closing = false;
  private readonly budget: CapabilityBudget;
  private readonly onRefusal: SandboxPoolOptions["onRefusal"];
  /** Which process each request id went to, for ids still remembered (see `wasSentTo`). */
  private readonly sentTo = new Map<number, number>();
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
    this.budget = new CapabilityBudget(options.capabilityLimits);
    this.onRefusal = options.onRefusal;
    this.onViolation = options.onViolation ?? (() => {});
    // Throws for "required" without a working bwrap: before any process starts.
    this.osSandbox = osSandboxStatus(options.osSandbox ?? "auto");
    const count = Math.max(1, Math.floor(options.processes ?? 2));
    this.processes = Array.from({ length: count }, (_, index) => new SandboxProcess(index, this));
  }

  describe(request: DescribeRequest): Promise<DescribeOutcome> {
    return this.dispatch(this.leastBusy(), request) as Promise<DescribeOutcome>;
  }

  call(request: CallRequest, signal?: AbortSignal): Promise<CallOutcome> {
    let target = this.affinity.get(request.context.anima);
    // A process that crashed or retired fails only what was in flight there: while it restarts, its
    // Animas' calls go to a process that is up (their warm isolates are lost with it anyway).
    if (!target || (!target.available && this.processes.some((p) => p.available))) {
      if (target) target.animas--;
      target = this.leastBusy();
      target.animas++;
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

  /** True when request `id` was sent to process `index` (recent ids only; older ones count as sent). */
  wasSentTo(id: number, index: number): boolean {
    if (id >= this.nextId) return false;
    const recorded = this.sentTo.get(id);
    return recorded === undefined ? id < this.nextId - SENT_TO_REMEMBERED : recorded === index;
  }

  private remember(id: number, index: number): void {
    this.sentTo.set(id, index);
    this.sentTo.delete(id - SENT_TO_REMEMBERED);
  }

  /** The least busy process that is up, else the least busy of all (its request waits for the restart). */
  private leastBusy(): SandboxProcess {
    const up = this.processes.filter((p) => p.available);
    const candidates = up.length > 0 ? up : this.processes;
    let best = candidates[0] as SandboxProcess;
    // Ties (every process idle, as when first calls come one at a time) go to the process serving the
    // fewest Animas: otherwise every Anima would land on the first process, noisy ones beside quiet ones.
    for (const candidate of candidates) {
      if (candidate.load < best.load || (candidate.load === best.load && candidate.animas < best.animas)) best = candidate;
    }
    return best;
  }

  private dispatch(target: SandboxProcess, request: SandboxRequest, signal?: AbortSignal): Promise<CallOutcome | DescribeOutcome> {
    if (this.closing) {
      const error: ErrorInfo = { type: "SandboxCrashed", message: "the host is shutting down" };
      return Promise.resolve(request.op === "describe" ? { ok: false, error: { ...error, type: "LoadError" } } : { ok: false, error, durationMs: 0 });
    }
    const id = this.nextId++;
    this.remember(id, target.index);
    const ledger =
      request.op === "call"
        ? new CallLedger(request.context, { maxLogLines: request.maxLogLines, maxLogLineChars: request.maxLogLineChars }, this.budget, this.onRefusal)
        : undefined;
    const outcome = new Promise<CallOutcome | DescribeOutcome>((resolve) => {
      const timer = setTimeout(() => target.killForDeadline(id), request.timeoutMs + this.deadlineGraceMs);
      target.pending.set(id, { request, child: undefined, resolve, timer, startedAt: monotonicMs(), ledger });
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
