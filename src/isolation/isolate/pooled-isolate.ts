import type ivm from "isolated-vm";
import { monotonicMs } from "../../clock.js";
import type { CallLedger } from "../call-ledger.js";
import type { CallGuard, Disposable } from "./call-guard.js";
import type { CallLabel, CapabilityReply } from "../wire/messages.js";
import { BIND_GLOBAL, BRIDGE_METHODS, type BridgeMethod, type ContextFlavour, type EntryMethod, type GuestEntry } from "../../contract/isolate.js";

/**
 * Pool bookkeeping of the isolate runner (isolate-runner.ts): one warm isolate, the tool contexts it
 * holds and the call it serves, and the steps of an isolate's set-up that need no isolated-vm constructor
 * (types only here). The warm pool of such isolates is warm-pool.ts's.
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

/** One tool's context in an isolate: what a call of that tool enters. */
interface ToolContext {
  key: string;
  lineage: string | undefined;
  context: ivm.Context | undefined;
  entry: Entry | undefined;
  scriptFilename: string;
}

/**
 * A warm isolate and the tool contexts it holds: usually one; with sharing (warm-pool.ts), up to a few
 * of one Anima's tools, each in a context of its own (its own global and prelude), one of them current.
 * An isolate runs one call at a time, so the fields of the call and the current context are one set.
 */
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
  /** When the host disposed it (`monotonicMs`; python-spares.ts tells a spare thrown away soon after it was taken). */
  disposedAtMs: number | undefined;
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
  /**
   * The tools whose contexts this isolate may take in besides its own (warm-pool.ts, sharing): one Anima's
   * JavaScript tools at one memory limit. Undefined: it holds its one tool only (Python, describe).
   */
  shareGroup: string | undefined;
  /** Whether it was made from the runner's startup snapshot: a further context then comes from it too. */
  fromSnapshot = false;
  /** The lineage (Anima × tool × memory limit) of the current context's tool, if the pool was told one. */
  lineage: string | undefined;
  /** The other tools' contexts in this isolate, by key: `key`, `context`, `entry` and `scriptFilename` are the current one's. */
  private readonly parked = new Map<string, ToolContext>();

  constructor(
    /** The warm pool's key of the current context; a spare interpreter (python-spares.ts) gets its key when it is taken. */
    public key: string,
    readonly isolate: ivm.Isolate,
  ) {}

  /** The keys of the tools whose contexts it holds, the current one first, each with its lineage. */
  heldKeys(): Array<{ key: string; lineage: string | undefined }> {
    return [{ key: this.key, lineage: this.lineage }, ...[...this.parked.values()].map(({ key, lineage }) => ({ key, lineage }))];
  }

  get contextCount(): number {
    return 1 + this.parked.size;
  }

  /** Makes the context of `key` (held: `heldKeys`) the current one. */
  select(key: string): void {
    if (key === this.key) return;
    const target = this.parked.get(key);
    if (!target) throw new Error(`no context of ${JSON.stringify(key)} in this isolate`);
    this.parked.delete(key);
    this.parked.set(this.key, this.current());
    this.restore(target);
  }

  /** Puts the current context aside for a new one, of `key`, which the caller makes and binds. */
  makeRoomFor(key: string, lineage: string | undefined): void {
    this.parked.set(this.key, this.current());
    this.restore({ key, lineage, context: undefined, entry: undefined, scriptFilename: "" });
  }

  private current(): ToolContext {
    return { key: this.key, lineage: this.lineage, context: this.context, entry: this.entry, scriptFilename: this.scriptFilename };
  }

  private restore(tool: ToolContext): void {
    this.key = tool.key;
    this.lineage = tool.lineage;
    this.context = tool.context;
    this.entry = tool.entry;
    this.scriptFilename = tool.scriptFilename;
  }

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
      this.disposedAtMs = monotonicMs();
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
