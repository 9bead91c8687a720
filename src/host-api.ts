import type { AuditLog } from "./audit/audit-log.js";
import type { HostConfig } from "./config.js";
import type { LogRecord } from "./host-options.js";
import type { ErrorInfo, WireError } from "./errors.js";
import type { DiscoveryProblem } from "./registry/discovery.js";
import type { ToolsChange } from "./registry/tool-watch.js";
import type { ToolInfo, ToolListing } from "./registry/listing.js";
import type { AnimaReport } from "./audit/report.js";

export type { ToolsChange } from "./registry/tool-watch.js";
export type { SchemaInfo, ToolInfo, ToolListing } from "./registry/listing.js";
export type { AnimaReport, ToolActivity } from "./audit/report.js";

/** The host's public API: what `createHost` returns and the plain data it exchanges. */

/**
 * What a call returns. Tool failures are results, not exceptions (as in MCP); a failure is spelled as the
 * CLI's `-j` envelope spells it (`error_type`, `message`, `fault`, `hint`), made by `callFailure` only.
 */
export type CallResult =
  | {
      status: "ok";
      output: string;
      truncated: boolean;
      originalBytes: number;
      durationMs: number;
      /** The call's id in the audit trail (`audit events`, `audit --call`): on every record the call caused. */
      callId?: string;
      /** The object the tool returned (with `CallOptions.structured`, or when the action declares `output_schema`). */
      structured?: Record<string, unknown>;
    }
  | ({ status: "error"; durationMs: number; callId?: string } & WireError);

export interface CallOptions {
  /** Overrides the action's timeout, in ms (still capped by the host's `maxCallTimeoutMs`). */
  timeoutMs?: number;
  /**
   * Also give an object result as `structured` (parsed on the host from what the tool returned; MCP's
   * `structuredContent`). Default: false; always given, and checked, for an action with `output_schema`.
   */
  structured?: boolean;
  /**
   * Aborting stops the call at once (its isolate is disposed); it then ends as `ExecutionError`, or as the
   * signal's reason when that is a `ToolHostError` (e.g. `Timeout` for a deadline the caller keeps). Default: none.
   */
  signal?: AbortSignal;
  /**
   * Receives this call's tool log lines instead of the host's `onLog` (e.g. the stderr of the CLI client a
   * long-running host serves). Lines are attributed by the host's own record of the call. Default: `onLog`.
   */
  onLog?: (record: LogRecord) => void;
}

/** The audit log as the public `ToolHost` offers it: its records, read (a record is written by the host only). */
export type AuditReader = Pick<AuditLog, "read" | "readWith" | "coverage" | "flush">;

/**
 * Records a call that a door refused before the host could run it (the CLI's argument parsing, a tool that
 * failed to build, an unknown tool or action) and answers it as a call's error result with its `callId`:
 * every call asked for leaves a record. Implemented by the hosts the composition root makes and by a CLI
 * invocation's view of one; reached with `callRefusalsOf`.
 */
export interface CallRefusals {
  refusedCall(anima: string, toolName: string, schemaName: string, error: unknown): CallResult;
}

export function callRefusalsOf(host: ToolHost): CallRefusals | undefined {
  const refusals = host as ToolHost & Partial<CallRefusals>;
  return typeof refusals.refusedCall === "function" ? (refusals as CallRefusals) : undefined;
}

/** What records an event in a host's audit log. */
export type AuditWriter = Pick<AuditLog, "append">;

/**
 * Makes a host of a resolved configuration: `hostFromConfig`, handed by the program's entry (the CLI's
 * main) to what needs a host of its own (a worker, the daemon, the validator's throwaway hosts), so that
 * hosts are made by the composition root only.
 */
export type HostFactory = (config: HostConfig) => ToolHost;

export interface ToolHost {
  readonly config: HostConfig;
  /** Every call, capability use, denial, credential access, load failure and crash: read here, written by the host only. */
  readonly audit: AuditReader;
  /**
   * Forgets every loaded tool and discovered folder, so the next call rescans and reloads (bundles whose
   * content did not change come from the cache). Long-running hosts see file changes only after this.
   * With `anima`: forgets only what was discovered for that Anima (or for none: `""`); its tools are
   * rediscovered on next use, and those whose files did not change are not loaded again.
   */
  refresh(anima?: string): void;
  /** Calls schema `schemaName` (`{tool}_{action}`) for an Anima. Never throws for tool failures. */
  call(anima: string, schemaName: string, args?: unknown, options?: CallOptions): Promise<CallResult>;
  /** Runs a tool's `cli_main(argv)` inside the sandbox. */
  callCli(anima: string, toolName: string, argv: string[], options?: Pick<CallOptions, "signal" | "onLog">): Promise<CallResult>;
  /** Every tool the Anima sees (core, shared, personal), loaded, with its schemas or its load error. */
  list(anima?: string): Promise<ToolListing>;
  /** Files in the Anima's tool folders that are not loaded as tools, with the reason (no tool is loaded). */
  discoveryProblems(anima?: string): Promise<DiscoveryProblem[]>;
  /** One tool as the Anima sees it; `ToolNotFound` when there is no such tool. */
  describe(anima: string | undefined, toolName: string): Promise<ToolInfo>;
  /** The sandbox policy auditing report for one Anima, or every Anima when none is named. */
  auditReport(anima?: string, options?: { sinceMs?: number }): Promise<AnimaReport[]>;
  /** Settles once the host is watching its tool folders (with `watch: true`); at once otherwise. */
  ready(): Promise<void>;

  /** Names of the Animas in the data dir. */
  animas(): Promise<string[]>;
  /** Stops watching, ends the sandbox processes (or disposes in-process isolates) and flushes the audit log. */
  close(): Promise<void>;
  /**
   * After `close`: false when, with in-process isolation, an isolate isolated-vm could not stop still holds
   * a thread of this process (a hostile tool; see docs/design.md §9). Such a process cannot exit normally
   * (Node's exit waits for that thread, or crashes on it): write what is left, then end it with SIGKILL.
   * Always true with process isolation, whose sandbox processes deal with this themselves.
   */
  canExitCleanly(): boolean;
}

/**
 * A host that tells of its tool reloads: every host the composition root makes (not part of the public
 * `ToolHost`, so other implementations need not have it; the MCP server subscribes when it is there).
 */
export interface ToolChangeSource {
  /**
   * Tells `listener` each time the host reloaded tools because files in its tool folders changed: whose
   * tools (`anima`; undefined for the shared ones, which every Anima sees) and the paths. A host that does
   * not watch them (`watch: false`) starts watching with the first subscription: only `common_tools/` and
   * the tools of `options.anima` when one is given; such a watcher stops with its last subscription.
   * Resolves once watching, to the function that unsubscribes.
   */
  onToolsChanged(listener: (change: ToolsChange) => void, options?: { anima?: string }): Promise<() => Promise<void>>;
}

/**
 * The host's capability path (its CapabilityService's `invoke`): runs capability `name` as a call of
 * `context.tool` by the Anima, under the same policy and audit as a tool's call.
 */
export type CapabilityPath = (
  context: { anima: string; animaDir: string; tool: string },
  name: string,
  argsJson: string,
) => Promise<{ ok: true; value: unknown } | { ok: false; error: ErrorInfo }>;

/**
 * A host with a capability path: every host the composition root makes (not part of the public
 * `ToolHost`). The management service reads memory files through it (lifecycle/management.ts); a host
 * without one (a CLI invocation's view of a running host, a test double) cannot read them.
 */
export interface CapabilityPathSource {
  readonly capabilityPath: CapabilityPath;
}

/**
 * A host whose audit log takes records from the services around it: every host the composition root
 * makes (not part of the public `ToolHost`, whose `audit` only reads). The management service records
 * its operations through it (lifecycle/management.ts); a host without one (a test double) leaves them
 * unrecorded.
 */
export interface AuditWriterSource {
  readonly auditWriter: AuditWriter;
}
