import type { WarmPoolStats } from "../wire/messages.js";
import { monotonicMs } from "../../clock.js";
import type { PooledIsolate } from "./pooled-isolate.js";

interface KeyState {
  /** Idle isolates that hold a context of the key (current or put aside). */
  idle: PooledIsolate[];
  busy: number;
  waiting: Array<() => void>;
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
  /**
   * Tools' contexts one isolate may hold (sharing, see `IsolatePool`); 1 never shares. Default: 1.
   */
  toolsPerIsolate?: number;
}

/**
 * What another tool's context may join, bytes of V8 heap measured in the isolate: a tool that keeps a
 * large heap between calls is not given neighbours, whose calls would have that much less of the
 * memory limit (a small tool's isolate holds ≈ 1.5 MB, and each further small tool ≈ 0.3 MB).
 */
export const MAX_SHARED_HEAP_BYTES = 8 * 2 ** 20;

/**
 * Releases between two measurements of an isolate's heap: measuring costs ≈ 15 µs (it takes the isolate's
 * lock), a tenth of a warm call. A call that ran longer than `REMEASURE_AFTER_MS` is measured at once: a
 * heap cannot grow much in a short call, so the figure the budget uses stays close to the truth.
 */
const RELEASES_PER_MEASURE = 16;
const REMEASURE_AFTER_MS = 2;

/** Lineages remembered (Anima × tool × memory limit); beyond it the least recent is forgotten (its old isolates then age out by budget). */
const MAX_LINEAGES = 10_000;

/** How a key may share an isolate: its group, and how a context of it is added to an idle isolate of that group. */
export interface Sharing {
  /** Tools of one group may share an isolate (the runner's: one Anima's JavaScript tools at one memory limit). */
  group: string;
  /** Makes and loads the key's context in `pooled` (taken from the pool for it); it disposes `pooled` if that fails. */
  addTool: (pooled: PooledIsolate) => Promise<PooledIsolate>;
}

/**
 * Warm isolates per key (Anima, bundle hash, memory limit): at most `maxPerKey` busy at once per key (a
 * further call waits for one), and idle ones within a memory budget, the least recently used disposed
 * first. An isolate serves one call at a time.
 *
 * Sharing (`toolsPerIsolate` > 1): a key with no idle isolate of its own, acquired with a `Sharing`, takes
 * an idle isolate of its group that has room (fewer contexts than `toolsPerIsolate`, a heap under
 * `MAX_SHARED_HEAP_BYTES`) and gets a context of its own there: a further small tool of an Anima costs a
 * context (≈ 0.3 MB) instead of an isolate (≈ 1.5 MB). Invariants: only idle isolates are shared, so
 * sharing never makes a call wait for another; an isolate holds one group's keys only; what ends an
 * isolate (a stop, its memory limit, eviction) ends every context in it, and a call of any of them
 * counts the others' heap against its memory limit.
 *
 * The budget counts what V8 holds for each idle isolate (its committed heap plus external memory, read by
 * the pool itself from V8's statistics, never from anything the tool reports). For a small tool that is
 * ≈ 1.8 MB against ≈ 1.2 MB of resident memory: the budget errs on the safe side.
 */
export class IsolatePool {
  private readonly keys = new Map<string, KeyState>();
  /** Idle isolates in least-recently-used order (first = oldest). */
  private readonly idleOrder = new Set<PooledIsolate>();
  private idleBytes = 0;
  /** Idle interpreters in least-recently-used order (also in `idleOrder`, not in `idleBytes`). */
  private readonly idleInterpreters = new Set<PooledIsolate>();
  /** Idle isolates with room for another tool's context, by share group. */
  private readonly roomy = new Map<string, Set<PooledIsolate>>();
  private evictions = 0;
  private readonly maxIdleCount: number;
  private readonly maxIdleInterpreters: number;
  private readonly toolsPerIsolate: number;
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
    this.toolsPerIsolate = Math.max(1, Math.floor(limits.toolsPerIsolate ?? 1));
  }

  /**
   * An idle healthy isolate holding `key` (its context made current), else, with `sharing`, an idle
   * isolate of the group with room, given a context of `key`, else a new one from `create`, once the key
   * has room. With `lineage`, the idle isolates holding the key acquired before for that lineage (a
   * replaced version) are disposed when the key differs; busy ones finish their calls and are not kept. A
   * job pinned to an older version still runs: it builds an isolate of its own version again.
   */
  async acquire(key: string, create: () => Promise<PooledIsolate>, lineage?: string, sharing?: Sharing): Promise<PooledIsolate> {
    if (lineage !== undefined) this.supersede(lineage, key);
    const state = this.stateOf(key);
    for (;;) {
      const pooled = state.idle.pop();
      if (pooled) {
        this.forgetIdle(pooled);
        if (!pooled.healthy) {
          pooled.disposeByHost();
          continue;
        }
        pooled.select(key);
        state.busy++;
        return pooled;
      }
      if (state.busy < this.limits.maxPerKey) break;
      await new Promise<void>((resolve) => state.waiting.push(resolve));
    }
    state.busy++;
    const host = sharing ? this.roomyIsolate(sharing.group) : undefined;
    try {
      if (host && sharing) {
        this.forgetIdle(host);
        host.makeRoomFor(key, lineage);
        return await sharing.addTool(host);
      }
      const made = await create();
      made.lineage = lineage;
      if (sharing) made.shareGroup = sharing.group;
      return made;
    } catch (error) {
      state.busy--;
      state.waiting.shift()?.();
      // The isolate shared for the key went with its failed context: its other tools' keys may be unused now.
      if (host) this.forgetUnusedKeysOf(host);
      this.forgetIfUnused(key, state);
      throw error;
    }
  }

  /** Gives an isolate back after a call of `callMs`: kept warm when `reusable`, else disposed. */
  release(pooled: PooledIsolate, reusable: boolean, callMs = 0): void {
    const state = this.keys.get(pooled.key);
    if (state) state.busy--;
    const interpreter = pooled.holdsInterpreter;
    // An interpreter is kept by count: its heap figure would count for nothing.
    if (reusable && !interpreter) this.measure(pooled, callMs);
    const held = pooled.heldKeys();
    // A context of a replaced version would stay warm for nothing: the isolate goes with it.
    const superseded = held.some(({ key, lineage }) => lineage !== undefined && this.latestKeyOf.get(lineage) !== key);
    const fits = interpreter ? this.maxIdleInterpreters > 0 : pooled.heapBytes <= this.limits.maxIdleBytes;
    const kept = state !== undefined && reusable && !superseded && pooled.healthy && fits;
    if (kept) {
      pooled.idleSinceMs = monotonicMs();
      pooled.compacted = false;
      for (const { key } of held) this.stateOf(key).idle.push(pooled);
      this.idleOrder.add(pooled);
      if (interpreter) this.idleInterpreters.add(pooled);
      else this.idleBytes += pooled.heapBytes;
      this.noteRoom(pooled);
      this.evictIdle();
      this.onIdle?.();
    } else {
      pooled.disposeByHost();
    }
    state?.waiting.shift()?.();
    if (!kept) this.forgetUnusedKeysOf(pooled);
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
    this.leaveRoomy(pooled);
    this.noteRoom(pooled);
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

  private stateOf(key: string): KeyState {
    let state = this.keys.get(key);
    if (!state) {
      state = { idle: [], busy: 0, waiting: [] };
      this.keys.set(key, state);
    }
    return state;
  }

  /** The most recently idle isolate of `group` with room for another context, if any. */
  private roomyIsolate(group: string): PooledIsolate | undefined {
    if (this.toolsPerIsolate <= 1) return undefined;
    let found: PooledIsolate | undefined;
    for (const pooled of this.roomy.get(group) ?? []) if (pooled.healthy) found = pooled;
    return found;
  }

  /** Lists an idle isolate as one another context may join, if it may. */
  private noteRoom(pooled: PooledIsolate): void {
    const group = pooled.shareGroup;
    if (group === undefined || this.toolsPerIsolate <= 1 || pooled.holdsInterpreter) return;
    if (pooled.contextCount >= this.toolsPerIsolate || pooled.heapBytes > MAX_SHARED_HEAP_BYTES) return;
    let members = this.roomy.get(group);
    if (!members) {
      members = new Set();
      this.roomy.set(group, members);
    }
    members.add(pooled);
  }

  private leaveRoomy(pooled: PooledIsolate): void {
    const group = pooled.shareGroup;
    const members = group === undefined ? undefined : this.roomy.get(group);
    if (!members?.delete(pooled) || members.size > 0) return;
    this.roomy.delete(group as string);
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

  /** Takes an idle isolate off every idle list (it is acquired or evicted); a no-op for one not idle. */
  private forgetIdle(pooled: PooledIsolate): void {
    if (!this.idleOrder.delete(pooled)) return;
    for (const { key } of pooled.heldKeys()) {
      const state = this.keys.get(key);
      if (!state) continue;
      const at = state.idle.indexOf(pooled);
      if (at >= 0) state.idle.splice(at, 1);
    }
    this.leaveRoomy(pooled);
    if (this.idleInterpreters.delete(pooled)) return;
    this.idleBytes -= pooled.heapBytes;
  }

  private evict(pooled: PooledIsolate): void {
    this.forgetIdle(pooled);
    this.forgetUnusedKeysOf(pooled);
    pooled.disposeByHost();
  }

  /** Forgets the keys of `pooled`'s contexts that nothing uses any more (no call, idle isolate or waiter). */
  private forgetUnusedKeysOf(pooled: PooledIsolate): void {
    for (const { key } of pooled.heldKeys()) {
      const state = this.keys.get(key);
      if (state) this.forgetIfUnused(key, state);
    }
  }

  private forgetIfUnused(key: string, state: KeyState): void {
    if (state.busy === 0 && state.idle.length === 0 && state.waiting.length === 0) this.keys.delete(key);
  }
}
