import ivm from "isolated-vm";
import type { ErrorInfo } from "../errors.js";
import { ivmErrorInfo, stripHostDetails, stripStackFrames } from "./ivm-errors.js";
import { readPrelude } from "./prelude-source.js";
import type {
  CallOutcome,
  CallRequest,
  CallContext,
  DescribeOutcome,
  DescribeRequest,
  Executor,
  ResultValue,
  ToolBundle,
  ToolLogLine,
} from "./protocol.js";

/**
 * The only module that imports isolated-vm. Runs tool bundles in isolates in this process.
 *
 * Invariants:
 *  - An isolate serves one call at a time; concurrent calls for the same (anima, bundle) get their own.
 *  - Isolates are pooled per (anima, bundle hash, memory limit): a tool's module state never crosses
 *    Animas or tools.
 *  - Every entry into an isolate carries the call's remaining time as its isolated-vm timeout, and a
 *    host timer disposes the isolate at the deadline (for promises that never settle, and for work
 *    resumed by host callbacks). An isolate that timed out, hit its memory limit or failed to set up is
 *    disposed, never returned to the pool.
 *  - Values cross into the isolate as copies of strings and numbers; out of it, only the envelope string.
 */
export interface IsolateRunnerOptions {
  /** Idle warm isolates kept; least recently used beyond this are disposed. Default: 64. */
  maxIdleIsolates?: number;
  /** Isolates per (anima, bundle) at once; further calls wait for one. Default: 4. */
  maxIsolatesPerKey?: number;
  /** Receives every tool log line. */
  onLog?: (line: ToolLogLine) => void;
}

interface ActiveCall {
  context: CallContext;
  deadline: number;
  timers: Map<number, NodeJS.Timeout>;
  /** Set when the host (not isolated-vm) decided to stop the call. */
  stopReason?: "Timeout" | "MemoryLimit";
  /** Why a timer callback failed, when it did. */
  onTimerFailure(error: unknown): void;
}

interface Entry {
  call: ivm.Reference<(...args: unknown[]) => Promise<string>>;
  describe: ivm.Reference<() => Promise<string>>;
  fireTimer: ivm.Reference<(id: number) => void>;
  endCall: ivm.Reference<() => void>;
}

class PooledIsolate {
  active: ActiveCall | undefined;
  constructor(
    readonly key: string,
    readonly isolate: ivm.Isolate,
    readonly context: ivm.Context,
    readonly entry: Entry,
  ) {}

  get healthy(): boolean {
    return !this.isolate.isDisposed;
  }

  dispose(): void {
    if (!this.isolate.isDisposed) {
      try {
        this.isolate.dispose();
      } catch {
        // already disposing
      }
    }
  }
}

interface KeyState {
  idle: PooledIsolate[];
  busy: number;
  waiting: Array<() => void>;
}

const MAX_TIMER_DELAY_MS = 2_147_483_647;

export class IsolateRunner implements Executor {
  private readonly prelude: string;
  private readonly maxIdle: number;
  private readonly maxPerKey: number;
  private readonly onLog: (line: ToolLogLine) => void;
  private readonly keys = new Map<string, KeyState>();
  /** Idle isolates in least-recently-used order (first = oldest). */
  private readonly idleOrder = new Set<PooledIsolate>();
  /** V8 code cache for the prelude, so later isolates skip parsing it. */
  private preludeCache: ivm.ExternalCopy<ArrayBuffer> | undefined;
  private closed = false;

  constructor(options: IsolateRunnerOptions = {}) {
    this.prelude = readPrelude();
    this.maxIdle = options.maxIdleIsolates ?? 64;
    this.maxPerKey = options.maxIsolatesPerKey ?? 4;
    this.onLog = options.onLog ?? (() => {});
  }

  async describe(request: DescribeRequest): Promise<DescribeOutcome> {
    const limits = { timeoutMs: request.timeoutMs, memoryLimitMb: request.memoryLimitMb };
    let pooled: PooledIsolate | undefined;
    const deadline = performance.now() + request.timeoutMs;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      pooled?.dispose();
    }, request.timeoutMs);
    try {
      pooled = await this.createIsolate("describe", request.bundle, request.memoryLimitMb, deadline);
      const text = await pooled.entry.describe.apply(undefined, [], {
        timeout: remaining(deadline),
        result: { promise: true, copy: true },
      });
      return parseDescribeEnvelope(text);
    } catch (error) {
      const info = error instanceof SetupError ? error.info : ivmErrorInfo(error, limits, timedOut ? "Timeout" : undefined);
      return { ok: false, error: asLoadError(info) };
    } finally {
      clearTimeout(timer);
      pooled?.dispose();
    }
  }

  async call(request: CallRequest): Promise<CallOutcome> {
    const startedAt = performance.now();
    const deadline = startedAt + request.timeoutMs;
    const limits = { timeoutMs: request.timeoutMs, memoryLimitMb: request.memoryLimitMb };
    const key = `${request.context.anima}\0${request.bundle.hash}\0${request.memoryLimitMb}`;
    const done = (outcome: { ok: true; value: ResultValue } | { ok: false; error: ErrorInfo }): CallOutcome => ({
      ...outcome,
      durationMs: performance.now() - startedAt,
    });
    if (this.closed) return done({ ok: false, error: { type: "SandboxCrashed", message: "the host is shutting down" } });

    let pooled: PooledIsolate | undefined;
    let reusable = false;
    const active: ActiveCall = {
      context: request.context,
      deadline,
      timers: new Map(),
      onTimerFailure: (error) => {
        active.stopReason ??= ivmErrorInfo(error, limits).type === "MemoryLimit" ? "MemoryLimit" : "Timeout";
        pooled?.dispose();
      },
    };
    const deadlineTimer = setTimeout(() => {
      active.stopReason ??= "Timeout";
      pooled?.dispose();
    }, request.timeoutMs);

    try {
      pooled = await this.acquire(key, request.bundle, request.memoryLimitMb, deadline);
      if (active.stopReason) throw new Error("stopped");
      pooled.active = active;
      const text = await pooled.entry.call.apply(
        undefined,
        [request.entry, request.schemaName, request.payloadJson, request.maxResultBytes, request.maxLogLines, request.maxLogLineChars],
        { timeout: remaining(deadline), result: { promise: true, copy: true } },
      );
      if (active.stopReason) throw new Error("stopped");
      const outcome = parseCallEnvelope(text, request.maxResultBytes);
      reusable = true;
      return done(outcome);
    } catch (error) {
      if (error instanceof SetupError) return done({ ok: false, error: error.info });
      return done({ ok: false, error: ivmErrorInfo(error, limits, active.stopReason) });
    } finally {
      clearTimeout(deadlineTimer);
      for (const timer of active.timers.values()) clearTimeout(timer);
      if (pooled) {
        pooled.active = undefined;
        if (reusable && pooled.healthy) {
          try {
            pooled.entry.endCall.applySync(undefined, [], { timeout: 50 });
          } catch {
            reusable = false;
          }
        }
        this.release(pooled, reusable && pooled.healthy);
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const state of this.keys.values()) {
      for (const pooled of state.idle) pooled.dispose();
      state.idle.length = 0;
    }
    this.idleOrder.clear();
  }

  // ---- pooling ------------------------------------------------------------------------------------

  private async acquire(key: string, bundle: ToolBundle, memoryLimitMb: number, deadline: number): Promise<PooledIsolate> {
    let state = this.keys.get(key);
    if (!state) {
      state = { idle: [], busy: 0, waiting: [] };
      this.keys.set(key, state);
    }
    for (;;) {
      const pooled = state.idle.pop();
      if (pooled) {
        this.idleOrder.delete(pooled);
        if (!pooled.healthy) continue;
        state.busy++;
        return pooled;
      }
      if (state.busy < this.maxPerKey) break;
      await new Promise<void>((resolve) => state.waiting.push(resolve));
    }
    state.busy++;
    try {
      return await this.createIsolate(key, bundle, memoryLimitMb, deadline);
    } catch (error) {
      state.busy--;
      state.waiting.shift()?.();
      throw error;
    }
  }

  private release(pooled: PooledIsolate, reusable: boolean): void {
    const state = this.keys.get(pooled.key);
    if (!state) return pooled.dispose();
    state.busy--;
    if (reusable && !this.closed) {
      state.idle.push(pooled);
      this.idleOrder.add(pooled);
      this.evictIdle();
    } else {
      pooled.dispose();
    }
    state.waiting.shift()?.();
    if (state.busy === 0 && state.idle.length === 0 && state.waiting.length === 0) this.keys.delete(pooled.key);
  }

  private evictIdle(): void {
    while (this.idleOrder.size > this.maxIdle) {
      const oldest = this.idleOrder.values().next().value as PooledIsolate;
      this.idleOrder.delete(oldest);
      const state = this.keys.get(oldest.key);
      if (state) {
        state.idle.splice(state.idle.indexOf(oldest), 1);
        if (state.busy === 0 && state.idle.length === 0 && state.waiting.length === 0) this.keys.delete(oldest.key);
      }
      oldest.dispose();
    }
  }

  // ---- isolate set-up -----------------------------------------------------------------------------

  private async createIsolate(key: string, bundle: ToolBundle, memoryLimitMb: number, deadline: number): Promise<PooledIsolate> {
    const isolate = new ivm.Isolate({ memoryLimit: memoryLimitMb });
    let pooled: PooledIsolate | undefined;
    try {
      const context = await isolate.createContext();
      const bridge = this.makeBridge(() => pooled);
      await context.evalClosure(
        "globalThis.__awHost = { log: $0, setTimer: $1, clearTimer: $2 };",
        [bridge.log, bridge.setTimer, bridge.clearTimer],
      );
      const preludeScript = await isolate.compileScript(this.prelude, {
        filename: "animaworks:prelude.js",
        ...(this.preludeCache ? { cachedData: this.preludeCache } : { produceCachedData: true }),
      });
      const produced = (preludeScript as ivm.Script & { cachedData?: ivm.ExternalCopy<ArrayBuffer> }).cachedData;
      if (!this.preludeCache && produced) this.preludeCache = produced;
      await preludeScript.run(context, { timeout: 1_000 });
      const entryRef = await context.global.get("__awEntry", { reference: true });
      const entry: Entry = {
        call: await entryRef.get("call", { reference: true }),
        describe: await entryRef.get("describe", { reference: true }),
        fireTimer: await entryRef.get("fireTimer", { reference: true }),
        endCall: await entryRef.get("endCall", { reference: true }),
      };
      pooled = new PooledIsolate(key, isolate, context, entry);
      let toolScript: ivm.Script;
      try {
        toolScript = await isolate.compileScript(bundle.code, { filename: `tool:${bundle.displayName}` });
      } catch (error) {
        throw new SetupError({ type: "LoadError", message: `the tool does not compile: ${stripHostDetails(errorMessage(error))}` });
      }
      try {
        await toolScript.run(context, { timeout: remaining(deadline) });
      } catch (error) {
        const info = ivmErrorInfo(error, { timeoutMs: Math.round(remaining(deadline)), memoryLimitMb });
        if (info.type === "Timeout" || info.type === "MemoryLimit") throw new SetupError({ ...info, message: `while loading: ${info.message}` });
        throw new SetupError({ type: "LoadError", message: `the tool's top-level code threw: ${stripHostDetails(errorMessage(error))}` });
      }
      return pooled;
    } catch (error) {
      if (!isolate.isDisposed) isolate.dispose();
      throw error;
    }
  }

  /** Host functions the prelude may call. Each validates its plain arguments; the isolate is untrusted. */
  private makeBridge(current: () => PooledIsolate | undefined) {
    const log = new ivm.Callback(
      (level: unknown, message: unknown) => {
        const active = current()?.active;
        if (!active || typeof message !== "string") return;
        const lvl = level === "debug" || level === "info" || level === "warn" || level === "error" ? level : "info";
        this.onLog({ level: lvl, message, context: active.context });
      },
      { ignored: true },
    );
    const setTimer = new ivm.Callback(
      (id: unknown, delayMs: unknown) => {
        const pooled = current();
        const active = pooled?.active;
        if (!pooled || !active || typeof id !== "number" || typeof delayMs !== "number") return;
        const delay = Math.min(Math.max(0, delayMs), MAX_TIMER_DELAY_MS);
        const handle = setTimeout(() => {
          active.timers.delete(id);
          if (pooled.active !== active || !pooled.healthy) return;
          pooled.entry.fireTimer
            .apply(undefined, [id], { timeout: Math.max(1, remaining(active.deadline)) })
            .catch((error: unknown) => {
              if (pooled.active === active) active.onTimerFailure(error);
            });
        }, delay);
        active.timers.set(id, handle);
      },
      { ignored: true },
    );
    const clearTimer = new ivm.Callback(
      (id: unknown) => {
        const active = current()?.active;
        if (!active || typeof id !== "number") return;
        const handle = active.timers.get(id);
        if (handle) clearTimeout(handle);
        active.timers.delete(id);
      },
      { ignored: true },
    );
    return { log, setTimer, clearTimer };
  }
}

class SetupError extends Error {
  constructor(readonly info: ErrorInfo) {
    super(info.message);
  }
}

function remaining(deadline: number): number {
  return Math.max(1, Math.ceil(deadline - performance.now()));
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function asLoadError(info: ErrorInfo): ErrorInfo {
  if (info.type === "LoadError") return info;
  return { type: "LoadError", message: `loading the tool failed: ${info.message}`, ...(info.hint ? { hint: info.hint } : {}) };
}

/** Parses the prelude's envelope. The text is untrusted: every field is checked. */
function parseCallEnvelope(text: unknown, maxResultBytes: number): { ok: true; value: ResultValue } | { ok: false; error: ErrorInfo } {
  const bad = { ok: false as const, error: { type: "ExecutionError" as const, message: "the tool's result could not be read" } };
  if (typeof text !== "string" || text.length > maxResultBytes * 2 + 4096) return bad;
  let envelope: unknown;
  try {
    envelope = JSON.parse(text);
  } catch {
    return bad;
  }
  if (typeof envelope !== "object" || envelope === null) return bad;
  const e = envelope as Record<string, unknown>;
  if (e["ok"] === false) {
    const type = e["errorType"] === "ToolConfigError" ? "ToolConfigError" : "ExecutionError";
    const message = typeof e["message"] === "string" ? stripStackFrames(e["message"]) : "the tool failed";
    return { ok: false, error: { type, message: message || "the tool failed without a message" } };
  }
  if (e["ok"] !== true) return bad;
  if (e["kind"] === "none") return { ok: true, value: { kind: "none" } };
  if ((e["kind"] === "text" || e["kind"] === "json") && typeof e["text"] === "string") {
    const bytes = typeof e["bytes"] === "number" && Number.isFinite(e["bytes"]) ? e["bytes"] : Buffer.byteLength(e["text"]);
    return { ok: true, value: { kind: e["kind"], text: e["text"], bytes, truncated: e["truncated"] === true } };
  }
  return bad;
}

function parseDescribeEnvelope(text: unknown): DescribeOutcome {
  const bad: DescribeOutcome = { ok: false, error: { type: "LoadError", message: "the tool's description could not be read" } };
  if (typeof text !== "string") return bad;
  let envelope: unknown;
  try {
    envelope = JSON.parse(text);
  } catch {
    return bad;
  }
  if (typeof envelope !== "object" || envelope === null) return bad;
  const e = envelope as Record<string, unknown>;
  if (e["ok"] === false) {
    return { ok: false, error: { type: "LoadError", message: typeof e["message"] === "string" ? stripStackFrames(e["message"]) : "loading failed" } };
  }
  const exportsInfo = e["exports"];
  if (e["ok"] !== true || typeof exportsInfo !== "object" || exportsInfo === null) return bad;
  const exports: Record<string, string> = {};
  for (const [name, type] of Object.entries(exportsInfo)) if (typeof type === "string") exports[name] = type;
  return { ok: true, module: { exports, schemas: e["schemas"] ?? null, profile: e["profile"] ?? null } };
}
