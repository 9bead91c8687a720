import type { HostConfig } from "../config.js";
import type { ErrorInfo } from "../errors.js";
import type {
  AnswerMeter,
  CallContext,
  CallLabel,
  CallOutcome,
  CallRequest,
  CapabilityInvoker,
  CapabilityReply,
  DescribeOutcome,
  DescribeRequest,
  Executor,
  ToolLogLine,
} from "./wire/messages.js";
import type { CapabilityBytesReport } from "./call-ledger.js";
import type { IsolateRunner } from "./isolate/isolate-runner.js";
import { SandboxPool, type WarmPoolReport } from "./pool/sandbox-pool.js";
import { AnimaQueues } from "./scheduling/anima-queues.js";
import { type OsSandboxStatus, describeOsSandbox } from "./os/os-sandbox.js";

/** What the host learns from the executor besides results: refusals by its limits, protocol violations. */
export interface ExecutorReports {
  onRefusal?: (context: CallContext, name: string, error: ErrorInfo) => void;
  /** `cordon`: the cordon of the process that broke the protocol (absent for a blank spare). */
  onViolation?: (message: string, cordon?: string) => void;
}

/**
 * The executor a host runs its calls on, with what operators and tests may read of its sandbox processes:
 * the composition root makes one per host and the host keeps it (`sandboxOf(host)` in host.ts). For an
 * in-process host there are no sandbox processes: no pids, no OS sandbox, no warm pool report, no spares.
 */
export interface SandboxHandle {
  readonly executor: Executor;
  /** The OS sandbox of the sandbox processes: undefined in-process. */
  readonly osSandbox: OsSandboxStatus | undefined;
  /** The ids of the sandbox processes running now. Killing one is how supervision is tested. */
  pids(): number[];
  /** The sandbox process serving `anima`, once it has made a call. */
  pidFor(anima: string): number | undefined;
  /** What the warm pools hold now, per sandbox process (as each reports it). */
  warmPoolReport(): Promise<WarmPoolReport[]>;
  /** Spare sandbox processes ready for a new cordon's first call. */
  sparesReady(): number;
  /** The memory limit the host's watchdog holds sandbox process `pid` to now, bytes (undefined: not watched). */
  memoryLimitBytesOf(pid: number): number | undefined;
  /**
   * The capability byte budgets the host keeps for the calls on its sandbox processes: in flight now,
   * and the most that was (undefined in-process, where the isolate runner keeps its own).
   */
  capabilityBytes(): CapabilityBytesReport | undefined;
}

/** Picks where isolates run (see `HostOptions.isolation`). */
export function createExecutor(
  config: HostConfig,
  onLog: (line: ToolLogLine) => void,
  invokeCapability?: CapabilityInvoker,
  reports: ExecutorReports = {},
): SandboxHandle {
  const reportLost = (reason: string) => {
    try {
      config.onLog({
        level: "error",
        logger: "animaworks.host",
        message: `${reason}; in-process isolation cannot reclaim it (use isolation "process" for long-running hosts)`,
      });
    } catch {
      // nowhere else to report it
    }
  };
  const callLimits = { maxConcurrentPerAnima: config.maxConcurrentCallsPerAnima, maxQueuedPerAnima: config.maxQueuedCallsPerAnima };
  if (config.isolation === "in-process") {
    return {
      executor: new AnimaQueues(new InProcessExecutor(config, onLog, reportLost, invokeCapability, reports), callLimits),
      osSandbox: undefined,
      pids: () => [],
      pidFor: () => undefined,
      warmPoolReport: () => Promise.resolve([]),
      sparesReady: () => 0,
      memoryLimitBytesOf: () => undefined,
      capabilityBytes: () => undefined,
    };
  }
  const pool = new SandboxPool({
    osSandbox: config.osSandbox,
    cordons: config.cordons,
    processes: config.sandboxProcesses,
    maxProcesses: config.maxSandboxProcesses,
    spareProcesses: config.spareSandboxProcesses,
    warmIsolatesMb: config.warmIsolatesMb,
    maxIdleIsolates: config.maxIdleIsolates,
    isolateSnapshot: config.isolateSnapshot,
    compactIdleAfterMs: config.compactIdleIsolatesAfterMs,
    toolsPerIsolate: config.toolsPerIsolate,
    pythonInterpreters: { warm: config.warmPythonInterpreters, spare: config.sparePythonInterpreter },
    onLog,
    ...(invokeCapability ? { invokeCapability } : {}),
    onStderr: (message) => config.onLog({ level: "warn", logger: "animaworks.host", message }),
    ...reports,
    // A test's compromised stand-in (HostOptions.sandboxEntryScript); undefined: the real entry.
    entryScript: config.sandboxEntryScript,
  });
  // Said once, loudly, when the second layer is missing (and in `audit`).
  if (!pool.osSandbox.enabled && config.osSandbox === "auto") {
    config.onLog({
      level: "warn",
      logger: "animaworks.host",
      message: `${describeOsSandbox(pool.osSandbox)}. Install bubblewrap for a second isolation layer.`,
    });
  }
  return {
    executor: new AnimaQueues(pool, callLimits),
    osSandbox: pool.osSandbox,
    pids: () => pool.pids().filter((pid): pid is number => pid !== undefined),
    pidFor: (anima) => pool.pidFor(anima),
    warmPoolReport: () => pool.warmPoolStats(),
    sparesReady: () => pool.sparesReady(),
    memoryLimitBytesOf: (pid) => pool.memoryLimitBytesOf(pid),
    capabilityBytes: () => pool.capabilityBytes(),
  };
}

/**
 * Runs isolates in this process. isolated-vm is imported on first use, so a host in process mode
 * never loads it (and does not need `--no-node-snapshot`).
 *
 * The runner is handed each call's label, as a sandbox process is, never the host's record of the call:
 * what it reports back (capability requests, log lines, refusals) carries that label object, by which
 * the host's own `CallContext` is found here (a weak map: a record lives as long as its label does; a
 * label without one, which the runner cannot report, would get nothing).
 */
class InProcessExecutor implements Executor {
  private runner: Promise<IsolateRunner> | undefined;
  private loaded: IsolateRunner | undefined;
  /** The host's record of each call, by the label object its runner was given. */
  private readonly contextOf = new WeakMap<CallLabel, CallContext>();

  constructor(
    private readonly config: Pick<
      HostConfig,
      | "warmIsolatesMb"
      | "maxIdleIsolates"
      | "isolateSnapshot"
      | "compactIdleIsolatesAfterMs"
      | "toolsPerIsolate"
      | "warmPythonInterpreters"
      | "sparePythonInterpreter"
    >,
    private readonly onLog: (line: ToolLogLine) => void,
    private readonly onUnrecoverable: (reason: string) => void,
    private readonly invokeCapability: CapabilityInvoker | undefined,
    private readonly reports: ExecutorReports,
  ) {}

  private get(): Promise<IsolateRunner> {
    this.runner ??= import("./isolate/isolate-runner.js").then(({ IsolateRunner }) => {
      const { invokeCapability } = this;
      const { onRefusal } = this.reports;
      this.loaded = new IsolateRunner({
        warmPoolBytes: this.config.warmIsolatesMb * 2 ** 20,
        maxIdleIsolates: this.config.maxIdleIsolates,
        startupSnapshot: this.config.isolateSnapshot,
        compactIdleAfterMs: this.config.compactIdleIsolatesAfterMs,
        toolsPerIsolate: this.config.toolsPerIsolate,
        pythonInterpreters: { warm: this.config.warmPythonInterpreters, spare: this.config.sparePythonInterpreter },
        onLog: (line) => {
          const context = this.contextOf.get(line.context);
          if (context) this.onLog({ level: line.level, message: line.message, context });
        },
        onUnrecoverable: this.onUnrecoverable,
        ...(invokeCapability
          ? {
              invokeCapability: (label: CallLabel, name: string, argsJson: string, signal?: AbortSignal, meter?: AnswerMeter): Promise<CapabilityReply> => {
                const context = this.contextOf.get(label);
                if (!context) return Promise.resolve({ ok: false, error: { type: "ExecutionError", fault: "tool", message: `${name}: the call has ended` } });
                return invokeCapability(context, name, argsJson, signal, meter);
              },
            }
          : {}),
        ...(onRefusal
          ? {
              onRefusal: (label: CallLabel, name: string, error: ErrorInfo) => {
                const context = this.contextOf.get(label);
                if (context) onRefusal(context, name, error);
              },
            }
          : {}),
      });
      return this.loaded;
    });
    return this.runner;
  }

  async describe(request: DescribeRequest): Promise<DescribeOutcome> {
    return (await this.get()).describe(request);
  }

  async call(request: CallRequest, signal?: AbortSignal): Promise<CallOutcome> {
    const label: CallLabel = { anima: request.context.anima, tool: request.context.tool };
    this.contextOf.set(label, request.context);
    return (await this.get()).call({ ...request, context: label }, signal);
  }

  async close(): Promise<void> {
    if (this.runner) await (await this.runner).close();
  }

  stuckEntries(): number {
    return this.loaded?.stuckEntries() ?? 0;
  }
}

/** The isolation layers a handle's calls run in, outermost first, as call records name them. */
export function isolationLayers(handle: Pick<SandboxHandle, "osSandbox">): string[] {
  if (!handle.osSandbox) return ["isolate"];
  return handle.osSandbox.enabled ? [handle.osSandbox.seccomp ? "bwrap+seccomp" : "bwrap", "process", "isolate"] : ["process", "isolate"];
}
