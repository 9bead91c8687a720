import type ivm from "isolated-vm";
import type { CallLedger } from "../call-ledger.js";
import type { CallGuard, Disposable } from "./call-guard.js";
import type { CallLabel, CapabilityReply, WarmPoolStats } from "../wire/messages.js";
import { monotonicMs } from "../../clock.js";
import { BIND_GLOBAL, BRIDGE_METHODS, type BridgeMethod, type ContextFlavour, type EntryMethod, type GuestEntry } from "../../contract/isolate.js";

/**
 * Pool bookkeeping of the isolate runner (isolate-runner.ts): one warm isolate and what it serves, the
 * warm pool, and the steps of an isolate's set-up that need no isolated-vm constructor (types only here).
 */

export interface ActiveCall {
  /** The label of the call (the object the runner was given: whoever runs the runner finds its own record by it). */
  context: CallLabel;
  deadline: number;
  guard: CallGuard;
  timers: Map<number, NodeJS.Timeout>;
  /** The host's account of the call: limits, denials issued, the signal that ends its work. */
  ledger: CallLedger<CallLabel>;
  /** Capability answers waiting for the batch entering now (see isolate-bridge.ts `deliver`). */
  replies: Array<[number, CapabilityReply]>;
  settling: boolean;
}

/** The prelude's entry object as the host holds it: a reference to each of its functions (src/contract/isolate.ts). */
export type Entry = { [M in EntryMethod]: ivm.Reference<GuestEntry[M]> };

/** Every function of the prelude's entry object, which the host takes a reference to. */
export const ENTRY_METHODS = ["call", "describe", "fireTimer", "settleCapabilities", "receiveText", "compact"] as const satisfies readonly EntryMethod[];
// A function added to the entry object and not listed above fails to compile here.
const everyEntryMethod: Record<Exclude<EntryMethod, (typeof ENTRY_METHODS)[number]>, never> = {};
void everyEntryMethod;

export class PooledIsolate implements Disposable {
  /** The call being served (the bridge attributes logs and timers to it). */
  active: ActiveCall | undefined;
  /** Whose deadline governs this isolate right now, from set-up on (also during describe). */
  guard: CallGuard | undefined;
  entry: Entry | undefined;
  context: ivm.Context | undefined;
  /** The file name the tool's bundle was compiled under here: its frames in a stack are the tool's (tool-frames.ts). */
  scriptFilename = "";
  disposedByHost = false;
  /** What V8 held for this isolate when the pool last measured it, bytes (0: not measured yet). */
  heapBytes = 0;
  releasesSinceMeasure = 0;
  /**
   * It holds a Python interpreter (python-boot.ts), whose WebAssembly memory and code (≈ 130 MB resident)
   * V8's statistics leave out: the warm pool keeps such isolates by count, not by bytes.
   */
  holdsInterpreter = false;
  /** When it last went idle in the pool (`monotonicMs`), and whether it was compacted since (idle-compaction.ts). */
  idleSinceMs = 0;
  compacted = false;

  constructor(
    /** The warm pool's key; a spare interpreter (python-spares.ts) gets its key when it is taken. */
    public key: string,
    readonly isolate: ivm.Isolate,
  ) {}

  get healthy(): boolean {
    return !this.isolate.isDisposed;
  }

  /** True when isolated-vm disposed this isolate on its own, which it does only at the memory limit. */
  get hitMemoryLimit(): boolean {
    return this.isolate.isDisposed && !this.disposedByHost;
  }

  disposeByHost(): void {
    this.disposedByHost = true;
    if (!this.isolate.isDisposed) {
      try {
        this.isolate.dispose();
      } catch {
        // already disposing
      }
    }
  }
}

/** The host's bridge as the prelude receives it: an isolated-vm callback for each function (isolate-bridge.ts). */
export type Bridge = Record<BridgeMethod, ivm.Callback>;

/**
 * `return __awBind({ log: $0, setTimer: $1, … }, $5)`: the bridge's functions passed in `BRIDGE_METHODS`
 * order, then the context's flavour.
 */
const BIND_SOURCE = `return ${BIND_GLOBAL}({ ${BRIDGE_METHODS.map((method, index) => `${method}: $${index}`).join(", ")} }, $${BRIDGE_METHODS.length});`;

/** Hands the host's bridge to the prelude of `context` and takes its entry object (prelude-source.ts). */
export function bindPrelude(context: ivm.Context, bridge: Bridge, flavour: ContextFlavour = "tool"): ivm.Reference<GuestEntry> {
  return context.evalClosureSync(BIND_SOURCE, [...BRIDGE_METHODS.map((method) => bridge[method]), flavour], {
    timeout: 1_000,
    result: { reference: true },
  }) as ivm.Reference<GuestEntry>;
}

/** What V8 holds for an isolate: its committed heap and the external memory it accounts for. */
export function heldBytes(pooled: PooledIsolate): number {
  const heap = pooled.isolate.getHeapStatisticsSync();
  return heap.total_heap_size + heap.externally_allocated_size;
}

interface KeyState {
  idle: PooledIsolate[];
  busy: number;
  waiting: Array<() => void>;
  /** The lineage the key was acquired for, if any (see `IsolatePool.acquire`). */
  lineage?: string;
}

/** Limits of the warm pool (see `IsolatePool`). */
export interface WarmPoolLimits {
  /** Memory the idle isolates may hold in all, bytes (as `heapBytesOf` measures it). */
  maxIdleBytes: number;
  /** Idle isolates kept at most, whatever their size. Default: no limit (the memory budget decides). */
  maxIdleCount?: number;
  /** Isolates per key busy at once; a further call for the key waits for one. */
  maxPerKey: number;
  /**
   * Idle isolates holding a Python interpreter kept at most (`holdsInterpreter`), least recently used
   * disposed first. They are kept apart from `maxIdleBytes`: one interpreter (≈ 100 MB) is more than a
   * sandbox process's share of the budget when every Anima has a cordon. Default: 2.
   */
  maxIdleInterpreters?: number;
}

/**
 * Releases between two measurements of an isolate's heap: measuring costs ≈ 15 µs (it takes the isolate's
 * lock), a tenth of a warm call. A call that ran longer than `REMEASURE_AFTER_MS` is measured at once: a
 * heap cannot grow much in a short call, so the figure the budget uses stays close to the truth.
 */
const RELEASES_PER_MEASURE = 16;
const REMEASURE_AFTER_MS = 2;

/**
 * Warm isolates per key (Anima, bundle hash, memory limit): at most `maxPerKey` busy at once per key (a
 * further call waits for one), and idle ones within a memory budget, the least recently used disposed
 * first. An isolate serves one call at a time.
 *
 * The budget counts what V8 holds for each idle isolate (its committed heap plus external memory, read by
 * the pool itself from V8's statistics, never from anything the tool reports). For a small tool that is
 * ≈ 1.8 MB against ≈ 1.2 MB of resident memory: the budget errs on the safe side.
 */
/** Lineages remembered (Anima × tool × memory limit); beyond it the least recent is forgotten (its old isolates then age out by budget). */
const MAX_LINEAGES = 10_000;

export class IsolatePool {
  private readonly keys = new Map<string, KeyState>();
  /** Idle isolates in least-recently-used order (first = oldest). */
  private readonly idleOrder = new Set<PooledIsolate>();
  private idleBytes = 0;
  /** Idle interpreters in least-recently-used order (also in `idleOrder`, not in `idleBytes`). */
  private readonly idleInterpreters = new Set<PooledIsolate>();
  private evictions = 0;
  private readonly maxIdleCount: number;
  private readonly maxIdleInterpreters: number;
  /**
   * The key last acquired for each lineage (an Anima's tool at one memory limit). A tool reloaded with a
   * new version gets a new key; the old version's idle isolates would otherwise stay warm until the
   * budget pushed them out, so a host whose tools change often held ≈ one isolate per reload (a soak:
   * +13 MB an hour per sandbox process). They are disposed when the new version is first acquired.
   */
  private readonly latestKeyOf = new Map<string, string>();

  constructor(
    private readonly limits: WarmPoolLimits,
    private readonly heapBytesOf: (pooled: PooledIsolate) => number,
    /** Told each time an isolate goes idle (the idle compaction arms its timer). */
    private readonly onIdle?: () => void,
  ) {
    this.maxIdleCount = limits.maxIdleCount ?? Number.POSITIVE_INFINITY;
    this.maxIdleInterpreters = limits.maxIdleInterpreters ?? 2;
  }

  /**
   * An idle healthy isolate of `key`, else a new one from `create` once the key has room. With `lineage`,
   * the idle isolates of the key acquired before for that lineage (a replaced version) are disposed when
   * the key differs; busy ones finish their calls and are not kept. A job pinned to an older version
   * still runs: it builds an isolate of its own version again.
   */
  async acquire(key: string, create: () => Promise<PooledIsolate>, lineage?: string): Promise<PooledIsolate> {
    if (lineage !== undefined) this.supersede(lineage, key);
    let state = this.keys.get(key);
    if (!state) {
      state = { idle: [], busy: 0, waiting: [], ...(lineage !== undefined ? { lineage } : {}) };
      this.keys.set(key, state);
    }
    for (;;) {
      const pooled = state.idle.pop();
      if (pooled) {
        this.forgetIdle(pooled);
        if (!pooled.healthy) continue;
        state.busy++;
        return pooled;
      }
      if (state.busy < this.limits.maxPerKey) break;
      await new Promise<void>((resolve) => state.waiting.push(resolve));
    }
    state.busy++;
    try {
      return await create();
    } catch (error) {
      state.busy--;
      state.waiting.shift()?.();
      throw error;
    }
  }

  /** Gives an isolate back after a call of `callMs`: kept warm when `reusable`, else disposed. */
  release(pooled: PooledIsolate, reusable: boolean, callMs = 0): void {
    const state = this.keys.get(pooled.key);
    if (!state) return pooled.disposeByHost();
    state.busy--;
    const interpreter = pooled.holdsInterpreter;
    // An interpreter is kept by count: its heap figure would count for nothing.
    if (reusable && !interpreter) this.measure(pooled, callMs);
    const superseded = state.lineage !== undefined && this.latestKeyOf.get(state.lineage) !== pooled.key;
    const fits = interpreter ? this.maxIdleInterpreters > 0 : pooled.heapBytes <= this.limits.maxIdleBytes;
    if (reusable && !superseded && pooled.healthy && fits) {
      pooled.idleSinceMs = monotonicMs();
      pooled.compacted = false;
      state.idle.push(pooled);
      this.idleOrder.add(pooled);
      if (interpreter) this.idleInterpreters.add(pooled);
      else this.idleBytes += pooled.heapBytes;
      this.evictIdle();
      this.onIdle?.();
    } else {
      pooled.disposeByHost();
    }
    state.waiting.shift()?.();
    this.forgetIfUnused(pooled.key, state);
  }

  /** Disposes the idle isolates whose key starts with `prefix` (an Anima that moved to another process). */
  disposeIdleOf(prefix: string): void {
    for (const pooled of [...this.idleOrder]) if (pooled.key.startsWith(prefix)) this.evict(pooled);
  }

  disposeIdle(): void {
    for (const pooled of [...this.idleOrder]) this.evict(pooled);
  }

  /**
   * The idle isolates of JavaScript tools that have been idle since `idleBeforeMs` or earlier and not
   * compacted since, oldest first; and when the next one will have been idle long enough (`idleForMs`
   * after it went idle), if one is not compacted yet.
   */
  compactionDue(idleBeforeMs: number, idleForMs: number): { due: PooledIsolate[]; nextAtMs: number | undefined } {
    const due: PooledIsolate[] = [];
    for (const pooled of this.idleOrder) {
      if (pooled.compacted || pooled.holdsInterpreter) continue;
      // idleOrder is the order isolates went idle in: the first one not due yet is the next to be.
      if (pooled.idleSinceMs > idleBeforeMs) return { due, nextAtMs: pooled.idleSinceMs + idleForMs };
      due.push(pooled);
    }
    return { due, nextAtMs: undefined };
  }

  isIdle(pooled: PooledIsolate): boolean {
    return this.idleOrder.has(pooled);
  }

  /** Measures an isolate again if it is still idle (after its compaction), and evicts by the new figure. */
  remeasureIdle(pooled: PooledIsolate): void {
    if (!this.idleOrder.has(pooled) || pooled.holdsInterpreter) return;
    let bytes: number;
    try {
      bytes = this.heapBytesOf(pooled);
    } catch {
      return this.evict(pooled); // cannot be measured (disposed meanwhile)
    }
    this.idleBytes += bytes - pooled.heapBytes;
    pooled.heapBytes = bytes;
    pooled.releasesSinceMeasure = 0;
    this.evictIdle();
  }

  stats(): Omit<WarmPoolStats, "spareInterpreters" | "compactions"> {
    return {
      idleIsolates: this.idleOrder.size,
      idleBytes: this.idleBytes,
      maxIdleBytes: this.limits.maxIdleBytes,
      evictions: this.evictions,
      idleInterpreters: this.idleInterpreters.size,
    };
  }

  private measure(pooled: PooledIsolate, callMs: number): void {
    if (pooled.heapBytes > 0 && callMs < REMEASURE_AFTER_MS && ++pooled.releasesSinceMeasure < RELEASES_PER_MEASURE) return;
    pooled.releasesSinceMeasure = 0;
    try {
      pooled.heapBytes = this.heapBytesOf(pooled);
    } catch {
      pooled.heapBytes = Number.POSITIVE_INFINITY; // cannot be measured (disposed meanwhile): never kept
    }
  }

  private supersede(lineage: string, key: string): void {
    const previous = this.latestKeyOf.get(lineage);
    if (previous === key) return;
    this.latestKeyOf.delete(lineage); // re-inserted last: the map is kept in least-recent order
    this.latestKeyOf.set(lineage, key);
    if (this.latestKeyOf.size > MAX_LINEAGES) this.latestKeyOf.delete(this.latestKeyOf.keys().next().value as string);
    const replaced = previous === undefined ? undefined : this.keys.get(previous);
    if (replaced) for (const pooled of [...replaced.idle]) this.evict(pooled);
  }

  private evictIdle(): void {
    while (this.idleInterpreters.size > this.maxIdleInterpreters) {
      this.evict(this.idleInterpreters.values().next().value as PooledIsolate);
      this.evictions++;
    }
    while (this.idleOrder.size > this.maxIdleCount || (this.idleBytes > this.limits.maxIdleBytes && this.idleOrder.size > this.idleInterpreters.size)) {
      const overCount = this.idleOrder.size > this.maxIdleCount;
      let oldest: PooledIsolate | undefined;
      for (const pooled of this.idleOrder) {
        if (overCount || !this.idleInterpreters.has(pooled)) {
          oldest = pooled;
          break;
        }
      }
      if (!oldest) break;
      this.evict(oldest);
      this.evictions++;
    }
  }

  /** Takes an idle isolate off the idle lists (it is acquired or evicted). */
  private forgetIdle(pooled: PooledIsolate): void {
    this.idleOrder.delete(pooled);
    if (this.idleInterpreters.delete(pooled)) return;
    this.idleBytes -= pooled.heapBytes;
  }

  private evict(pooled: PooledIsolate): void {
    this.forgetIdle(pooled);
    const state = this.keys.get(pooled.key);
    if (state) {
      state.idle.splice(state.idle.indexOf(pooled), 1);
      this.forgetIfUnused(pooled.key, state);
    }
    pooled.disposeByHost();
  }

  private forgetIfUnused(key: string, state: KeyState): void {
    if (state.busy === 0 && state.idle.length === 0 && state.waiting.length === 0) this.keys.delete(key);
  }
}
