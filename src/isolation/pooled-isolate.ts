import type ivm from "isolated-vm";
import type { CallLedger } from "./call-ledger.js";
import type { CallGuard, Disposable } from "./call-guard.js";
import type { CallContext, CapabilityReply } from "./protocol.js";

/** Pool bookkeeping of the isolate runner (isolate-runner.ts): one warm isolate and what it serves. */

export interface ActiveCall {
  context: CallContext;
  deadline: number;
  guard: CallGuard;
  timers: Map<number, NodeJS.Timeout>;
  /** The host's account of the call: limits, denials issued, the signal that ends its work. */
  ledger: CallLedger;
  /** Capability answers waiting for the batch entering now (see IsolateRunner.deliver). */
  replies: Array<[number, CapabilityReply]>;
  settling: boolean;
}

export interface Entry {
  call: ivm.Reference<(...args: unknown[]) => Promise<string>>;
  describe: ivm.Reference<() => Promise<string>>;
  fireTimer: ivm.Reference<(id: number) => void>;
  settleCapabilities: ivm.Reference<(batchJson: string) => void>;
}

export class PooledIsolate implements Disposable {
  /** The call being served (the bridge attributes logs and timers to it). */
  active: ActiveCall | undefined;
  /** Whose deadline governs this isolate right now, from set-up on (also during describe). */
  guard: CallGuard | undefined;
  entry: Entry | undefined;
  context: ivm.Context | undefined;
  disposedByHost = false;

  constructor(
    readonly key: string,
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

interface KeyState {
  idle: PooledIsolate[];
  busy: number;
  waiting: Array<() => void>;
}

/**
 * Warm isolates per key (Anima, bundle hash, memory limit): at most `maxPerKey` busy at once per key (a
 * further call waits for one), and at most `maxIdle` idle in all, the least recently used disposed first.
 * An isolate serves one call at a time.
 */
export class IsolatePool {
  private readonly keys = new Map<string, KeyState>();
  /** Idle isolates in least-recently-used order (first = oldest). */
  private readonly idleOrder = new Set<PooledIsolate>();

  constructor(
    private readonly maxIdle: number,
    private readonly maxPerKey: number,
  ) {}

  /** An idle healthy isolate of `key`, else a new one from `create` once the key has room. */
  async acquire(key: string, create: () => Promise<PooledIsolate>): Promise<PooledIsolate> {
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
      return await create();
    } catch (error) {
      state.busy--;
      state.waiting.shift()?.();
      throw error;
    }
  }

  /** Gives an isolate back: kept warm when `reusable`, else disposed. */
  release(pooled: PooledIsolate, reusable: boolean): void {
    const state = this.keys.get(pooled.key);
    if (!state) return pooled.disposeByHost();
    state.busy--;
    if (reusable) {
      state.idle.push(pooled);
      this.idleOrder.add(pooled);
      this.evictIdle();
    } else {
      pooled.disposeByHost();
    }
    state.waiting.shift()?.();
    this.forgetIfUnused(pooled.key, state);
  }

  disposeIdle(): void {
    for (const state of this.keys.values()) {
      for (const pooled of state.idle) pooled.disposeByHost();
      state.idle.length = 0;
    }
    this.idleOrder.clear();
  }

  private evictIdle(): void {
    while (this.idleOrder.size > this.maxIdle) {
      const oldest = this.idleOrder.values().next().value as PooledIsolate;
      this.idleOrder.delete(oldest);
      const state = this.keys.get(oldest.key);
      if (state) {
        state.idle.splice(state.idle.indexOf(oldest), 1);
        this.forgetIfUnused(oldest.key, state);
      }
      oldest.disposeByHost();
    }
  }

  private forgetIfUnused(key: string, state: KeyState): void {
    if (state.busy === 0 && state.idle.length === 0 && state.waiting.length === 0) this.keys.delete(key);
  }
}
