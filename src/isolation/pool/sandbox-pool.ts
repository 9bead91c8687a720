import type { ErrorInfo } from "../../errors.js";
import { type CapabilityLimits, CallLedger, CapabilityBudget } from "../call-ledger.js";
import type { CallContext, CapabilityInvoker, CallOutcome, CallRequest, DescribeOutcome, DescribeRequest, Executor, SandboxRequest, ToolLogLine } from "../wire/messages.js";
import { type Pending, type ProcessOwner, SandboxProcess } from "./child-handle.js";
import { type OsSandboxMode, type OsSandboxStatus, osSandboxStatus } from "../os/os-sandbox.js";
import { monotonicMs } from "../../clock.js";
import { Placement, isLongCall } from "../scheduling/placement.js";
import { processTreeCpu } from "../os/process-cpu.js";
import { LOW_PRIORITY_NICE, createRescheduler } from "../os/low-priority.js";

/**
 * Runs isolates in supervised sandbox processes, so that a V8 fatal error or a native crash in one
 * tool costs only the calls in flight in that process, never the host.
 *
 * Invariants:
 *  - Sandbox processes get an empty environment: nothing of the host's environment is there to leak.
 *  - Each Anima's calls go to one process at a time, where its warm isolates live; placement.ts says
 *    which, and when an idle Anima moves (its warm isolates in the process it left are dropped).
 *  - An Anima over its share (a long call, or calls back to back, in a process the host measured busy;
 *    placement.ts) has its calls run in a low-priority process (low-priority.ts: SCHED_IDLE, half the
 *    CPUs, nice 19), started on first use, so that it cannot take the cores from the quiet Animas' short
 *    calls. When a busy normal process's other calls cannot account for its CPU time, that process is
 *    demoted in place (its calls keep running, now at low priority, and it ends after them; a fresh
 *    process takes its slot): the call that made its Anima over its share does not hold a normal
 *    process's core until its deadline. At most one such demotion every `DEMOTE_IN_PLACE_EVERY_MS`
 *    (each starts a process). A process is judged only from `JUDGED_AFTER_READY_MS` after it started.
 *  - A call's deadline is kept where the call runs (the isolate's own timeout, in the sandbox process)
 *    and, when the caller has one, by the caller's signal: a background job's run signal aborts at the
 *    job's deadline, or when its cancel's grace ran out, and the call is stopped then (the `abort`
 *    message). The pool times nothing of its own for that deadline. Its one timer per request is the
 *    last-resort hard stop for a process that does not answer: `deadlineGraceMs` after the request's
 *    deadline (its `timeoutMs`), or after its signal aborted if that comes first. A process that misses
 *    it is killed; its calls fail with `SandboxCrashed` (the late call itself with `Timeout`, or as
 *    stopped by its caller), and a fresh process takes its place.
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
/** One process's warm pool, for the audit report. `undefined` figures: the process did not answer. */
export interface WarmPoolReport {
  pid: number | undefined;
  lowPriority: boolean;
  /** Animas whose calls go there. */
  animas: number;
  idleIsolates?: number;
  idleBytes?: number;
  maxIdleBytes?: number;
  evictions?: number;
}

export interface SandboxPoolOptions {
  /** Number of sandbox processes. Default: 2. */
  processes?: number;
  /** Memory the idle warm isolates of all processes may hold, MB (split evenly). Default: 1,024. */
  warmIsolatesMb?: number;
  /** Idle warm isolates kept per process at most. Default: no limit (the memory budget decides). */
  maxIdleIsolates?: number;
  /** Whether processes make isolates from a V8 startup snapshot of the prelude (`HostOptions.isolateSnapshot`). Default: true. */
  isolateSnapshot?: boolean;
  /**
   * Last-resort hard stop: how long a process has to answer a request past its deadline (its timeout), or
   * past the moment its caller's signal aborted, before the host kills the process, ms. Default: 2,000.
   */
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
  /** Receives what sandbox processes write to stderr, a line at a time (bounded). Default: this process's stderr. */
  onStderr?: (message: string) => void;
  /** Start sandbox processes inside bubblewrap (os-sandbox.ts): "auto", "required" or "off". Default: "auto". */
  osSandbox?: OsSandboxMode;
}

/** How often the host reads the CPU time of the sandbox processes while calls come, ms. */
const CPU_SAMPLE_MS = 250;
/** How long after the last call (with none in flight) the readings go on, ms. */
const CPU_SAMPLE_KEPT_MS = 2_000;
/**
 * A process is judged from this long after it said it was ready on, ms: its own start (the runner, the
 * first isolate of each Anima there, its code compiled) is no Anima's use, and on a loaded machine the
 * first calls there run long with it.
 */
const JUDGED_AFTER_READY_MS = 2 * CPU_SAMPLE_MS;
/**
 * A process is busy over a sample when its isolate threads used this many cores (tool code running), or
 * its whole tree `BUSY_TREE_CORES` (a tool keeping the process's main thread busy with the answers to a
 * flood of capability calls). A long call that mostly waits on the host's answers uses far less.
 */
const BUSY_CORES = 0.5;
const BUSY_TREE_CORES = 0.75;
/** A busy process whose long calls relayed this share of its capability bytes is theirs to demote in place. */
const LONG_CALLS_RELAY_SHARE = 0.9;
/** Demotions in place are this far apart at least, ms: each one starts a fresh process. */
const DEMOTE_IN_PLACE_EVERY_MS = 2_000;

/** Request ids whose process is remembered, to tell a late answer from a forged one. */
const SENT_TO_REMEMBERED = 65_536;

export class SandboxPool implements Executor, ProcessOwner {
  readonly maxIdleIsolates: number;
  readonly isolateSnapshot: boolean;
  /** Warm pool budget of each process, bytes. */
  readonly warmPoolBytes: number;
  readonly onLog: (line: ToolLogLine) => void;
  readonly invokeCapability: CapabilityInvoker;
  readonly onViolation: (message: string) => void;
  readonly onStderr: (message: string) => void;
  readonly osSandbox: OsSandboxStatus;
  readonly rescheduler = createRescheduler();
  closing = false;
  private readonly budget: CapabilityBudget;
  private readonly onRefusal: SandboxPoolOptions["onRefusal"];
  /** Which process each request id went to, for ids still remembered (see `wasSentTo`). */
  private readonly sentTo = new Map<number, number>();
  private readonly processes: SandboxProcess[];
  private readonly deadlineGraceMs: number;
  private lowPriority: SandboxProcess | undefined;
  private readonly placement: Placement<SandboxProcess>;
  private nextId = 1;
  private cpuTimer: NodeJS.Timeout | undefined;
  private lastCallAt = Number.NEGATIVE_INFINITY;
  private readonly cpuSamples = new Map<SandboxProcess, { at: number; offMainMs: number; totalMs: number }>();
  private lastDemotedInPlaceAt = Number.NEGATIVE_INFINITY;
  /** Each request's `relayedBytes` at the last sample. */
  private readonly relayedSeen = new WeakMap<Pending, number>();

  constructor(options: SandboxPoolOptions = {}) {
    this.maxIdleIsolates = options.maxIdleIsolates ?? Number.POSITIVE_INFINITY;
    this.isolateSnapshot = options.isolateSnapshot ?? true;
    this.onLog = options.onLog ?? (() => {});
    this.invokeCapability =
      options.invokeCapability ?? (async () => ({ ok: false, error: { type: "PermissionDenied", fault: "host", message: "capabilities are not available in this host" } }));
    this.deadlineGraceMs = options.deadlineGraceMs ?? 2_000;
    this.budget = new CapabilityBudget(options.capabilityLimits);
    this.onRefusal = options.onRefusal;
    this.onViolation = options.onViolation ?? (() => {});
    this.onStderr = options.onStderr ?? ((message) => process.stderr.write(`${message}\n`));
    // Throws for "required" without a working bwrap: before any process starts.
    this.osSandbox = osSandboxStatus(options.osSandbox ?? "auto");
    // Its spawn here, with the processes', rather than in the middle of the first demotion in place.
    this.rescheduler.prepare();
    const count = Math.max(1, Math.floor(options.processes ?? 2));
    this.warmPoolBytes = Math.floor(((options.warmIsolatesMb ?? 1_024) * 2 ** 20) / count);
    this.processes = Array.from({ length: count }, (_, index) => new SandboxProcess(index, this));
    this.placement = new Placement(this.processes, () => (this.lowPriority ??= new SandboxProcess(count, this, LOW_PRIORITY_NICE)));
  }

  describe(request: DescribeRequest): Promise<DescribeOutcome> {
    return this.dispatch(this.leastBusy(), request) as Promise<DescribeOutcome>;
  }

  call(request: CallRequest, signal?: AbortSignal): Promise<CallOutcome> {
    const anima = request.context.anima;
    const now = monotonicMs();
    const route = this.placement.route(anima, now);
    route.left?.forgetAnima(anima);
    const outcome = this.dispatch(route.target, request, signal, (id) => this.placement.started(anima, id, route.target, now)) as Promise<CallOutcome>;
    this.lastCallAt = now;
    this.cpuTimer ??= setInterval(() => this.sampleCpu(), CPU_SAMPLE_MS).unref();
    return outcome;
  }

  /**
   * Reads the CPU time of each process; one that was busy since the last reading has the Animas of its
   * long calls (`LONG_CALL_MS`, `demoteLongCallsOn`), and of calls back to back (`judgeBackToBack`),
   * demoted (again, for those already demoted), and, when its other calls cannot account for it being
   * busy, is itself demoted in place (see the invariants). Stops when nothing has been in flight for
   * `CPU_SAMPLE_KEPT_MS`.
   */
  private sampleCpu(): void {
    const now = monotonicMs();
    // Kept going a while after the last call, so that a call that turns long has a reading from before it
    // (then it is judged one sample after it turns long, not two).
    if (this.all().every((p) => p.load === 0) && now - this.lastCallAt > CPU_SAMPLE_KEPT_MS) {
      clearInterval(this.cpuTimer);
      this.cpuTimer = undefined;
      this.cpuSamples.clear();
      return;
    }
    // Every process, every time (a call is "long" for only part of a sample when calls restart at their
    // timeout), the low-priority one too: an Anima that keeps its calls there busy stays there. Each
    // reading covers the time since the previous one.
    const readings = this.all().map((process) => {
      process.recheckDemoted();
      const pid = process.pid;
      return {
        process,
        cpu: pid === undefined ? undefined : processTreeCpu(pid),
        callTime: this.placement.callTimeOn(process, now),
        relayed: this.relayedSince(process, now),
      };
    });
    const calling = new Set(readings.flatMap(({ callTime }) => [...callTime.byAnima.keys()]));
    for (const { process, cpu, callTime, relayed } of readings) {
      if (cpu === undefined) {
        this.cpuSamples.delete(process);
        continue;
      }
      const last = this.cpuSamples.get(process);
      this.cpuSamples.set(process, { at: now, offMainMs: cpu.offMainMs, totalMs: cpu.totalMs });
      if (last === undefined || now - last.at > 2 * CPU_SAMPLE_MS) continue;
      if (process.readyAt === undefined || now - process.readyAt < JUDGED_AFTER_READY_MS) continue;
      const cores = (ms: number) => ms / (now - last.at);
      const treeCores = cores(cpu.totalMs - last.totalMs);
      const busy = cores(cpu.offMainMs - last.offMainMs) >= BUSY_CORES || treeCores >= BUSY_TREE_CORES;
      this.placement.judgeBackToBack(process, callTime, busy, calling, now);
      if (!busy) continue;
      if (!this.placement.hasLongCallOn(process, now)) continue;
      const judged = this.placement.demoteLongCallsOn(process, now);
      // Not while the long calls' Animas are held for the next reading (more than one had one).
      if (judged.size === 0 || process === this.lowPriority || now - this.lastDemotedInPlaceAt < DEMOTE_IN_PLACE_EVERY_MS) continue;
      // In place only when the long calls are what keeps the process busy: its isolate threads busy
      // beyond what the other calls could account for (each uses at most a core while it runs), or its
      // capability traffic almost all theirs.
      const spinning = cores(cpu.offMainMs - last.offMainMs) - cores(callTime.shortMs) >= BUSY_CORES;
      const relaying = treeCores >= BUSY_TREE_CORES && relayed.long > 0 && relayed.long >= LONG_CALLS_RELAY_SHARE * relayed.all;
      if ((spinning || relaying) && process.demoteRunning()) {
        this.placement.movedOff(process, now, judged);
        this.cpuSamples.delete(process);
        this.lastDemotedInPlaceAt = now;
      }
    }
  }

  /** Bytes of capability traffic relayed on `process`'s running child since the last sample: for its long calls, and for all. */
  private relayedSince(process: SandboxProcess, now: number): { long: number; all: number } {
    const relayed = { long: 0, all: 0 };
    for (const pending of process.pending.values()) {
      if (pending.child === undefined || pending.child !== process.child) continue;
      const bytes = pending.relayedBytes - (this.relayedSeen.get(pending) ?? 0);
      this.relayedSeen.set(pending, pending.relayedBytes);
      relayed.all += bytes;
      if (isLongCall(pending.startedAt, now)) relayed.long += bytes;
    }
    return relayed;
  }

  /** Process ids of the sandbox processes, the low-priority one last once started (for supervision tests and operators). */
  pids(): Array<number | undefined> {
    return this.all().map((p) => p.pid);
  }

  /** Process id of the sandbox process an Anima's calls go to, if it has made any. */
  pidFor(anima: string): number | undefined {
    return (this.placement.isDemoted(anima, monotonicMs()) ? this.lowPriority : this.placement.homeOf(anima))?.pid;
  }

  /** What each process's warm pool holds now, as the processes report it (for operators; no limit relies on it). */
  async warmPoolStats(): Promise<WarmPoolReport[]> {
    return Promise.all(
      this.all().map(async (p) => ({ pid: p.pid, lowPriority: p === this.lowPriority, animas: this.placement.animasOf(p), ...(await p.warmPoolStats()) })),
    );
  }

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.cpuTimer);
    for (const process of this.all()) process.failAll({ type: "SandboxCrashed", fault: "host", message: "the host is shutting down" });
    await Promise.all(this.all().map((p) => p.stop()));
    this.rescheduler.stop();
  }

  /** Told by a process when a call it ran has ended (for placement's busy figures). */
  ended(anima: string, id: number): void {
    this.placement.finished(anima, id, monotonicMs());
  }

  /** Told by a process when a call that waited for it to start was sent to it (see `Placement.sent`). */
  sentAfterStart(anima: string, id: number): void {
    this.placement.sent(anima, id, monotonicMs());
  }

  private all(): SandboxProcess[] {
    return this.lowPriority ? [...this.processes, this.lowPriority] : this.processes;
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

  /** The process that is up with the fewest requests in flight (describe requests have no Anima to place). */
  private leastBusy(): SandboxProcess {
    const up = this.processes.filter((p) => p.available);
    const candidates = up.length > 0 ? up : this.processes;
    return candidates.reduce((best, candidate) => (candidate.load < best.load ? candidate : best));
  }

  private dispatch(target: SandboxProcess, request: SandboxRequest, signal?: AbortSignal, onId?: (id: number) => void): Promise<CallOutcome | DescribeOutcome> {
    if (this.closing) {
      const error: ErrorInfo = { type: "SandboxCrashed", fault: "host", message: "the host is shutting down" };
      return Promise.resolve(request.op === "describe" ? { ok: false, error: { ...error, type: "LoadError" } } : { ok: false, error, durationMs: 0 });
    }
    const id = this.nextId++;
    onId?.(id);
    this.remember(id, target.index);
    const ledger =
      request.op === "call"
        ? new CallLedger(request.context, { maxLogLines: request.maxLogLines, maxLogLineChars: request.maxLogLineChars }, this.budget, this.onRefusal)
        : undefined;
    const outcome = new Promise<CallOutcome | DescribeOutcome>((resolve) => {
      // The last-resort hard stop (see the invariants), derived from the request's deadline.
      const killAfterMs = request.timeoutMs + this.deadlineGraceMs;
      const timer = setTimeout(() => target.killUnanswered(id, "deadline"), killAfterMs);
      const startedAt = monotonicMs();
      target.pending.set(id, { request, child: undefined, resolve, timer, killAt: startedAt + killAfterMs, startedAt, ledger, relayedBytes: 0 });
      target.send({ type: "request", id, request });
    });
    if (!signal) return outcome;
    // The sandbox disposes the call's isolate and answers as usual; a process that does not answer within
    // `deadlineGraceMs` of the stop is killed (the hard stop moves earlier, never later).
    const abort = () => target.abort(id, this.deadlineGraceMs);
    if (signal.aborted) abort();
    else signal.addEventListener("abort", abort, { once: true });
    return outcome.finally(() => signal.removeEventListener("abort", abort));
  }
}
