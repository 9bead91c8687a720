import PQueue from "p-queue";
import type { ErrorInfo } from "../../errors.js";
import { type CapabilityBytesReport, type CapabilityLimits, CapabilityBudget } from "../call-ledger.js";
import type { CallContext, CallOutcome, CallRequest, CapabilityInvoker, DescribeOutcome, DescribeRequest, Executor, ToolLogLine } from "../wire/messages.js";
import { type OsSandboxMode, type OsSandboxStatus, osSandboxStatus } from "../os/os-sandbox.js";
import { createRescheduler } from "../os/low-priority.js";
import { type CordonSetting, cordonOf } from "../scheduling/cordons.js";
import { CordonPool, type PoolShared, type WarmPoolReport } from "./cordon-pool.js";
import { shuttingDown, spawnSpec } from "./process-owner.js";
import { LiveChildren } from "./live-children.js";
import { DEFAULT_PYTHON_INTERPRETERS, type PythonInterpreterSettings, TOOLS_PER_ISOLATE } from "../isolate/isolate-runner-options.js";
import { COMPACT_IDLE_AFTER_MS } from "../isolate/idle-compaction.js";
import { SpareProcesses } from "./spare-processes.js";
import { ResourceWatchdog, defaultResourceLimits, watchdogStatus } from "../os/resource-watchdog.js";
import { HOST_HELD_PART_CHARS, type HeldChars, MAX_HELD_PART_CHARS_PER_CORDON } from "../wire/parts.js";

export type { WarmPoolReport };

/**
 * Runs isolates in supervised sandbox processes, one set of processes per cordon (scheduling/cordons.ts):
 * a sandbox process runs the code of one cordon only, for its whole life, so that code that escaped an
 * isolate reaches nothing of another cordon's Animas.
 *
 * Invariants (each cordon's pool keeps its own: cordon-pool.ts):
 *  - A process is started blank (a spare, or for its slot) and then belongs to one cordon until it ends;
 *    evicting a cordon ends its processes.
 *  - A personal tool is described in its Anima's cordon, which runs it anyway; a tool without an owner
 *    (core, shared, a job's pinned version) in a process that serves nothing else and is ended after
 *    that one description, so that no description can be forged by another tool's code.
 *  - At most `maxProcesses` processes live, counted as the host started them and has not seen them end
 *    (live-children.ts: spares, retiring, demoted and killed ones included), plus the slots due to
 *    start one: a cordon needing its first process when the pool is full evicts the cordon least
 *    recently used that has no request in flight and starts once its processes (those its slots left,
 *    retiring ones too) have ended; so does a cordon's low-priority process, and the process replacing
 *    one demoted in place (`roomForOne`); and a slot replacing a process that is still alive waits for
 *    it to end (slot-restarts.ts). Only when every cordon has requests in flight does the pool go over
 *    (the per-Anima queues bound that), by no more than a process each of its slots left.
 *  - Request ids and process numbers are unique across cordons: a process that names another cordon's
 *    request is a violation (child-handle.ts), never served.
 */
export interface SandboxPoolOptions {
  /** How Animas are grouped into cordons (scheduling/cordons.ts). Default: "anima" (one cordon each). */
  cordons?: CordonSetting;
  /** Normal sandbox processes per cordon. Default: 2 when all Animas share one cordon, else 1. */
  processes?: number;
  /** Sandbox processes alive at most, spares, retiring and demoted ones included (each idle one holds ≈ 50 MB). Default: 64. */
  maxProcesses?: number;
  /** Blank processes kept started and ready for the first call of a new cordon. Default: 1 (0 when all Animas share one cordon). */
  spareProcesses?: number;
  /**
   * Memory the idle warm isolates may hold, MB: split between the processes of the one cordon when all
   * Animas share it, else between `maxProcesses`. Default: 1,024.
   */
  warmIsolatesMb?: number;
  /** Idle warm isolates kept per process at most. Default: no limit (the memory budget decides). */
  maxIdleIsolates?: number;
  /** Whether processes make isolates from a V8 startup snapshot of the prelude (`HostOptions.isolateSnapshot`). Default: true. */
  isolateSnapshot?: boolean;
  /** The Python interpreters each process keeps between calls (`HostOptions.warmPythonInterpreters`, `sparePythonInterpreter`). Default: 2 warm, a spare. */
  pythonInterpreters?: PythonInterpreterSettings;
  /** Idle time before a process compacts an isolate, ms; 0 never (`HostOptions.compactIdleIsolatesAfterMs`). Default: `COMPACT_IDLE_AFTER_MS`. */
  compactIdleAfterMs?: number;
  /** Tools of one Anima whose contexts one warm isolate may hold (`HostOptions.toolsPerIsolate`). Default: `TOOLS_PER_ISOLATE`. */
  toolsPerIsolate?: number;
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
  onViolation?: (message: string, cordon?: string) => void;
  /** Receives what sandbox processes write to stderr, a line at a time (bounded). Default: this process's stderr. */
  onStderr?: (message: string) => void;
  /** Start sandbox processes inside bubblewrap (os-sandbox.ts): "auto", "required" or "off". Default: "auto". */
  osSandbox?: OsSandboxMode;
  /**
   * A script the sandbox processes run instead of their entry, under the same launch: for tests that
   * play a compromised sandbox process. Not a host option; never set from configuration.
   */
  entryScript?: string;
  /**
   * Characters of large strings' parts each cordon's processes may have the host hold together, and the
   * host's budget of them all (wire/parts.ts): for tests that fill them with little. Not a host option.
   * Defaults: `MAX_HELD_PART_CHARS_PER_CORDON`, `HOST_HELD_PART_CHARS`.
   */
  heldPartLimits?: { perCordonChars?: number; host?: HeldChars };
}

/** Request ids whose process is remembered, to tell a late answer from a forged one. */
const SENT_TO_REMEMBERED = 65_536;
/** Descriptions of tools without an owner made at once, each in a process of its own. */
const DESCRIBERS_AT_ONCE = 2;

export class SandboxPool implements Executor {
  readonly osSandbox: OsSandboxStatus;
  readonly cordons: CordonSetting;
  private readonly shared: PoolShared;
  /** Each cordon's pool, least recently used first. */
  private readonly pools = new Map<string, CordonPool>();
  /** One-shot pools describing tools without an owner. */
  private readonly describers = new Set<CordonPool>();
  private readonly describeQueue = new PQueue({ concurrency: DESCRIBERS_AT_ONCE });
  private readonly spares: SpareProcesses;
  private readonly watchdog: ResourceWatchdog;
  /** Every process started and not yet seen to end, whoever holds it (live-children.ts). */
  private readonly live = new LiveChildren();
  private readonly processesPerCordon: number;
  private readonly maxProcesses: number;
  private readonly warmPoolBytes: number;
  private readonly sentTo = new Map<number, number>();
  private nextId = 1;
  private nextIndex = 0;
  private nextDescriber = 1;
  private closing = false;

  constructor(options: SandboxPoolOptions = {}) {
    this.cordons = options.cordons ?? "anima";
    // Throws for "required" without a working bwrap: before any process starts.
    this.osSandbox = osSandboxStatus(options.osSandbox ?? "auto");
    this.processesPerCordon = Math.max(1, Math.floor(options.processes ?? (this.cordons === "all" ? 2 : 1)));
    this.maxProcesses = Math.max(1, Math.floor(options.maxProcesses ?? 64));
    const sharers = this.cordons === "all" ? this.processesPerCordon : this.maxProcesses;
    this.warmPoolBytes = Math.floor(((options.warmIsolatesMb ?? 1_024) * 2 ** 20) / sharers);
    const rescheduler = createRescheduler();
    this.watchdog = new ResourceWatchdog();
    const guard = watchdogStatus().holds
      ? {
          watchdog: this.watchdog,
          limits: defaultResourceLimits(this.warmPoolBytes),
          childrenFixedUnderSeccomp: this.osSandbox.enabled && this.osSandbox.seccomp,
        }
      : undefined;
    // Its spawn here, with the processes', rather than in the middle of the first demotion in place.
    rescheduler.prepare();
    this.shared = {
      guard,
      live: this.live,
      entryScript: options.entryScript,
      maxIdleIsolates: options.maxIdleIsolates ?? Number.POSITIVE_INFINITY,
      isolateSnapshot: options.isolateSnapshot ?? true,
      pythonInterpreters: options.pythonInterpreters ?? DEFAULT_PYTHON_INTERPRETERS,
      compactIdleAfterMs: options.compactIdleAfterMs ?? COMPACT_IDLE_AFTER_MS,
      toolsPerIsolate: options.toolsPerIsolate ?? TOOLS_PER_ISOLATE,
      onLog: options.onLog ?? (() => {}),
      invokeCapability:
        options.invokeCapability ??
        (async () => ({ ok: false, error: { type: "PermissionDenied", fault: "host", message: "capabilities are not available in this host" } })),
      onViolation: options.onViolation ?? (() => {}),
      onStderr: options.onStderr ?? ((message) => process.stderr.write(`${message}\n`)),
      osSandbox: this.osSandbox,
      rescheduler,
      budget: new CapabilityBudget(options.capabilityLimits),
      heldPartLimits: {
        perCordonChars: options.heldPartLimits?.perCordonChars ?? MAX_HELD_PART_CHARS_PER_CORDON,
        host: options.heldPartLimits?.host ?? HOST_HELD_PART_CHARS,
      },
      deadlineGraceMs: options.deadlineGraceMs ?? 2_000,
      onRefusal: options.onRefusal,
      nextProcessIndex: () => this.nextIndex++,
      nextRequestId: (index) => this.remember(index),
      wasSentTo: (id, index) => this.wasSentTo(id, index),
      takeSpare: (nice) => (nice === 0 ? this.spares.take() : undefined),
      atProcessCap: () => this.liveProcesses() >= this.maxProcesses,
      roomForOne: (asker) => {
        const evicted = this.closing ? [] : this.evictFor(1, asker);
        return evicted.length > 0 ? Promise.all(evicted) : undefined;
      },
    };
    const spec = { ...spawnSpec({ ...this.shared, warmPoolBytes: this.warmPoolBytes }, 0), warmUp: true };
    // With one cordon for all, its processes are started at once: a spare would serve no one.
    const spares = options.spareProcesses ?? (this.cordons === "all" ? 0 : 1);
    this.spares = new SpareProcesses(
      Math.max(0, Math.floor(spares)),
      spec,
      () => this.liveProcesses() < this.maxProcesses,
      this.shared.onStderr,
      this.shared.onViolation,
      guard,
      this.live,
    );
    // All Animas in one cordon: its processes start now, as the host's did before cordons.
    if (this.cordons === "all") this.poolOf("all");
    this.spares.fill();
  }

  call(request: CallRequest, signal?: AbortSignal): Promise<CallOutcome> {
    // Once closing, no cordon's pool is made (its processes would start after the close).
    if (this.closing) return Promise.resolve(shuttingDown("call") as CallOutcome);
    return this.poolOf(cordonOf(this.cordons, request.context.anima)).call(request, signal);
  }

  describe(request: DescribeRequest): Promise<DescribeOutcome> {
    if (this.closing) return Promise.resolve(shuttingDown("describe") as DescribeOutcome);
    if (request.owner !== undefined) return this.poolOf(cordonOf(this.cordons, request.owner)).describe(request);
    return this.describeQueue.add<DescribeOutcome>(async () => {
      const describer = new CordonPool(this.shared, `describe:${this.nextDescriber++}`, 1, this.warmPoolBytes);
      this.describers.add(describer);
      try {
        return await describer.describe(request);
      } finally {
        this.describers.delete(describer);
        void describer.close();
      }
    });
  }

  /** Process ids of the sandbox processes of all cordons (spares not included). */
  pids(): Array<number | undefined> {
    return [...this.pools.values()].flatMap((pool) => pool.pids());
  }

  /** Process id of the sandbox process an Anima's calls go to, if it has made any. */
  pidFor(anima: string): number | undefined {
    return this.pools.get(cordonOf(this.cordons, anima))?.pidFor(anima);
  }

  /** The memory limit the watchdog holds sandbox process `pid` to now, bytes (undefined: not watched). */
  memoryLimitBytesOf(pid: number): number | undefined {
    return this.watchdog.limitsOf(pid)?.memoryBytes;
  }

  /** The host's capability byte budgets: what is in flight now, and the most that was (call-ledger.ts). */
  capabilityBytes(): CapabilityBytesReport {
    return this.shared.budget.report();
  }

  /** Spare processes started and ready for a new cordon. */
  sparesReady(): number {
    return this.spares.readyCount;
  }

  /** Process ids of the blank spare processes. */
  sparePids(): number[] {
    return this.spares.pids();
  }

  /** What each process's warm pool holds now, as the processes report it (for operators; no limit relies on it). */
  async warmPoolStats(): Promise<WarmPoolReport[]> {
    const reports = await Promise.all([...this.pools.values()].map((pool) => pool.warmPoolStats()));
    const spares = this.spares.pids().map((pid): WarmPoolReport => ({ pid, cordon: "spare", lowPriority: false, animas: 0 }));
    return [...reports.flat(), ...spares];
  }

  /**
   * Ends every sandbox process: the cordons' processes are asked to shut down (killed after a grace),
   * spares are killed, and then every process still alive, whoever holds it (one starting, one being
   * retired), is killed with its whole tree (ChildLink.kill). Resolves once all have exited.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.spares.close();
    this.describeQueue.clear();
    await Promise.all([...this.pools.values(), ...this.describers].map((pool) => pool.close()));
    await this.live.endAll();
    this.shared.rescheduler.stop();
    this.watchdog.close();
  }

  stuckEntries(): number {
    return 0;
  }

  /** The pool of `cordon`, made on its first use (evicting idle cordons beyond the cap), and marked used. */
  private poolOf(cordon: string): CordonPool {
    let pool = this.pools.get(cordon);
    if (pool) {
      this.pools.delete(cordon);
      this.pools.set(cordon, pool);
      return pool;
    }
    const evicted = this.closing ? [] : this.evictFor(this.processesPerCordon);
    // The new cordon's processes start once the evicted ones have ended (they are killed at once, being
    // idle): started beside them, the pool held more than its cap until their exits were seen (a loaded
    // machine reaps late: retiring_loop_past_process_cap).
    const startAfter = evicted.length > 0 ? Promise.all(evicted) : undefined;
    pool = new CordonPool(this.shared, cordon, this.processesPerCordon, this.warmPoolBytes, startAfter);
    this.pools.set(cordon, pool);
    return pool;
  }

  /**
   * Ends idle cordons' processes (never `keep`'s), least recently used first, until `needed` more fit under
   * the cap; returns when each evicted cordon's processes have ended (killed at once: nothing in flight).
   */
  private evictFor(needed: number, keep?: CordonPool): Array<Promise<void>> {
    const ending: Array<Promise<void>> = [];
    let over = this.liveProcesses() + needed - this.maxProcesses;
    for (const [cordon, pool] of this.pools) {
      if (over <= 0) break;
      if (pool.load > 0 || pool === keep) continue;
      this.pools.delete(cordon);
      over -= pool.pids().length;
      ending.push(pool.close(0));
    }
    return ending;
  }

  /**
   * Processes alive, whoever holds them (a spare, a slot, one retiring, demoted or killed and not yet
   * reaped: live-children.ts), and the slots due to start one: what the cap is kept on, never on what a
   * process says of itself (a process that says it is retiring is alive until the host sees it end).
   */
  private liveProcesses(): number {
    let count = this.live.size;
    for (const pool of this.pools.values()) count += pool.slotsWaiting;
    return count;
  }

  private remember(index: number): number {
    const id = this.nextId++;
    this.sentTo.set(id, index);
    this.sentTo.delete(id - SENT_TO_REMEMBERED);
    return id;
  }

  /** True when request `id` was sent to process `index` (recent ids only; older ones count as sent). */
  private wasSentTo(id: number, index: number): boolean {
    if (id >= this.nextId) return false;
    const recorded = this.sentTo.get(id);
    return recorded === undefined ? id < this.nextId - SENT_TO_REMEMBERED : recorded === index;
  }
}
