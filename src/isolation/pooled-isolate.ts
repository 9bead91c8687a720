import type ivm from "isolated-vm";
import type { CallGuard, Disposable } from "./call-guard.js";
import type { CallContext } from "./protocol.js";

/** Pool bookkeeping of the isolate runner (isolate-runner.ts): one warm isolate and what it serves. */

export interface ActiveCall {
  context: CallContext;
  deadline: number;
  guard: CallGuard;
  timers: Map<number, NodeJS.Timeout>;
}

export interface Entry {
  call: ivm.Reference<(...args: unknown[]) => Promise<string>>;
  describe: ivm.Reference<() => Promise<string>>;
  fireTimer: ivm.Reference<(id: number) => void>;
  settleCapability: ivm.Reference<(id: number, replyJson: string) => void>;
  endCall: ivm.Reference<() => void>;
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

export interface KeyState {
  idle: PooledIsolate[];
  busy: number;
  waiting: Array<() => void>;
}
