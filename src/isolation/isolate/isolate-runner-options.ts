import type { CapabilityLimits } from "../call-ledger.js";
import type { CallLabel, CapabilityInvoker, CapabilityReply, ToolLogLine } from "../wire/messages.js";
import type { ErrorInfo } from "../../errors.js";
import type { WarmPoolLimits } from "./warm-pool.js";
import { COMPACT_IDLE_AFTER_MS } from "./idle-compaction.js";

/** The options of an `IsolateRunner` (isolate-runner.ts), each with its default and unit. */
export interface IsolateRunnerOptions {
  /**
   * Memory the idle warm isolates may hold, bytes (V8's committed heap plus external memory of each, as
   * V8 reports it); the least recently used beyond it are disposed. Default: 256 MiB.
   */
  warmPoolBytes?: number;
  /** Idle warm isolates kept at most, whatever their size. Default: no limit (the memory budget decides). */
  maxIdleIsolates?: number;
  /** Whether isolates are made from a startup snapshot of the prelude (startup-snapshot.ts). Default: true. */
  startupSnapshot?: boolean;
  /** Python interpreters kept between calls (see `PythonInterpreterSettings`). Default: `DEFAULT_PYTHON_INTERPRETERS`. */
  pythonInterpreters?: PythonInterpreterSettings;
  /**
   * How long an isolate is idle in the warm pool before the runner compacts it (a collection that gives
   * back the memory its calls left: idle-compaction.ts), ms; 0 never does. Only where the process started
   * with V8's collector exposed (sandbox processes: v8-flags.ts). Default: `COMPACT_IDLE_AFTER_MS` (30 s).
   */
  compactIdleAfterMs?: number;
  /** Isolates per (anima, bundle) at once; further calls wait for one. Default: 4. */
  maxIsolatesPerKey?: number;
  /**
   * Tools of one Anima (JavaScript, at one memory limit) whose contexts one idle warm isolate may hold,
   * each with its own global (warm-pool.ts, sharing): a further small tool then costs ≈ 0.3 MB instead of
   * an isolate's ≈ 1.5 MB. The price: a stop or the memory limit of one ends the others' warm contexts,
   * and one's heap counts against the others' memory limit. 1 never shares. Default: `TOOLS_PER_ISOLATE`.
   */
  toolsPerIsolate?: number;
  /** Receives every tool log line, with the label of its call (the very object the call was given). */
  onLog?: (line: ToolLogLine<CallLabel>) => void;
  /**
   * isolated-vm lost control of an isolate (V8 out of memory, or a script that would not terminate), or
   * an isolate did not return after it was stopped (`STOP_GRACE_MS`), which is how such a loss starts.
   * Its thread may be gone for good, and it can take locks with it: the process should get no new calls,
   * and be replaced once its other calls end. May be called more than once for one isolate.
   */
  onUnrecoverable?: (reason: string) => void;
  /**
   * Runs the capabilities tools ask for (fs, fetch, credentials), for the call whose label it is given
   * (the very object the call was given). Default: every capability is refused.
   */
  invokeCapability?: CapabilityInvoker<CallLabel>;
  /** Capability calls and bytes in flight (see `CapabilityLimits` for the defaults). */
  capabilityLimits?: Partial<CapabilityLimits>;
  /** Told of each capability request refused by a host-side limit (a bypassed prelude). */
  onRefusal?: (context: CallLabel, name: string, error: ErrorInfo) => void;
}

/**
 * The Python interpreters a sandbox process keeps between calls (`HostOptions.warmPythonInterpreters` and
 * `sparePythonInterpreter`): idle ones in its warm pool, at most `warm`, and, with `spare`, one booted
 * interpreter holding no tool per memory limit (python-spares.ts).
 */
export interface PythonInterpreterSettings {
  warm: number;
  spare: boolean;
}

export const DEFAULT_PYTHON_INTERPRETERS: PythonInterpreterSettings = { warm: 2, spare: true };

/** The warm pool's limits (pooled-isolate.ts) of a runner with `options`, whether it keeps a spare interpreter, when it compacts. */
export function poolSettingsOf(options: IsolateRunnerOptions): { pool: WarmPoolLimits; spareInterpreter: boolean; compactIdleAfterMs: number } {
  const python = options.pythonInterpreters ?? DEFAULT_PYTHON_INTERPRETERS;
  return {
    pool: {
      maxIdleBytes: options.warmPoolBytes ?? 256 * 2 ** 20,
      maxIdleCount: options.maxIdleIsolates ?? Number.POSITIVE_INFINITY,
      maxPerKey: options.maxIsolatesPerKey ?? 4,
      toolsPerIsolate: options.toolsPerIsolate ?? TOOLS_PER_ISOLATE,
      maxIdleInterpreters: python.warm,
    },
    spareInterpreter: python.spare,
    compactIdleAfterMs: options.compactIdleAfterMs ?? COMPACT_IDLE_AFTER_MS,
  };
}

/** Tools' contexts one warm isolate may hold by default (`IsolateRunnerOptions.toolsPerIsolate`). */
export const TOOLS_PER_ISOLATE = 4;

/** Isolates built from the prelude script before the runner makes a startup snapshot (startup-snapshot.ts). */
export const SNAPSHOT_AFTER_ISOLATES = 3;

/** `onLog` made safe: a throwing log sink must cost neither the host (an uncaught error) nor the sandbox (a host stack). */
export function guardedLogSink(onLog: IsolateRunnerOptions["onLog"] = () => {}): (line: ToolLogLine<CallLabel>) => void {
  return (line) => {
    try {
      onLog(line);
    } catch {
      // dropped: there is nowhere safer to report a broken log sink
    }
  };
}

/** The capability invoker of a runner given none: every capability is refused. */
export const refuseCapabilities: CapabilityInvoker<CallLabel> = async (): Promise<CapabilityReply> => ({
  ok: false,
  error: { type: "PermissionDenied", fault: "host", message: "capabilities are not available in this host" },
});
