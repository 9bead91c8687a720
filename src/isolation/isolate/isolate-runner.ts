import ivm from "isolated-vm";
import type { ErrorInfo } from "../../errors.js";
import { CallLedger, CapabilityBudget } from "../call-ledger.js";
import { Abandoned, CallGuard, EntryTracker, STOP_GRACE_MS, remainingMs, stoppable, stoppedBy, unlessAbandoned } from "./call-guard.js";
import { ContextScripts, SetupError, asLoadError } from "./context-scripts.js";
import { parseCallEnvelope, parseDescribeEnvelope } from "./envelope.js";
import { ivmErrorInfo } from "./ivm-errors.js";
import { type ActiveCall, type Bridge, ENTRY_METHODS, type Entry, PooledIsolate, bindPrelude, heldBytes } from "./pooled-isolate.js";
import { IsolatePool, type Sharing } from "./warm-pool.js";
import { type SnapshotTools, StartupSnapshot } from "./startup-snapshot.js";
import { bridgeHandlers } from "./isolate-bridge.js";
import type {
  BundlePosition,
  CallLabel,
  CapabilityInvoker,
  CallOutcome,
  CallRequest,
  DescribeOutcome,
  DescribeRequest,
  Executor,
  ResultValue,
  ToolBundle,
  ToolLogLine,
  WarmPoolStats,
} from "../wire/messages.js";
import { monotonicMs } from "../../clock.js";
import { setMissingIsolateFlags } from "./v8-flags.js";
import { PYTHON_RUNTIME_HEAP_MB, type PythonBootTools, bootPython } from "./python-boot.js";
import { PythonSpares } from "./python-spares.js";
import { IdleCompaction } from "./idle-compaction.js";
import { type IsolateRunnerOptions, SNAPSHOT_AFTER_ISOLATES, guardedLogSink, poolSettingsOf, refuseCapabilities } from "./isolate-runner-options.js";
import { PYTHON_BOOT_GRACE_MS, isPythonBundle } from "../wire/tool-bundle.js";

export { type IsolateRunnerOptions, SNAPSHOT_AFTER_ISOLATES };

/** The isolated-vm constructors the Python runtime's boot needs (python-boot.ts imports types only). */
const PYTHON_BOOT_TOOLS: PythonBootTools = {
  callback: (fn) => new ivm.Callback(fn as (...args: unknown[]) => unknown),
  bytesInto: (bytes) => new ivm.ExternalCopy(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)).copyInto({ release: true }),
  keep: (bytes) => new ivm.ExternalCopy(bytes, { transferOut: true }),
};

/** The isolated-vm constructors the startup snapshot needs (startup-snapshot.ts imports types only). */
const SNAPSHOT_TOOLS: SnapshotTools = {
  createSnapshot: (scripts) => ivm.Isolate.createSnapshot(scripts),
  newIsolate: (options) => new ivm.Isolate(options),
  noopCallback: () => new ivm.Callback(() => {}, { ignored: true }),
};

// Before the first isolate: the flags isolates need, where this process's command line lacks them.
setMissingIsolateFlags();

/**
 * The only module that imports isolated-vm. Runs tool bundles in isolates in this process. The scripts a
 * new context runs and their code caches are context-scripts.ts's; the deadline's enforcement is
 * call-guard.ts's; the warm pool is warm-pool.ts's (its isolates pooled-isolate.ts's); the host functions
 * the prelude calls are isolate-bridge.ts's.
 *
 * Invariants:
 *  - An isolate serves one call at a time; concurrent calls for the same (anima, bundle) get their own.
 *  - Tools' contexts are pooled per (anima, bundle hash, memory limit), each with its own global: a
 *    tool's module state never crosses Animas or tools. An idle isolate may take in another context of
 *    one of the same Anima's JavaScript tools at that memory limit (warm-pool.ts, sharing).
 *  - Every entry into an isolate carries the call's remaining time as its isolated-vm timeout, and a
 *    `CallGuard` disposes the isolate at the deadline and ends the call even if isolated-vm never
 *    returns. An isolate that timed out, hit its memory limit, failed to set up or asked to be recycled
 *    is disposed, never returned to the pool.
 *  - An isolate isolated-vm disposed by itself (not the host) was stopped by its memory limit.
 *  - Values cross into the isolate as copies of strings and numbers; out of it, only the envelope string.
 *    Host callbacks never throw into the isolate (their errors would carry host stacks). The bridge, the
 *    entry object, the envelopes and the capabilities are declared once, in src/contract/isolate.ts.
 *  - Limits are kept here, outside the isolate, on the runner's own counts (`CallLedger`): log lines,
 *    timers and capability calls per call. Only denials the host issued leave a call as denials.
 *  - Only a call's first entry carries an isolated-vm `timeout`. Re-entries (timer callbacks, capability
 *    answers) carry none: each timeout arms a timer on isolated-vm's timer thread that stays queued until
 *    its deadline even after the entry returned, and a flood of re-entries left hundreds of thousands of
 *    them due at one instant, which that thread pops recursively until its stack overflows (SIGSEGV).
 *    The `CallGuard` stops any entry at the deadline by disposing the isolate. Capability answers that
 *    are ready together enter as one batch, and at most one such entry per isolate is outstanding.
 *  - A call is known here by its label (`CallLabel`: the Anima's name, the tool), never by the host's
 *    record of it: in a sandbox process that is all the host sends, and in-process the executor hands
 *    the runner a label too (executor.ts). Capability requests and log lines carry the very label
 *    object the call was given, by which the runner's owner finds its own record of the call.
 */

export class IsolateRunner implements Executor {
  private readonly scripts: ContextScripts;
  private readonly pool: IsolatePool;
  private readonly onLog: (line: ToolLogLine<CallLabel>) => void;
  private readonly onUnrecoverable: (reason: string) => void;
  private readonly invokeCapability: CapabilityInvoker<CallLabel>;
  private readonly budget: CapabilityBudget;
  private readonly onRefusal: IsolateRunnerOptions["onRefusal"];
  private readonly snapshot: StartupSnapshot;
  /** Tools' contexts an isolate may hold (`IsolateRunnerOptions.toolsPerIsolate`). */
  private readonly toolsPerIsolate: number;
  private closed = false;
  private readonly entries = new EntryTracker();
  private readonly spares: PythonSpares;
  private readonly compaction: IdleCompaction;

  constructor(options: IsolateRunnerOptions = {}) {
    this.scripts = new ContextScripts();
    this.snapshot = new StartupSnapshot(SNAPSHOT_TOOLS, this.scripts, options.startupSnapshot !== false);
    const settings = poolSettingsOf(options);
    this.toolsPerIsolate = settings.pool.toolsPerIsolate ?? 1;
    this.spares = new PythonSpares((memoryLimitMb) => this.bootSpare(memoryLimitMb), settings.spareInterpreter);
    this.pool = new IsolatePool(settings.pool, heldBytes, () => this.compaction.noteIdle());
    this.compaction = new IdleCompaction(() => this.pool, settings.compactIdleAfterMs, this.entries);
    this.onLog = guardedLogSink(options.onLog);
    this.onUnrecoverable = options.onUnrecoverable ?? (() => {});
    this.invokeCapability = options.invokeCapability ?? refuseCapabilities;
    this.budget = new CapabilityBudget(options.capabilityLimits);
    this.onRefusal = options.onRefusal;
  }

  async describe(request: DescribeRequest): Promise<DescribeOutcome> {
    const limits = { timeoutMs: request.timeoutMs, memoryLimitMb: request.memoryLimitMb };
    const guard = new CallGuard(request.timeoutMs);
    const deadline = monotonicMs() + request.timeoutMs;
    let pooled: PooledIsolate | undefined;
    try {
      pooled = await unlessAbandoned(this.entries.track(this.createIsolate("describe", request.bundle, limits, deadline, guard)), guard, (late) =>
        late.disposeByHost(),
      );
      const text = await unlessAbandoned(
        this.entries.track(pooled.entry!.describe.apply(undefined, [], { timeout: remainingMs(deadline), result: { promise: true, copy: true } })),
        guard,
      );
      const outcome = parseDescribeEnvelope(text);
      // The tool's first call comes next: it takes this interpreter over rather than boot another.
      if (outcome.ok && pooled.holdsInterpreter && pooled.healthy && !guard.stopReason && !this.closed) {
        this.spares.keepDescribed(request.bundle.hash, request.memoryLimitMb, pooled);
        pooled = undefined;
      }
      return outcome;
    } catch (error) {
      return { ok: false, error: asLoadError(this.failureInfo(error, limits, guard, pooled)) };
    } finally {
      guard.finish();
      pooled?.disposeByHost();
    }
  }

  async call(request: CallRequest<CallLabel>, signal?: AbortSignal): Promise<CallOutcome> {
    return stoppedBy(signal, this.stoppableCall(request));
  }

  /**
   * `call`, with a function that stops it at once (its isolate is disposed; it ends as ExecutionError).
   * What sandbox processes use: cheaper per call than an AbortSignal and its listeners.
   */
  stoppableCall(request: CallRequest<CallLabel>): { outcome: Promise<CallOutcome>; stop: () => void } {
    return stoppable((onGuard) => this.run(request, onGuard));
  }

  private async run(request: CallRequest<CallLabel>, onGuard: (guard: CallGuard) => void): Promise<CallOutcome> {
    const startedAt = monotonicMs();
    const deadline = startedAt + request.timeoutMs;
    const limits = { timeoutMs: request.timeoutMs, memoryLimitMb: request.memoryLimitMb, maxResultBytes: request.maxResultBytes };
    const key = `${request.context.anima}\0${request.bundle.hash}\0${request.memoryLimitMb}`;
    if (this.closed) return { ok: false, error: { type: "SandboxCrashed", fault: "host", message: "the host is shutting down" }, durationMs: 0 };
    const ledger = new CallLedger(request.context, { maxLogLines: request.maxLogLines, maxLogLineChars: request.maxLogLineChars }, this.budget, this.onRefusal);
    const done = (outcome: { ok: true; value: ResultValue } | { ok: false; error: ErrorInfo; toolFrames?: BundlePosition[] }): CallOutcome => ({
      ...(outcome.ok
        ? { ok: true, value: outcome.value }
        : { ok: false, error: ledger.judge(outcome.error), ...(outcome.toolFrames ? { toolFrames: outcome.toolFrames } : {}) }),
      durationMs: monotonicMs() - startedAt,
    });

    const guard = new CallGuard(request.timeoutMs);
    const active: ActiveCall = { context: request.context, deadline, guard, timers: new Map(), ledger, replies: [], settling: false };
    let pooled: PooledIsolate | undefined;
    let reusable = false;
    // When the isolate was handed to this call: the pool's heap figure needs re-measuring only after
    // the tool's code ran long, and time spent waiting for an isolate grows no heap.
    let ranFromMs = startedAt;
    onGuard(guard);
    try {
      const lineage = `${request.context.anima}\0${request.context.tool}\0${request.memoryLimitMb}`;
      // One Anima's JavaScript tools at one memory limit may share an isolate, each in its own context.
      const sharing: Sharing | undefined =
        this.toolsPerIsolate > 1 && !isPythonBundle(request.bundle.code)
          ? { group: `${request.context.anima}\0${request.memoryLimitMb}`, addTool: (host) => this.addTool(host, request.bundle, limits, deadline, guard) }
          : undefined;
      const acquired = this.pool.acquire(key, () => this.createIsolate(key, request.bundle, limits, deadline, guard), lineage, sharing);
      pooled = await unlessAbandoned(this.entries.track(acquired), guard, (late) => this.pool.release(late, false));
      if (guard.stopReason) throw new Error("stopped");
      ranFromMs = monotonicMs();
      pooled.guard = guard;
      guard.target = pooled;
      pooled.active = active;
      const text = await unlessAbandoned(
        this.entries.track(
          pooled.entry!.call.apply(
            undefined,
            [request.entry, request.schemaName, request.payloadJson, request.maxResultBytes, request.maxLogLines, request.maxLogLineChars],
            { timeout: remainingMs(deadline), result: { promise: true, copy: true } },
          ),
        ),
        guard,
      );
      if (guard.stopReason) throw new Error("stopped");
      const parsed = parseCallEnvelope(text, limits, pooled.scriptFilename);
      reusable = !parsed.recycle;
      return done(parsed);
    } catch (error) {
      return done({ ok: false, error: this.failureInfo(error, limits, guard, pooled) });
    } finally {
      guard.finish();
      ledger.end(guard.stopReason ?? "returned");
      for (const timer of active.timers.values()) clearTimeout(timer);
      if (pooled) {
        pooled.active = undefined;
        pooled.guard = undefined;
        // No host-side clean-up call: the prelude ends its own call state before it answers (settle),
        // and a synchronous entry here would wait for the isolate's thread on every call.
        this.pool.release(pooled, reusable && pooled.healthy && !this.closed, monotonicMs() - ranFromMs);
      }
    }
  }

  /** True once isolates are made from the startup snapshot (startup-snapshot.ts); for tests and benchmarks. */
  get usesStartupSnapshot(): boolean {
    return this.snapshot.inUse;
  }

  /** What the warm pool holds now. */
  warmPoolStats(): WarmPoolStats {
    return { ...this.pool.stats(), spareInterpreters: this.spares.held, compactions: this.compaction.compactions };
  }

  /** Drops the warm isolates of `anima` (its calls now go to another process). */
  forgetAnima(anima: string): void {
    this.pool.disposeIdleOf(`${anima}\0`);
  }

  /**
   * Disposes the idle isolates and gives entries still running `STOP_GRACE_MS` to return. One that does
   * not is an isolate isolated-vm cannot stop (see `stuckEntries`).
   */
  async close(): Promise<void> {
    this.closed = true;
    this.spares.close();
    this.compaction.close();
    this.pool.disposeIdle();
    await this.entries.settled(STOP_GRACE_MS);
  }

  /**
   * Entries into isolates that have not returned. Once closed, a non-zero count means a thread of this
   * process is held by an isolate that could not be stopped: the process cannot exit normally.
   */
  stuckEntries(): number {
    return this.entries.pending;
  }

  /** Why a call or load failed: the host's own stop reason first, then what isolated-vm said. */
  private failureInfo(error: unknown, limits: { timeoutMs: number; memoryLimitMb: number }, guard: CallGuard, pooled: PooledIsolate | undefined): ErrorInfo {
    if (error instanceof SetupError) return error.info;
    // Do not wait for isolated-vm to declare the thread lost (5 s later): by then it may hold locks the
    // rest of the process needs. Say so now, so that no new call comes here.
    if (error instanceof Abandoned) this.onUnrecoverable("an isolate did not return after it was stopped");
    return ivmErrorInfo(error, limits, guard.stopReason ?? (pooled?.hitMemoryLimit ? "MemoryLimit" : error instanceof Abandoned ? "Timeout" : undefined));
  }

  // ---- isolate set-up -----------------------------------------------------------------------------

  /**
   * The isolate of a call's or describe's (`key: "describe"`) bundle, its tool loaded. A Python call takes
   * its describe's isolate (python-spares.ts), else a spare, else boots one; each Python isolate made for a
   * call, and each describe that took the spare, starts a spare for the next (pool/interpreters-sent.ts).
   */
  private async createIsolate(
    key: string,
    bundle: ToolBundle,
    limits: { timeoutMs: number; memoryLimitMb: number },
    deadline: number,
    guard: CallGuard,
  ): Promise<PooledIsolate> {
    const python = isPythonBundle(bundle.code);
    if (python && key !== "describe") {
      const described = this.spares.adoptDescribed(bundle.hash, limits.memoryLimitMb);
      if (described) {
        described.key = key;
        this.spares.refill(limits.memoryLimitMb);
        return described;
      }
    }
    const spare = python ? this.spares.take(limits.memoryLimitMb) : undefined;
    const pooled = spare ?? this.newContext(key, python, limits.memoryLimitMb);
    pooled.key = key;
    pooled.guard = guard;
    guard.target = pooled;
    try {
      if (python && !spare) {
        await bootPython(pooled.isolate, pooled.context!, PYTHON_BOOT_TOOLS, limits, deadline, guard, pooled);
        pooled.holdsInterpreter = true;
      }
      await this.scripts.loadTool(pooled, pooled.context!, bundle, limits, deadline, guard);
      return pooled;
    } catch (error) {
      pooled.disposeByHost();
      throw error;
    } finally {
      if (python && (key !== "describe" || spare)) this.spares.refill(limits.memoryLimitMb);
    }
  }

  /** A new isolate with the prelude bound in its context (a Python context keeps what Pyodide boots with). */
  private newContext(key: string, python: boolean, memoryLimitMb: number): PooledIsolate {
    let pooled: PooledIsolate | undefined;
    const snapshot = this.snapshot.forNextIsolate();
    const isolate = new ivm.Isolate({
      memoryLimit: memoryLimitMb + (python ? PYTHON_RUNTIME_HEAP_MB : 0),
      ...(snapshot ? { snapshot } : {}),
      // Called (on this thread, later) when V8 ran out of memory beyond isolated-vm's limit, or a script
      // would not terminate: the isolate's thread is parked for good. End its call and report it.
      onCatastrophicError: (message: string) => {
        pooled?.guard?.abandon(/memory/i.test(message) ? "MemoryLimit" : "Timeout");
        this.onUnrecoverable(`an isolate was lost: ${message}`);
      },
    });
    pooled = new PooledIsolate(key, isolate);
    pooled.fromSnapshot = snapshot !== undefined;
    try {
      this.bindContext(pooled, python);
      return pooled;
    } catch (error) {
      pooled.disposeByHost();
      throw error;
    }
  }

  /**
   * A new context in `pooled`'s isolate, the prelude bound in it, made its current one. The prelude's
   * set-up is synchronous: it is our own code, short and bounded (≈ 0.5 ms), and each asynchronous step
   * would cost a round trip to the isolate's thread. Tool code runs async.
   */
  private bindContext(pooled: PooledIsolate, python: boolean): void {
    const context = pooled.isolate.createContextSync();
    pooled.context = context;
    if (!pooled.fromSnapshot) this.scripts.runPrelude(pooled.isolate, context);
    const entryRef = bindPrelude(context, this.makeBridge(pooled), python ? "python" : "tool");
    pooled.entry = Object.fromEntries(ENTRY_METHODS.map((method) => [method, entryRef.getSync(method, { reference: true })])) as Entry;
    entryRef.release();
  }

  /**
   * Another tool of the same Anima in `pooled`, an idle isolate of the pool with room (warm-pool.ts,
   * sharing): a context of its own, its bundle loaded. If that fails the isolate goes, with the contexts
   * it held: a stop or the memory limit ended them too, and a tool's failed top level is rare (describe
   * ran it first).
   */
  private async addTool(pooled: PooledIsolate, bundle: ToolBundle, limits: { timeoutMs: number; memoryLimitMb: number }, deadline: number, guard: CallGuard) {
    pooled.guard = guard;
    guard.target = pooled;
    try {
      this.bindContext(pooled, false);
      await this.scripts.loadTool(pooled, pooled.context!, bundle, limits, deadline, guard);
      return pooled;
    } catch (error) {
      pooled.disposeByHost();
      throw error;
    }
  }

  /** A spare interpreter (python-spares.ts): an isolate with Python booted and no tool, under a guard of its own. */
  private async bootSpare(memoryLimitMb: number): Promise<PooledIsolate> {
    const limits = { timeoutMs: PYTHON_BOOT_GRACE_MS, memoryLimitMb };
    const guard = new CallGuard(PYTHON_BOOT_GRACE_MS);
    const pooled = this.newContext("spare", true, memoryLimitMb);
    pooled.guard = guard;
    guard.target = pooled;
    try {
      await this.entries.track(bootPython(pooled.isolate, pooled.context!, PYTHON_BOOT_TOOLS, limits, monotonicMs() + PYTHON_BOOT_GRACE_MS, guard, pooled));
      pooled.holdsInterpreter = true;
      return pooled;
    } catch (error) {
      pooled.disposeByHost();
      throw error;
    } finally {
      guard.finish();
      pooled.guard = undefined;
    }
  }

  /** Host functions the prelude may call (isolate-bridge.ts), as isolated-vm callbacks. */
  private makeBridge(pooled: PooledIsolate): Bridge {
    const handlers = bridgeHandlers(pooled, { onLog: this.onLog, entries: this.entries, invokeCapability: this.invokeCapability });
    const callback = (fn: (...args: unknown[]) => void) => new ivm.Callback(fn, { ignored: true });
    return {
      log: callback(handlers.log),
      setTimer: callback(handlers.setTimer),
      clearTimer: callback(handlers.clearTimer),
      stop: callback(handlers.stop),
      capability: callback(handlers.capability),
    };
  }
}
