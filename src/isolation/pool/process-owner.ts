import type { CallLedger } from "../call-ledger.js";
import type { OsSandboxStatus } from "../os/os-sandbox.js";
import type { Rescheduler } from "../os/rescheduler.js";
import type { CallOutcome, CapabilityInvoker, DescribeOutcome, SandboxRequest, ToolLogLine, WireRequest } from "../wire/messages.js";
import type { ErrorInfo } from "../../errors.js";
import { monotonicMs } from "../../clock.js";
import { isPythonBundle } from "../wire/tool-bundle.js";
import type { ChildLink, ProcessGuard } from "./child-link.js";
import type { SandboxChildSpec } from "./child-spawn.js";
import type { PythonInterpreterSettings } from "../isolate/isolate-runner-options.js";
import type { LiveChildren } from "./live-children.js";
import type { HeldChars } from "../wire/parts.js";
import { stoppedHow } from "../os/process-cpu.js";

/**
 * What one supervised sandbox process (child-handle.ts) needs of the pool that owns it, and the record
 * the host keeps of each request it sent there.
 */

/** What a sandbox process needs from its pool. */
export interface ProcessOwner {
  /** The cordon whose code the owner's processes run (scheduling/cordons.ts), named in violation reports. */
  readonly cordon: string;
  /** The watch on what each process holds outside its isolates; none where /proc cannot be read. */
  readonly guard: ProcessGuard | undefined;
  /**
   * What the parts of large strings (wire/parts.ts) may hold: `cordon`, shared by every process of this
   * owner's cordon, whatever its state; `host`, by all the host's processes.
   */
  readonly heldParts: { readonly cordon: HeldChars; readonly host: HeldChars };
  /** Every process the pool started and has not seen end (live-children.ts): each is added when spawned. */
  readonly live: LiveChildren;
  /** A test's stand-in for the process's entry (child-spawn.ts `entryScript`). */
  readonly entryScript: string | undefined;
  readonly maxIdleIsolates: number;
  readonly isolateSnapshot: boolean;
  /** The Python interpreters each process keeps between calls (`HostOptions.warmPythonInterpreters`, `sparePythonInterpreter`). */
  readonly pythonInterpreters: PythonInterpreterSettings;
  /** Idle time before a process compacts an isolate, ms (`HostOptions.compactIdleIsolatesAfterMs`). */
  readonly compactIdleAfterMs: number;
  /** Tools of one Anima whose contexts one warm isolate may hold (`HostOptions.toolsPerIsolate`). */
  readonly toolsPerIsolate: number;
  /** Warm pool budget of each process, bytes. */
  readonly warmPoolBytes: number;
  readonly closing: boolean;
  readonly invokeCapability: CapabilityInvoker;
  readonly onLog: (line: ToolLogLine) => void;
  readonly onViolation: (message: string, cordon?: string) => void;
  /** A line a sandbox process wrote to its stderr (bounded; see child-stderr.ts). */
  readonly onStderr: (message: string) => void;
  /** Whether children start inside bubblewrap. */
  readonly osSandbox: OsSandboxStatus;
  /** Runs chrt and taskset for processes demoted in place (one shell for the pool). */
  readonly rescheduler: Rescheduler;
  /** True when request `id` was sent to process `index` (see SandboxPool.wasSentTo). */
  wasSentTo(id: number, index: number): boolean;
  /** Call `id` of `anima` has ended (whatever its outcome). */
  ended(anima: string, id: number): void;
  /** Call `id` of `anima`, which waited for this process to start, has been sent to it now. */
  sentAfterStart(anima: string, id: number): void;
  /** A blank process (`ready`, or still starting) that this one may adopt instead of starting its own (nice 0 only). */
  takeSpare(nice: number): { link: ChildLink; ready: boolean } | undefined;
  /**
   * True when the pool has as many processes alive (whoever holds them: retiring and demoted ones too) or
   * due to start as its cap allows (sandbox-pool.ts): a slot's replacement then waits for what it left.
   */
  atProcessCap(): boolean;
  /**
   * Makes room under the cap for one more process of this cordon (a low-priority process, or the fresh one
   * that replaces a process demoted in place): ends idle cordons, least recently used first, and returns
   * when their processes have ended; undefined when there is room, or no idle cordon to end (then the
   * pool goes over its cap as the rule in sandbox-pool.ts allows).
   */
  roomForOne(): Promise<unknown> | undefined;
}

export interface Pending {
  request: SandboxRequest;
  /** The child the request was sent to (or will be sent to, once it is ready). */
  child: ChildLink | undefined;
  /** The child asked for the request's bundle again (`needBundle`); it may once. */
  bundleResent?: boolean;
  resolve: (outcome: CallOutcome | DescribeOutcome) => void;
  /** The last-resort hard stop (see SandboxPool's invariants), due at `killAt` (`monotonicMs()` time). */
  timer: NodeJS.Timeout;
  killAt: number;
  /** How long after it is sent the hard stop comes, ms (its deadline and the pool's grace). */
  hardStopMs: number;
  startedAt: number;
  /** The host's account of a call (none for describe): limits, denials issued, its abort signal. */
  ledger: CallLedger | undefined;
  /** Bytes of capability traffic this request's process relayed for it so far (arguments and answers). */
  relayedBytes: number;
}

/** How a process of `owner`'s is started (child-spawn.ts). */
export function spawnSpec(
  owner: Pick<
    ProcessOwner,
    "osSandbox" | "warmPoolBytes" | "maxIdleIsolates" | "isolateSnapshot" | "pythonInterpreters" | "compactIdleAfterMs" | "toolsPerIsolate" | "entryScript"
  >,
  nice: number,
): SandboxChildSpec {
  const spec: SandboxChildSpec = {
    osSandbox: owner.osSandbox,
    nice,
    warmPoolBytes: owner.warmPoolBytes,
    maxIdleIsolates: owner.maxIdleIsolates,
    isolateSnapshot: owner.isolateSnapshot,
    pythonInterpreters: owner.pythonInterpreters,
    compactIdleAfterMs: owner.compactIdleAfterMs,
    toolsPerIsolate: owner.toolsPerIsolate,
  };
  return owner.entryScript === undefined ? spec : { ...spec, entryScript: owner.entryScript };
}

/** The answer to a request that comes while its pool is closing: no process is started for it. */
export function shuttingDown(op: "call" | "describe"): CallOutcome | DescribeOutcome {
  const error: ErrorInfo = { type: "SandboxCrashed", fault: "host", message: "the host is shutting down" };
  return op === "describe" ? { ok: false, error: { ...error, type: "LoadError" } } : { ok: false, error, durationMs: 0 };
}

export function failureFor(pending: Pending, error: ErrorInfo): CallOutcome | DescribeOutcome {
  if (pending.request.op === "describe") return { ok: false, error: { ...error, type: "LoadError" } };
  return { ok: false, error, durationMs: monotonicMs() - pending.startedAt };
}

/**
 * Why `pending`, unanswered at its hard stop (`after` its deadline, or its caller's stop), failed, as the
 * host reads its process's tree (process-cpu.ts `stoppedHow`): a process stopped by the launch's
 * wrappers' stop was stopped from outside (the host's fault); one stopped only in itself may have done it
 * to itself, and fails as its call would have anyway (the tool's).
 */
export function unansweredFailure(pending: Pending, after: "deadline" | "stopped"): { error: ErrorInfo; stopped: "outside" | "itself" | undefined } {
  const stopped = pending.child?.pid === undefined ? undefined : stoppedHow(pending.child.pid);
  const error = unansweredError(pending.request.timeoutMs, stopped === "outside" ? "stopped from outside" : after);
  return { error: stopped === "itself" ? { ...error, message: `${error.message} (it had stopped: SIGSTOP)` } : error, stopped };
}

/** Why a request's process was killed unanswered: its deadline passed, its caller stopped it, or it was stopped from outside. */
export function unansweredError(timeoutMs: number, after: "deadline" | "stopped" | "stopped from outside"): ErrorInfo {
  if (after === "stopped from outside") {
    return {
      type: "SandboxCrashed",
      fault: "host",
      message: "the sandbox process was stopped by a signal from outside the host (SIGSTOP) and did not answer; it was restarted",
      hint: "retry the call; the tool did nothing wrong",
    };
  }
  return after === "deadline"
    ? { type: "Timeout", fault: "tool", message: `the tool did not finish within ${timeoutMs} ms and its sandbox was restarted` }
    : { type: "ExecutionError", fault: "caller", message: "the call was stopped by its caller, and its sandbox did not answer and was restarted" };
}

/** Why the requests in flight on a sandbox process that ended fail: it stopped (`reason`: its exit code or signal), or was stopped from outside. */
export function crashedError(stoppedFromOutside: boolean, reason: string): ErrorInfo {
  return stoppedFromOutside
    ? {
        type: "SandboxCrashed",
        fault: "host",
        message: "the sandbox process was stopped from outside the host (SIGSTOP) and was restarted while the call was running",
        hint: "retry the call; the tool did nothing wrong",
      }
    : {
        type: "SandboxCrashed",
        fault: "host",
        message: `the sandbox process stopped (${reason}) while the call was running`,
        hint: "retry the call; if it keeps failing, the tool is crashing its sandbox",
      };
}

/**
 * The Anima a request is placed and judged under (cordon-pool.ts), or none: a call's Anima, or the owner
 * of a personal Python tool's load (which may run its load timeout plus an interpreter's boot); any other
 * load goes to the least busy process unjudged (cordon-pool.ts `describe` says why).
 */
export function placedAnima(request: SandboxRequest | WireRequest): string | undefined {
  if (request.op === "call") return request.context.anima;
  return isPythonBundle(request.bundle.code) ? request.owner : undefined;
}
