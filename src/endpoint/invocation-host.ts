import { join } from "node:path";
import type { LogRecord } from "../host-options.js";
import {
  type AuditWriter,
  type AuditWriterSource,
  type CallOptions,
  type CallResult,
  type ToolHost,
  type ToolInfo,
  type ToolListing,
  callRefusalsOf,
} from "../host-api.js";
import { type PreparedCall, type PreparedCallRunner, type RunOptions, preparedCallsOf } from "../prepared-calls.js";
import type { DiscoveryProblem } from "../registry/discovery.js";
import { folderStamp } from "../registry/folder-stamp.js";

/**
 * Keeps a long-running host's view of the tool folders as fresh as a new process's: before an
 * invocation uses an Anima's tools, the stamp of its folders (core, shared, personal) is compared with
 * the one seen last; any change refreshes the host (as its folder watcher would, a moment later).
 */
const MAX_TRACKED_ANIMAS = 10_000;

export class FolderFreshness {
  private readonly stamps = new Map<string, string>();

  constructor(private readonly host: ToolHost) {}

  check(anima: string | undefined): void {
    const { dataDir, coreToolsDir } = this.host.config;
    // A name that is not a plain folder name is left to the host to reject; nothing outside is walked.
    const personal = anima !== undefined && /^[^/\0]+$/.test(anima) && anima !== "." && anima !== ".." ? [join(dataDir, "animas", anima, "tools")] : [];
    const key = anima ?? "";
    const stamp = folderStamp([coreToolsDir, join(dataDir, "common_tools"), ...personal]);
    const seen = this.stamps.get(key);
    if (seen === stamp) return;
    if (this.stamps.size >= MAX_TRACKED_ANIMAS && seen === undefined) this.stamps.clear();
    this.stamps.set(key, stamp);
    // The first look refreshes too: the Anima's view may have been built (by a job run) before any stamp.
    this.host.refresh(key);
  }
}

/**
 * The running host as one CLI invocation sees it: the same tools, calls and jobs, with the invocation's
 * own stderr for its calls' tool log lines and for the host's warnings about its tool folders (printed
 * once per invocation, as a one-shot CLI process prints them), and closing it leaves the host running.
 */
export class InvocationHost implements ToolHost, PreparedCallRunner {
  readonly config: ToolHost["config"];
  private readonly warned = new Set<string>();
  private readonly looked = new Set<string>();

  private readonly onLog: (record: LogRecord) => void;

  /**
   * `config`: the invocation's own, equal to the host's in every setting that decides how calls run. A
   * copy, and safe as one: nothing finds a host's parts by its config (the composition root hands them
   * to the host; its status file reports the host's own warm pools).
   */
  constructor(
    private readonly host: ToolHost,
    config: ToolHost["config"],
    private readonly freshness: FolderFreshness,
  ) {
    this.config = { ...config, isolation: host.config.isolation, watch: host.config.watch };
    this.onLog = config.onLog;
  }

  get audit(): ToolHost["audit"] {
    return this.host.audit;
  }

  /** The running host's (`AuditWriterSource`): an invocation's refresh or share is recorded as the host's own. */
  get auditWriter(): AuditWriter | undefined {
    return (this.host as ToolHost & Partial<AuditWriterSource>).auditWriter;
  }

  async call(anima: string, schemaName: string, args?: unknown, options: CallOptions = {}): Promise<CallResult> {
    await this.look(anima);
    return this.host.call(anima, schemaName, args, { ...options, onLog: this.onLog });
  }

  /** The running host's (`CallRefusals`): a call this invocation refused is recorded as the host's own. */
  refusedCall(anima: string, toolName: string, schemaName: string, error: unknown): CallResult {
    const refusals = callRefusalsOf(this.host);
    if (!refusals) throw error;
    return refusals.refusedCall(anima, toolName, schemaName, error);
  }

  async prepare(anima: string, schemaName: string, args?: unknown, options: CallOptions = {}): Promise<PreparedCall> {
    await this.look(anima);
    return preparedCallsOf(this.host).prepare(anima, schemaName, args, options);
  }

  async runPrepared(prepared: PreparedCall, options: RunOptions = {}): Promise<CallResult> {
    return preparedCallsOf(this.host).runPrepared(prepared, { ...options, onLog: this.onLog });
  }

  async callCli(anima: string, toolName: string, argv: string[], options: Pick<CallOptions, "signal" | "onLog"> = {}): Promise<CallResult> {
    await this.look(anima);
    return this.host.callCli(anima, toolName, argv, { ...options, onLog: this.onLog });
  }

  async list(anima?: string): Promise<ToolListing> {
    await this.look(anima);
    return this.host.list(anima);
  }

  async discoveryProblems(anima?: string): Promise<DiscoveryProblem[]> {
    await this.look(anima);
    return this.host.discoveryProblems(anima);
  }

  async describe(anima: string | undefined, toolName: string): Promise<ToolInfo> {
    await this.look(anima);
    return this.host.describe(anima, toolName);
  }

  async auditReport(anima?: string, options?: { sinceMs?: number }): Promise<Awaited<ReturnType<ToolHost["auditReport"]>>> {
    for (const name of anima === undefined ? await this.host.animas() : [anima]) await this.look(name);
    return this.host.auditReport(anima, options);
  }

  /** `anima`'s view only, or everything (ToolHost.refresh): an Anima's refresh through the daemon rebuilds no other's. */
  refresh(anima?: string): void {
    this.host.refresh(anima);
  }

  ready(): Promise<void> {
    return this.host.ready();
  }

  animas(): Promise<string[]> {
    return this.host.animas();
  }

  /** The invocation ends; the host goes on serving. */
  async close(): Promise<void> {}

  canExitCleanly(): boolean {
    return true;
  }

  /**
   * Before the invocation first uses an Anima's tools: refresh them if their folders changed, and print
   * the problems of its tool folders, each once per invocation (a failed lookup, e.g. an unknown Anima,
   * is left to the operation itself to report).
   */
  private async look(anima: string | undefined): Promise<void> {
    const key = anima ?? "";
    if (this.looked.has(key)) return;
    this.looked.add(key);
    this.freshness.check(anima);
    const problems = await this.host.discoveryProblems(anima).catch(() => []);
    for (const problem of problems) {
      const id = `${problem.file}\0${problem.message}`;
      if (this.warned.has(id)) continue;
      this.warned.add(id);
      this.onLog({ level: "warn", logger: "animaworks.host", message: problem.message, tool: problem.name });
    }
  }
}
