import type { JobCallHooks } from "./capabilities/job-calls.js";
import type { CallOptions, CallResult, ToolHost } from "./host-api.js";
import type { LogRecord } from "./host-options.js";
import type { ToolBundle } from "./isolation/wire/messages.js";
import type { ProfileEntry } from "./registry/profile.js";

/**
 * A call taken apart into its two steps: checked and pinned to the tool version current at submit, run
 * later with exactly that version. Background jobs need the steps apart (jobs/service.ts submits,
 * jobs/host-runner.ts runs); a library user calls (`ToolHost.call`) or submits a job (`JobService`), so
 * this is not part of the public `ToolHost`. Every host the composition root makes implements it
 * (composition.ts `ComposedHost`); the job service reaches it with `preparedCallsOf`.
 */
export interface PreparedCallRunner {
  /** Validates a call and pins the tool version, without running it. */
  prepare(anima: string, schemaName: string, args?: unknown, options?: CallOptions): Promise<PreparedCall>;
  /** Runs a prepared call with exactly the bundle it names. Never throws for tool failures. */
  runPrepared(prepared: PreparedCall, options?: RunOptions): Promise<CallResult>;
}

/** How `runPrepared` runs a call: on behalf of a background job, and stoppable. */
export interface RunOptions {
  /**
   * Aborting stops the call at once (its isolate is disposed); it then ends as `ExecutionError`, or as the
   * signal's reason when that is a `ToolHostError`. A background job's run signal is its one deadline: it
   * aborts with `Timeout` at the job's deadline, or names the cancel once its grace ran out.
   */
  signal?: AbortSignal;
  /** The call runs background job `id`: the tool's `progress()` and `isCancelled()` reach these hooks. */
  job?: { id: string } & JobCallHooks;
  /** Receives this call's tool log lines instead of the host's `onLog` (see `CallOptions.onLog`). */
  onLog?: (record: LogRecord) => void;
  /** Also give an object result as `structured`, as `CallOptions.structured` does. Default: false. */
  structured?: boolean;
}

/**
 * A call checked and bound to the tool version current when it was prepared: what a background job
 * stores at submit and runs later (a later edit of the tool does not change it). Plain data.
 */
export interface PreparedCall {
  anima: string;
  tool: string;
  action: string;
  schemaName: string;
  /** Validated arguments, without anima_dir (injected when it runs). */
  argsJson: string;
  bundle: ToolBundle;
  timeoutMs: number;
  profile?: ProfileEntry;
}

/**
 * The runner of a host the composition root made (or of a view in front of one, as a CLI invocation's
 * is). Any other `ToolHost` (a test double) cannot run background jobs: a TypeError says so.
 */
export function preparedCallsOf(host: ToolHost): PreparedCallRunner {
  const runner = host as ToolHost & Partial<PreparedCallRunner>;
  if (typeof runner.prepare !== "function" || typeof runner.runPrepared !== "function") {
    throw new TypeError("background jobs need a host made by createHost: this ToolHost cannot prepare and run calls apart");
  }
  return runner as PreparedCallRunner;
}
