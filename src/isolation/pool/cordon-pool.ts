import { CallLedger, type CapabilityBudget } from "../call-ledger.js";
import {
  type CapabilityInvoker,
  type CallContext,
  type CallOutcome,
  type CallRequest,
  type DescribeOutcome,
  type DescribeRequest,
  type SandboxRequest,
  type ToolLogLine,
  labelled,
} from "../wire/messages.js";
import { SandboxProcess } from "./child-handle.js";
import { type Pending, type ProcessOwner, placedAnima, shuttingDown } from "./process-owner.js";
import type { OsSandboxStatus } from "../os/os-sandbox.js";
import type { ChildLink, ProcessGuard } from "./child-link.js";
import type { LiveChildren } from "./live-children.js";
import type { PythonInterpreterSettings } from "../isolate/isolate-runner-options.js";
import type { Rescheduler } from "../os/rescheduler.js";
import { monotonicMs } from "../../clock.js";
import { Placement } from "../scheduling/placement.js";
import { BootAllowances } from "../scheduling/boot-allowance.js";
import { type HeldJudgments, NOTHING_HELD, type ProcessReading, THRESHOLDS, judgeReadings } from "../scheduling/judge.js";
import { processTreeCpu } from "../os/process-cpu.js";
import { LOW_PRIORITY_NICE } from "../os/low-priority.js";
import { HeldChars } from "../wire/parts.js";

/**
 * The sandbox processes of one cordon (scheduling/cordons.ts; the pool, sandbox-pool.ts, keeps one per
 * cordon in use), so that a V8 fatal error or a native crash in one tool costs only the calls in flight
 * in that process, never the host, and code that escaped an isolate reaches no other cordon.
 *
 * Invariants:
 *  - Sandbox processes get an empty environment: nothing of the host's environment is there to leak.
 *  - Each Anima's calls go to one process at a time, where its warm isolates live; placement.ts says
 *    which, and when an idle Anima moves (its warm isolates in the process it left are dropped).
 *  - The pool measures and acts; the judge (scheduling/judge.ts, docs/scheduling.md) decides. While
 *    calls come it reads every process's CPU time from /proc every `THRESHOLDS.readEveryMs`, with its
 *    calls (placement.ts) and capability traffic, and hands the readings to the judge. An Anima the judge
 *    finds over its share has its calls run in a low-priority process (low-priority.ts: SCHED_IDLE,
 *    half the CPUs, nice 19), started on first use, so that it cannot take the cores from the quiet
 *    Animas' short calls. A process the judge names is demoted in place (its calls keep running, now at
 *    low priority, and it ends after them; a fresh process takes its slot): the call that made its Anima
 *    over its share does not hold a normal process's core until its deadline.
 *  - A call's deadline is kept where the call runs (the isolate's own timeout, in the sandbox process)
 *    and, when the caller has one, by the caller's signal: a background job's run signal aborts at the
 *    job's deadline, or when its cancel's grace ran out, and the call is stopped then (the `abort`
 *    message). The pool times nothing of its own for that deadline. Its one timer per request is the
 *    last-resort hard stop for a process that does not answer: `deadlineGraceMs` after the request's
 *    deadline (its `timeoutMs`), or after its signal aborted if that comes first. A process that misses
 *    it is killed; its calls fail with `SandboxCrashed` (the late call itself with `Timeout`, or as
 *    stopped by its caller), and a fresh process takes its place.
 *  - A process that lost an isolate's thread says it is `retiring`: it gets no new requests, and is
 *    killed once it has answered what it has (its calls are tracked per child, so its exit fails only
 *    its own stragglers). Its replacement starts as slot-restarts.ts allows: a retirement counts toward
 *    the restart backoff like a crash, since any process may say it.
 *  - The operator's log sink is called inside try/catch: a throwing sink never becomes an uncaught error.
 *  - A sandbox process holds no authority. Its messages are decoded against the protocol's union and
 *    name only the id of a request the host sent to that very process and that is still in flight; the
 *    host takes the Anima, its directory, the tool and the job from its own record of that request, and
 *    keeps the call's limits on its own counts (`CallLedger`). A message that fails to decode, names a
 *    request the host never sent to that process, or claims anything else is a protocol violation: it
 *    is reported, and the process is killed and replaced (its calls in flight fail as `SandboxCrashed`).
 *    It is told no more than it needs: a call's label (the Anima's name and the tool), never the host's
 *    record of the call (`labelled`).
 */

/** One process's warm pool, for the audit report. `undefined` figures: the process did not answer. */
export interface WarmPoolReport {
  pid: number | undefined;
  /** The cordon the process serves (scheduling/cordons.ts), or "spare" for a blank one. */
  cordon: string;
  lowPriority: boolean;
  /** Animas whose calls go there. */
  animas: number;
  idleIsolates?: number;
  idleBytes?: number;
  maxIdleBytes?: number;
  evictions?: number;
  idleInterpreters?: number;
  spareInterpreters?: number;
  compactions?: number;
}

/** What the cordons' pools share: their settings, the host's capability budget, request ids, spares. */
export interface PoolShared extends Omit<ProcessOwner, "cordon" | "closing" | "ended" | "sentAfterStart" | "warmPoolBytes" | "heldParts" | "roomForOne"> {
  readonly budget: CapabilityBudget;
  /** Characters of parts each cordon's processes may hold together, and the host's budget of them all (wire/parts.ts). */
  readonly heldPartLimits: { readonly perCordonChars: number; readonly host: HeldChars };
  readonly deadlineGraceMs: number;
  readonly onRefusal: ConstructorParameters<typeof CallLedger<CallContext>>[3];
  /** A number no other sandbox process of the host has (request ids are remembered per process number). */
  nextProcessIndex(): number;
  /** A request id no other request of the host has, remembered as sent to process `index`. */
  nextRequestId(index: number): number;
  /** `ProcessOwner.roomForOne` for `asker`, which is never the cordon ended for it. */
  roomForOne(asker: CordonPool): Promise<unknown> | undefined;
}

export class CordonPool implements ProcessOwner {
  readonly guard: ProcessGuard | undefined;
  readonly live: LiveChildren;
  readonly entryScript: string | undefined;
  readonly maxIdleIsolates: number;
  readonly isolateSnapshot: boolean;
  readonly pythonInterpreters: PythonInterpreterSettings;
  readonly compactIdleAfterMs: number;
  readonly toolsPerIsolate: number;
  readonly onLog: (line: ToolLogLine) => void;
  readonly invokeCapability: CapabilityInvoker;
  readonly onViolation: (message: string, cordon?: string) => void;
  readonly onStderr: (message: string) => void;
  readonly osSandbox: OsSandboxStatus;
  readonly rescheduler: Rescheduler;
  /** One budget for every process of this cordon: a demoted or retiring process's parts count until it ends. */
  readonly heldParts: { readonly cordon: HeldChars; readonly host: HeldChars };
  closing = false;
  private readonly processes: SandboxProcess[];
  private lowPriority: SandboxProcess | undefined;
  private readonly placement: Placement<SandboxProcess>;
  private readonly bootAllowances = new BootAllowances();
  private cpuTimer: NodeJS.Timeout | undefined;
  private lastCallAt = Number.NEGATIVE_INFINITY;
  private readonly cpuSamples = new Map<SandboxProcess, { at: number; offMainMs: number; totalMs: number }>();
  private lastDemotedInPlaceAt = Number.NEGATIVE_INFINITY;
  /** The judge's judgments waiting for the next reading (kept across pauses of the readings, as the judge expects). */
  private held: HeldJudgments = NOTHING_HELD;
  /** Each request's `relayedBytes` at the last sample. */
  private readonly relayedSeen = new WeakMap<Pending, number>();

  /**
   * @param cordon the cordon's name (scheduling/cordons.ts)
   * @param count its normal processes; a low-priority one is started on first use
   * @param warmPoolBytes warm pool budget of each of its processes, bytes
   */
  constructor(
    private readonly shared: PoolShared,
    readonly cordon: string,
    count: number,
    readonly warmPoolBytes: number,
    /** When given, the cordon's processes start once it settles (sandbox-pool.ts `poolOf`). */
    startAfter?: Promise<unknown>,
  ) {
    this.guard = shared.guard;
    this.live = shared.live;
    this.entryScript = shared.entryScript;
    this.maxIdleIsolates = shared.maxIdleIsolates;
    this.isolateSnapshot = shared.isolateSnapshot;
    this.pythonInterpreters = shared.pythonInterpreters;
    this.compactIdleAfterMs = shared.compactIdleAfterMs;
    this.toolsPerIsolate = shared.toolsPerIsolate;
    this.onLog = shared.onLog;
    this.invokeCapability = shared.invokeCapability;
    this.onViolation = shared.onViolation;
    this.onStderr = shared.onStderr;
    this.osSandbox = shared.osSandbox;
    this.rescheduler = shared.rescheduler;
    this.heldParts = { cordon: new HeldChars(shared.heldPartLimits.perCordonChars), host: shared.heldPartLimits.host };
    this.processes = Array.from({ length: Math.max(1, Math.floor(count)) }, () => new SandboxProcess(shared.nextProcessIndex(), this, 0, startAfter));
    // The low-priority process is one more of the pool's: it starts once idle cordons made room for it
    // (demoted_anima_past_process_cap), and the demoted Anima's calls wait for it meanwhile.
    this.placement = new Placement(
      this.processes,
      () => (this.lowPriority ??= new SandboxProcess(shared.nextProcessIndex(), this, LOW_PRIORITY_NICE, this.roomForOne())),
    );
  }

  /** A blank process ready to serve this cordon (`SandboxProcess` adopts it), if the pool has one. */
  takeSpare(nice: number): { link: ChildLink; ready: boolean } | undefined {
    return this.shared.takeSpare(nice);
  }

  atProcessCap(): boolean {
    return this.shared.atProcessCap();
  }

  roomForOne(): Promise<unknown> | undefined {
    return this.shared.roomForOne(this);
  }

  /** Slots of this cordon with no process of their own now (one is due to start: see SlotRestarts). */
  get slotsWaiting(): number {
    return this.all().filter((p) => p.child === undefined).length;
  }

  /** Requests in flight on this cordon's processes. */
  get load(): number {
    return this.all().reduce((sum, process) => sum + process.load, 0);
  }

  /**
   * A personal Python tool's load runs its code (its top level, `get_tool_schemas`) for its owner, for up
   * to its load timeout plus an interpreter's boot (30 s): it is placed, measured and judged as one of the
   * owner's calls, so a load that spins is demoted like a call that does. A JavaScript tool's load keeps
   * its load timeout (5 s by default) and a failed version's retry backoff (registry.ts) as its bounds, and
   * goes to the least busy process: judging it too demoted honest Animas whose first load ran long on a
   * fresh process of a saturated machine, and then timed out. A tool without an owner is described in a
   * one-shot pool of its own (sandbox-pool.ts), no Anima's. Which is which: `placedAnima`, which the
   * processes use too when they tell when a request was sent and ended.
   */
  describe(request: DescribeRequest): Promise<DescribeOutcome> {
    const owner = placedAnima(request);
    if (owner === undefined) return this.dispatch(this.leastBusy(), request) as Promise<DescribeOutcome>;
    return this.placed(owner, request) as Promise<DescribeOutcome>;
  }

  call(request: CallRequest, signal?: AbortSignal): Promise<CallOutcome> {
    return this.placed(request.context.anima, request, signal) as Promise<CallOutcome>;
  }

  /** Sends `anima`'s request where placement says, tracked there as its call (the judge reads it). */
  private placed(anima: string, request: SandboxRequest, signal?: AbortSignal): Promise<CallOutcome | DescribeOutcome> {
    const now = monotonicMs();
    const route = this.placement.route(anima, now);
    route.left?.forgetAnima(anima);
    // A request that must boot a Python interpreter first gets its Anima's boot allowance, if any is left
    // (boot-allowance.ts). Known from what the host sent, never from the process.
    const sent = route.target.interpreters.sent(request, now);
    const graceMs = sent.needsBoot ? this.bootAllowances.grant(route.target.index, anima, now) : 0;
    const outcome = this.dispatch(route.target, request, signal, (id) => this.placement.started(anima, id, route.target, now, graceMs));
    // Before the caller's own continuation: its next request is predicted knowing how this one ended.
    void outcome.then(
      (ended) => sent.ended(ended, monotonicMs()),
      () => sent.ended(undefined, monotonicMs()),
    );
    this.lastCallAt = now;
    this.cpuTimer ??= setInterval(() => this.readAndJudge(), THRESHOLDS.readEveryMs).unref();
    return outcome;
  }

  /**
   * Reads every process, hands the readings to the judge and carries out its decisions: the Animas it
   * finds over their share are demoted, and the first process it names that can be is demoted in place.
   * Stops when nothing has been in flight for `THRESHOLDS.readingsKeptMs`.
   */
  private readAndJudge(): void {
    const now = monotonicMs();
    if (this.all().every((p) => p.load === 0) && now - this.lastCallAt > THRESHOLDS.readingsKeptMs) {
      clearInterval(this.cpuTimer);
      this.cpuTimer = undefined;
      this.cpuSamples.clear();
      return;
    }
    // Every process, every time (a call is "long" for only part of a window when calls restart at their
    // timeout), the low-priority one too. Each reading covers the time since the previous one.
    const processes = this.all();
    const decisions = judgeReadings(
      { nowMs: now, lastDemotedInPlaceAtMs: this.lastDemotedInPlaceAt, processes: processes.map((process) => this.read(process, now)) },
      this.held,
    );
    this.held = decisions.held;
    for (const { anima, untilMs } of decisions.demote) this.placement.demote(anima, untilMs);
    for (const { slot, longCallIds } of decisions.demoteInPlace) {
      const process = processes.find((p) => p.index === slot);
      if (!process?.demoteRunning()) continue;
      this.placement.movedOff(process, new Set(longCallIds));
      this.cpuSamples.delete(process); // its fresh child's CPU time starts from nothing
      this.lastDemotedInPlaceAt = now;
      break;
    }
  }

  /** What the judge needs of `process` since its previous reading; starts the next window. */
  private read(process: SandboxProcess, now: number): ProcessReading {
    process.recheckDemoted();
    const pid = process.pid;
    const cpu = pid === undefined ? undefined : processTreeCpu(pid);
    const last = this.cpuSamples.get(process);
    if (cpu === undefined) this.cpuSamples.delete(process);
    else this.cpuSamples.set(process, { at: now, offMainMs: cpu.offMainMs, totalMs: cpu.totalMs });
    return {
      slot: process.index,
      lowPriority: process === this.lowPriority,
      readyAtMs: process.readyAt,
      cpu:
        cpu === undefined || last === undefined
          ? undefined
          : { sinceMs: last.at, offMainMs: cpu.offMainMs - last.offMainMs, treeMs: cpu.totalMs - last.totalMs },
      ...this.placement.callWindowOn(process, now),
      relayed: this.relayedSince(process),
    };
  }

  /** Bytes of capability traffic relayed on `process`'s running child since the last reading, per request. */
  private relayedSince(process: SandboxProcess): ProcessReading["relayed"] {
    const relayed: Array<{ startedAtMs: number; bytes: number }> = [];
    for (const pending of process.pending.values()) {
      if (pending.child === undefined || pending.child !== process.child) continue;
      relayed.push({ startedAtMs: pending.startedAt, bytes: pending.relayedBytes - (this.relayedSeen.get(pending) ?? 0) });
      this.relayedSeen.set(pending, pending.relayedBytes);
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
      this.all().map(async (p) => ({
        pid: p.pid,
        cordon: this.cordon,
        lowPriority: p === this.lowPriority,
        animas: this.placement.animasOf(p),
        ...(await p.warmPoolStats()),
      })),
    );
  }

  /** Ends the cordon's processes; `graceMs`: how long each may take to shut down before it is killed. */
  async close(graceMs?: number): Promise<void> {
    this.closing = true;
    clearInterval(this.cpuTimer);
    for (const process of this.all()) process.failAll({ type: "SandboxCrashed", fault: "host", message: "the host is shutting down" });
    await Promise.all(this.all().map((p) => p.stop(graceMs)));
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

  wasSentTo(id: number, index: number): boolean {
    return this.shared.wasSentTo(id, index);
  }

  /** The process that is up with the fewest requests in flight (a describe without an owner has no Anima to place). */
  private leastBusy(): SandboxProcess {
    const up = this.processes.filter((p) => p.available);
    const candidates = up.length > 0 ? up : this.processes;
    return candidates.reduce((best, candidate) => (candidate.load < best.load ? candidate : best));
  }

  private dispatch(target: SandboxProcess, request: SandboxRequest, signal?: AbortSignal, onId?: (id: number) => void): Promise<CallOutcome | DescribeOutcome> {
    if (this.closing) return Promise.resolve(shuttingDown(request.op));
    const id = this.shared.nextRequestId(target.index);
    onId?.(id);
    const ledger =
      request.op === "call"
        ? new CallLedger(
            request.context,
            { maxLogLines: request.maxLogLines, maxLogLineChars: request.maxLogLineChars },
            this.shared.budget,
            this.shared.onRefusal,
          )
        : undefined;
    const outcome = new Promise<CallOutcome | DescribeOutcome>((resolve) => {
      // The last-resort hard stop (see the invariants), derived from the request's deadline.
      const killAfterMs = request.timeoutMs + this.shared.deadlineGraceMs;
      const timer = setTimeout(() => target.killUnanswered(id, "deadline"), killAfterMs);
      const startedAt = monotonicMs();
      target.pending.set(id, {
        request,
        child: undefined,
        resolve,
        timer,
        killAt: startedAt + killAfterMs,
        hardStopMs: killAfterMs,
        startedAt,
        ledger,
        relayedBytes: 0,
      });
      // The process is told the call's label only: the host's record of it (its folder…) stays in `pending`.
      target.send({ type: "request", id, request: labelled(request) });
    });
    if (!signal) return outcome;
    // The sandbox disposes the call's isolate and answers as usual; a process that does not answer within
    // `deadlineGraceMs` of the stop is killed (the hard stop moves earlier, never later).
    const abort = () => target.abort(id, this.shared.deadlineGraceMs);
    if (signal.aborted) abort();
    else signal.addEventListener("abort", abort, { once: true });
    return outcome.finally(() => signal.removeEventListener("abort", abort));
  }
}
