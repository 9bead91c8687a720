import type { ErrorInfo } from "../../errors.js";
import type { CallEntryKind, LogLevel } from "../../contract/isolate.js";

/**
 * The host/sandbox boundary as typed messages carrying plain data only (strings, numbers, plain
 * objects). Nothing here may hold a function, a class instance or an isolated-vm reference: every value
 * is either written as JSON in a frame of the channel to a sandbox process (frames.ts) or copied into
 * an isolate. Both directions are decoded on arrival (decode.ts). What crosses into an isolate (the bridge, the entry object, the
 * envelopes, the capabilities) is the contract's: src/contract/isolate.ts.
 */

/** A built tool: its bundle text and the content hash that names it. */
export interface ToolBundle {
  /** sha256 of the bundle text, hex. Isolates are pooled per (anima, hash). */
  hash: string;
  /**
   * Script text: the esbuild IIFE followed by the `__awRegister` call. Empty on the wire when the
   * sandbox process already has this hash (it answers `needBundle` if it no longer does).
   */
  code: string;
  /** File name shown in stack traces inside the isolate, e.g. `personal/my_tool.js`. */
  displayName: string;
}

/**
 * What a sandbox process is told of whom a call is for: the Anima's name and the tool, to key its
 * isolates and its state of the call by, and nothing more. The host's own record (`CallContext`) stays in
 * the host: no folder of the host's, no call or job id crosses (`labelled`).
 */
export interface CallLabel {
  anima: string;
  tool: string;
}

/**
 * Who a call acts for, as the host records it. Capabilities are bound to this, never to anything the
 * tool or its sandbox process says. It never crosses to a sandbox process: that is told the label only.
 */
export interface CallContext extends CallLabel {
  animaDir: string;
  /** The call's id in the audit trail: every record the call causes carries it (audit/audit-log.ts). */
  callId?: string;
  /** Set when the call runs a background job: `progress` and `isCancelled` reach that job (see JobCalls). */
  jobId?: string;
}

export interface DescribeRequest {
  op: "describe";
  bundle: ToolBundle;
  timeoutMs: number;
  memoryLimitMb: number;
  /**
   * The Anima whose personal tool this is: it is described in a process of that Anima's cordon, which
   * runs the tool anyway. Without one (core and shared tools, whose descriptions every Anima reads as
   * prompts), in a process that runs no Anima's calls and is discarded after it.
   */
  owner?: string;
}

/**
 * A call. On the host, `context` is the host's own record of it (`CallContext`); what runs isolates
 * (isolate/isolate-runner.ts) needs only its label, and a sandbox process gets nothing more
 * (`LabelledCallRequest`).
 */
export interface CallRequest<C extends CallLabel = CallContext> {
  op: "call";
  bundle: ToolBundle;
  context: C;
  /** `dispatch`/named function with the schema name, or `cli` for `cli_main(argv)`. */
  entry: CallEntryKind;
  schemaName: string;
  /** JSON text of the (already validated) arguments object, or of the argv array for `cli`. */
  payloadJson: string;
  timeoutMs: number;
  memoryLimitMb: number;
  /** Results longer than this many bytes are cut inside the isolate before they cross over. */
  maxResultBytes: number;
  /** Log lines beyond this count are dropped (one notice is logged). */
  maxLogLines: number;
  maxLogLineChars: number;
}

/** A request as the host records it while it is in flight. */
export type SandboxRequest = DescribeRequest | CallRequest;

/**
 * A call as it crosses to a sandbox process: its context is the label alone. The type refuses the host's
 * record (its fields are `never` here), so a `CallRequest` cannot be sent unlabelled by mistake.
 */
export type LabelledCallRequest = CallRequest<CallLabel & { [K in Exclude<keyof CallContext, keyof CallLabel>]?: never }>;

/** A request as it crosses to a sandbox process (`labelled`). */
export type WireRequest = DescribeRequest | LabelledCallRequest;

/** `request` as a sandbox process may see it: a call's context cut down to its label (a fresh object per request). */
export function labelled(request: SandboxRequest): WireRequest {
  if (request.op === "describe") return request;
  return { ...request, context: { anima: request.context.anima, tool: request.context.tool } };
}

/** What a tool module declares, as read by `describe`. Schemas and profile are untrusted JSON. */
export interface ModuleDescription {
  /** Export name → `typeof` value. */
  exports: Record<string, string>;
  /** Raw value of `get_tool_schemas()`, or null when the module has none. */
  schemas: unknown;
  /** Raw `EXECUTION_PROFILE`, or null. */
  profile: unknown;
}

export type ResultValue =
  | { kind: "none" }
  | {
      kind: "text" | "json";
      text: string;
      /** UTF-8 size of the whole result as the tool produced it. */
      bytes: number;
      /** True when `text` was cut inside the isolate because it exceeded `maxResultBytes`. */
      truncated: boolean;
    };

/** Positions a failure carries at most (V8 records ten frames by default). */
export const MAX_TOOL_FRAMES = 8;
/** Largest line or column a position may name: a bundle is at most 16 MiB of sources, far fewer lines than this. */
export const MAX_BUNDLE_POSITION = 10_000_000;

/** A position in a bundle's text as V8 reports it in a stack frame: line and column, both from 1. */
export interface BundlePosition {
  line: number;
  column: number;
}

/**
 * `toolFrames`: where in the tool's bundle the thrown error was raised and called from, innermost first,
 * as the sandbox read them from the error's stack (isolate/tool-frames.ts). Raw positions only, and as
 * untrusted as the rest of the answer: the host maps them through the bundle's source map and shows only
 * those that land in the tool's own files (src/bundling/tool-frames.ts), then drops the field.
 */
export type CallOutcome =
  { ok: true; value: ResultValue; durationMs: number } | { ok: false; error: ErrorInfo; durationMs: number; toolFrames?: BundlePosition[] };
export type DescribeOutcome = { ok: true; module: ModuleDescription } | { ok: false; error: ErrorInfo };

/**
 * The host's answer to a capability call: plain JSON data or a typed error. On the host, `value` may be
 * an `UndecodedText` (bulk-channel.ts): it crosses to a sandbox process as bytes, and serialises as its
 * text anywhere else.
 */
export type CapabilityReply = { ok: true; value: unknown } | { ok: false; error: ErrorInfo };

/**
 * Runs capability `name` (e.g. `fs.readFile`) for the Anima of `context` with untrusted JSON arguments.
 * `name` is as untrusted as they are: a name the contract does not declare (`CapabilityName`) is refused.
 * `signal` aborts when the call that asked ends (result, error, timeout or cancel): work it started stops.
 * `meter` charges what the answer holds on the host as it grows (a fetched body), when the host keeps
 * budgets (call-ledger.ts); without one, nothing is charged beyond the ledger's reservation.
 */
export type CapabilityInvoker<C extends CallLabel = CallContext> = (
  context: C,
  name: string,
  argsJson: string,
  signal?: AbortSignal,
  meter?: AnswerMeter,
) => Promise<CapabilityReply>;

/** Which of the capability byte budgets had no room, and its size in bytes (call-ledger.ts). */
export interface BudgetShortfall {
  scope: "call" | "anima" | "host";
  limitBytes: number;
}

/**
 * The live count of what one capability answer holds on the host (call-ledger.ts): an answer whose size
 * is learnt only as it arrives (a fetched body) is charged to the call's, the Anima's and the host's
 * byte budgets before the host holds the bytes, and stays charged until its sandbox process has taken
 * the answer. It never waits: an answer that does not fit fails.
 */
export interface AnswerMeter {
  /**
   * Sets the bytes the answer holds now to `heldBytes` (more or fewer than before). Returns undefined
   * when charged, or the budget without room for the increase (then nothing changed).
   */
  hold(heldBytes: number): BudgetShortfall | undefined;
}

/** A line a tool logged, with the context of its call (on the host, the host's record of it). */
export interface ToolLogLine<C extends CallLabel = CallContext> {
  level: LogLevel;
  message: string;
  context: C;
}

/**
 * Where isolates run. Implemented in-process by `IsolateRunner` and across processes by `SandboxPool`;
 * the host does not care which.
 */
export interface Executor {
  describe(request: DescribeRequest): Promise<DescribeOutcome>;
  /** Runs a call. Aborting `signal` stops it at once (its isolate is disposed): it ends as `ExecutionError`. */
  call(request: CallRequest, signal?: AbortSignal): Promise<CallOutcome>;
  close(): Promise<void>;
  /**
   * After `close`: entries into isolates of this process that never returned (isolates isolated-vm could
   * not stop). Non-zero means this process cannot exit normally and must end with SIGKILL. Always 0 for
   * sandbox processes, which deal with their own.
   */
  stuckEntries(): number;
}

// ---- wire messages between the host and a sandbox process ------------------------------------------

export type ToSandbox =
  | { type: "request"; id: number; request: WireRequest }
  /**
   * `joinSlicesInto`: the answer's large string came before it in `capabilityReplyPart`s (reply-chunks.ts).
   * `bulkBytes`: the answer's value is the text of that many bytes sent on the bulk pipe (bulk-channel.ts).
   */
  | { type: "capabilityReply"; capabilityId: number; reply: CapabilityReply; joinSlicesInto?: "value" | "body"; bulkBytes?: number }
  | { type: "capabilityReplyPart"; capabilityId: number; text: string }
  /** The caller gave up on request `id`: stop its isolate now. */
  | { type: "abort"; id: number }
  /** The Anima's calls now go to another process: dispose its warm isolates here. */
  | { type: "forget"; anima: string }
  /** Asks for a `warmPool` message answering `statsId`. */
  | { type: "stats"; statsId: number }
  | { type: "shutdown" };

export type FromSandbox =
  | { type: "ready" }
  /** `parted`: the result's text is the request's `part` slices joined (its `text` here is empty). */
  | { type: "response"; id: number; outcome: CallOutcome | DescribeOutcome; parted?: true }
  /** The process no longer has request `id`'s bundle: the host sends the request again, once per request. */
  | { type: "needBundle"; id: number }
  /**
   * A slice (at most `PART_CHARS` characters, frames.ts) of a string too large for one frame: the
   * `argsJson` of the next `capability` message of request `id`, or the result text of its `response`,
   * which say `parted: true`. Slices of one string come in order, before the message that takes them.
   */
  | { type: "part"; id: number; text: string }
  /** A log line of request `id` (the host attributes it from its own record of that request). */
  | { type: "log"; id: number; level: ToolLogLine["level"]; message: string }
  /**
   * A tool of request `id` asked for a capability; the host process runs it (policy and audit live
   * there) for the Anima of its own record of that request, never for anything the message says.
   */
  | { type: "capability"; capabilityId: number; id: number; name: string; argsJson: string; parted?: true }
  /**
   * The process lost an isolate's thread (see IsolateRunnerOptions.onUnrecoverable): send it nothing
   * more. It answers what it already has, then ends itself; the pool starts a replacement at once.
   */
  | { type: "retiring"; reason: string }
  /** What the process's warm pool holds (for operators only: no limit of the host relies on it). */
  | ({ type: "warmPool"; statsId: number } & WarmPoolStats);

/** What a warm pool holds now (for the audit report and benchmarks). */
export interface WarmPoolStats {
  idleIsolates: number;
  idleBytes: number;
  maxIdleBytes: number;
  /** Idle isolates disposed to stay within the limits, since the pool started. */
  evictions: number;
  /** Idle isolates holding a Python interpreter (not in `idleBytes`). */
  idleInterpreters: number;
  /** Python interpreters kept ready outside the pool: a spare and a described tool's isolate (isolate/python-spares.ts). */
  spareInterpreters: number;
  /** Idle isolates compacted since the pool started (isolate/idle-compaction.ts). */
  compactions: number;
}
