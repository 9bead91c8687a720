import { type AnimaView, AnimaViews } from "./anima-views.js";
import type { AuditLog } from "./audit/audit-log.js";
import type { HostStatusPublisher } from "./audit/host-status.js";
import { type HostParts, type ToolLogRouter, composeHost } from "./composition.js";
import { type HostConfig, resolveConfig } from "./config.js";
import type { HostOptions } from "./host-options.js";
import { ToolHostError } from "./errors.js";
import { checkArguments } from "./execution/arguments.js";
import { formatOutput } from "./execution/output.js";
import type { CallContext, CallOutcome, CallRequest, Executor, ToolBundle } from "./isolation/wire/messages.js";
import type { CliPayload } from "./contract/isolate.js";
import { type SandboxHandle, isolationLayers } from "./isolation/executor.js";
import { CallAudit } from "./audit/call-audit.js";
import type { PolicyLedger } from "./audit/policy-ledger.js";
import { listAnimas } from "./registry/animas.js";
import type { DiscoveryProblem } from "./registry/discovery.js";
import type { AnimaRef, ToolRegistry } from "./registry/registry.js";
import { type ProfileEntry, profileFor, profileTimeoutMs } from "./registry/profile.js";
import type { ToolSchema } from "./registry/schemas.js";
import { schemaOf } from "./registry/actions.js";
import { structuredResult } from "./execution/result-check.js";
import { callFailure, errorResult, toToolInfo, unknownTool, withAnimaDir } from "./host-support.js";
import type {
  AnimaReport,
  AuditWriter,
  AuditWriterSource,
  CallOptions,
  CallResult,
  CapabilityPath,
  CapabilityPathSource,
  ToolChangeSource,
  ToolHost,
  ToolInfo,
  ToolListing,
  ToolsChange,
} from "./host-api.js";
import type { PreparedCall, PreparedCallRunner, RunOptions } from "./prepared-calls.js";
import type { JobCalls } from "./capabilities/job-calls.js";
import { ToolWatch } from "./registry/tool-watch.js";
import { monotonicMs } from "./clock.js";

export type { CallOptions, CallResult, SchemaInfo, ToolHost, ToolInfo, ToolListing } from "./host-api.js";
export type { SandboxHandle } from "./isolation/executor.js";

/** A host: `options` (else the operator configuration, else defaults; see HostOptions) wired by the composition root. */
export function createHost(options: HostOptions = {}): ToolHost {
  return hostFromConfig(resolveConfig(options));
}

/** A host of a configuration already resolved (the CLI resolves it from the invocation's own environment). */
export function hostFromConfig(config: HostConfig): ToolHost {
  return composeHost(config, (parts) => new Host(parts));
}

/**
 * Operator and test hook: the sandbox handle of a host made here (its sandbox process ids, OS sandbox,
 * warm pools), or undefined for any other ToolHost (a CLI invocation's view of a running host, a test
 * double). An in-process host has a handle with no processes.
 */
export function sandboxOf(host: ToolHost): SandboxHandle | undefined {
  return host instanceof Host ? host.sandbox : undefined;
}

class Host implements ToolHost, PreparedCallRunner, ToolChangeSource, CapabilityPathSource, AuditWriterSource {
  readonly config: HostConfig;
  readonly audit: AuditLog;
  /** For the management service's records (lifecycle/management.ts): the public `audit` only reads. */
  readonly auditWriter: AuditWriter;
  /** The executor and its sandbox processes (`sandboxOf`). */
  readonly sandbox: SandboxHandle;
  private readonly policies: PolicyLedger;
  /** The records of each call (audit/call-audit.ts). */
  private readonly calls: CallAudit;
  /** For the management service's read_memory_file (lifecycle/management.ts). */
  readonly capabilityPath: CapabilityPath;
  private readonly executor: Executor;
  private readonly registry: ToolRegistry;
  private readonly jobCalls: JobCalls;
  private readonly status: HostStatusPublisher | undefined;
  private readonly toolLogs: ToolLogRouter;
  /** What each Anima sees (anima-views.ts). Cleared by `refresh()`. */
  private readonly views: AnimaViews;
  /** The folder watchers and their change event (registry/tool-watch.ts); made on first use. */
  private watches: ToolWatch | undefined;
  /**
   * Which tools a burst reloaded goes to the audit log (audit/reloads.ts) in a chain of its own, so that
   * listing the Animas concerned never delays the next reload; closing waits for it.
   */
  private recording: Promise<unknown> = Promise.resolve();
  private closed = false;

  /** Every part is made by the composition root (composition.ts), which hands them over here. */
  constructor(parts: HostParts) {
    this.calls = new CallAudit(parts.audit, isolationLayers(parts.sandbox));
    this.policies = parts.policies;
    void this.policies.recheckOperator();
    this.config = parts.config;
    this.audit = parts.audit;
    this.auditWriter = parts.audit;
    this.sandbox = parts.sandbox;
    this.capabilityPath = parts.capabilityPath;
    this.executor = parts.sandbox.executor;
    this.registry = parts.registry;
    this.jobCalls = parts.jobCalls;
    this.status = parts.status;
    this.toolLogs = parts.toolLogs;
    this.views = new AnimaViews({ config: parts.config, audit: parts.audit, registry: parts.registry, policies: parts.policies });
  }

  async call(anima: string, schemaName: string, args: unknown = {}, options: CallOptions = {}): Promise<CallResult> {
    const startedAt = monotonicMs();
    let prepared: { call: PreparedCall; schema: ToolSchema };
    const found: { tool?: string; version?: string } = {};
    try {
      prepared = await this.prepareWithSchema(anima, schemaName, args, options, found);
    } catch (error) {
      // A call refused before it ran is recorded under the tool it named, or `(unknown)` when there is none.
      const record = this.calls.record({ anima, tool: found.tool ?? "(unknown)", schema: schemaName, ...(found.version ? { version: found.version } : {}) });
      return this.calls.end(record, errorResult(error, monotonicMs() - startedAt), false);
    }
    const run: RunOptions = { ...(options.signal ? { signal: options.signal } : {}), ...(options.onLog ? { onLog: options.onLog } : {}) };
    return this.run(prepared.call, run, { schema: prepared.schema, always: options.structured === true });
  }

  refusedCall(anima: string, toolName: string, schemaName: string, error: unknown): CallResult {
    const unknown = error instanceof ToolHostError && error.type === "ToolNotFound";
    return this.calls.end(this.calls.record({ anima, tool: unknown ? "(unknown)" : toolName, schema: schemaName }), errorResult(error, 0), false);
  }

  async prepare(anima: string, schemaName: string, args: unknown = {}, options: CallOptions = {}): Promise<PreparedCall> {
    return (await this.prepareWithSchema(anima, schemaName, args, options)).call;
  }

  private async prepareWithSchema(
    anima: string,
    schemaName: string,
    args: unknown,
    options: CallOptions,
    found: { tool?: string; version?: string } = {},
  ): Promise<{ call: PreparedCall; schema: ToolSchema }> {
    const view = await this.view(anima);
    const ref = view.ref as AnimaRef;
    const tool = await this.views.toolForSchema(view, schemaName);
    found.tool = tool.name;
    found.version = tool.bundle.hash;
    const schema = schemaOf(tool, schemaName);
    const checked = checkArguments(schema, args);
    const profile = profileFor(tool.profile, schema.action);
    const call: PreparedCall = {
      anima: ref.name,
      tool: tool.name,
      action: schema.action,
      schemaName,
      argsJson: JSON.stringify(checked),
      bundle: tool.bundle,
      timeoutMs: this.timeoutFor(profile, options.timeoutMs),
      ...(profile ? { profile } : {}),
    };
    return { call, schema };
  }

  async runPrepared(prepared: PreparedCall, options: RunOptions = {}): Promise<CallResult> {
    // A pinned version's output_schema holds for its background runs too.
    const schema = await this.registry.schemaFor(prepared.tool, prepared.bundle, prepared.schemaName).catch(() => undefined);
    return this.run(prepared, options, schema ? { schema, always: options.structured === true } : undefined);
  }

  /** `structured`: the action's schema, to give (`always`) or check (`output_schema`) the result's object form. */
  private async run(prepared: PreparedCall, options: RunOptions, structured: { schema: ToolSchema; always: boolean } | undefined): Promise<CallResult> {
    const startedAt = monotonicMs();
    let unregisterJob: (() => void) | undefined;
    const job = options.job;
    const record = this.calls.record({
      anima: prepared.anima,
      tool: prepared.tool,
      schema: prepared.schemaName,
      version: prepared.bundle.hash,
      ...(job ? { jobId: job.id } : {}),
    });
    try {
      const ref = (await this.view(prepared.anima)).ref as AnimaRef;
      record.anima = ref.name;
      if (job) unregisterJob = this.jobCalls.register(job.id, ref.name, job);
      const context: CallContext = { anima: ref.name, animaDir: ref.dir, tool: prepared.tool, callId: record.callId, ...(job ? { jobId: job.id } : {}) };
      this.calls.start(record);
      if (options.onLog) this.toolLogs.sendCallLogsTo(context, options.onLog);
      // anima_dir is injected here, after validation, so no caller can choose it.
      const request = this.callRequest(prepared.bundle, context, "call", prepared.schemaName, withAnimaDir(prepared.argsJson, ref.dir), prepared.timeoutMs);
      const outcome = await this.executor.call(request, options.signal);
      this.toolLogs.callEnded(context); // "N more warnings not shown", before the result
      return this.calls.end(record, this.toResult(outcome, structured), true);
    } catch (error) {
      return this.calls.end(record, errorResult(error, monotonicMs() - startedAt), false);
    } finally {
      unregisterJob?.();
    }
  }

  /** The one builder of a call for the executor: the host's limits on every call come from its config here. */
  private callRequest(
    bundle: ToolBundle,
    context: CallContext,
    entry: CallRequest["entry"],
    schemaName: string,
    payloadJson: string,
    timeoutMs: number,
  ): CallRequest {
    return {
      op: "call",
      bundle,
      context,
      entry,
      schemaName,
      payloadJson,
      timeoutMs,
      memoryLimitMb: this.config.memoryLimitMb,
      maxResultBytes: this.config.maxResultTransferBytes,
      maxLogLines: this.config.maxLogLinesPerCall,
      maxLogLineChars: this.config.maxLogLineChars,
    };
  }

  async callCli(anima: string, toolName: string, argv: string[], options: Pick<CallOptions, "signal" | "onLog"> = {}): Promise<CallResult> {
    const startedAt = monotonicMs();
    // A cli_main run is a call like any other in the trail; its schema is `cli`.
    const record = this.calls.record({ anima, tool: toolName, schema: "cli" });
    try {
      const view = await this.view(anima);
      const ref = view.ref as AnimaRef;
      const tool = await this.views.loadTool(view, toolName);
      if (!tool.hasCliMain) throw new ToolHostError("ToolNotFound", `tool "${toolName}" has no cli_main`);
      Object.assign(record, { anima: ref.name, tool: tool.name, version: tool.bundle.hash });
      const context: CallContext = { anima: ref.name, animaDir: ref.dir, tool: tool.name, callId: record.callId };
      if (options.onLog) this.toolLogs.sendCallLogsTo(context, options.onLog);
      this.calls.start(record);
      const payload: CliPayload = { argv: argv.map(String), anima_dir: ref.dir };
      const request = this.callRequest(tool.bundle, context, "cli", "", JSON.stringify(payload), this.timeoutFor(undefined, undefined));
      const outcome = await this.executor.call(request, options.signal);
      this.toolLogs.callEnded(context);
      return this.calls.end(record, this.toResult(outcome), true);
    } catch (error) {
      return this.calls.end(record, errorResult(error, monotonicMs() - startedAt), false);
    }
  }

  async list(anima?: string): Promise<ToolListing> {
    const view = await this.view(anima);
    const entries = await Promise.all(view.names.map((name) => this.views.entry(view, name)));
    const tools = entries.map(toToolInfo).sort((a, b) => a.name.localeCompare(b.name));
    return { anima: view.ref?.name, tools, problems: view.sources.problems };
  }

  async discoveryProblems(anima?: string): Promise<DiscoveryProblem[]> {
    return (await this.view(anima)).sources.problems;
  }

  async describe(anima: string | undefined, toolName: string): Promise<ToolInfo> {
    const view = await this.view(anima);
    if (!view.sources.tools.has(toolName)) throw unknownTool(toolName, view.names);
    return toToolInfo(await this.views.entry(view, toolName));
  }

  refresh(anima?: string): void {
    if (anima !== undefined) {
      // Its tools are rediscovered on next use; a loaded tool whose bundle is unchanged is reused.
      this.views.forget(anima);
      return;
    }
    this.views.forget();
    this.registry.forget();
  }

  async auditReport(anima?: string, options: { sinceMs?: number } = {}): Promise<AnimaReport[]> {
    const names = anima === undefined ? await this.animas() : [anima];
    // Loaded on use: a tool call never pays for the report's modules (the credential inventory, the matchers).
    const { buildAnimaReports } = await import("./audit/report.js");
    return buildAnimaReports(this.config, this.audit, names, options, async (name) => ({
      dir: ((await this.view(name)).ref as AnimaRef).dir,
      listing: await this.list(name),
    }));
  }

  animas(): Promise<string[]> {
    return listAnimas(this.config.dataDir);
  }

  /** Reloads tools when their folders change (HostOptions.watch). `ready` settles once watching. */
  startWatching(): void {
    void this.toolWatch.watchAll().catch(() => {});
  }

  onToolsChanged(listener: (change: ToolsChange) => void, options: { anima?: string } = {}): Promise<() => Promise<void>> {
    if (this.closed) return Promise.reject(new ToolHostError("SandboxCrashed", "the host is closed"));
    return this.toolWatch.subscribe(listener, options.anima);
  }

  private get toolWatch(): ToolWatch {
    return (this.watches ??= new ToolWatch({
      dataDir: this.config.dataDir,
      onBurst: (paths, anima) => this.reloadWatched(paths, anima),
      onWarning: (message) => this.config.onLog({ level: "warn", logger: "animaworks.host", message }),
    }));
  }

  /** After a burst of edits in watched folders: reload, and record which tools changed (once per change: here). */
  private reloadWatched(paths: string[], anima: string | undefined): void {
    this.refresh();
    this.recording = this.recording.then(async () => (await import("./audit/reloads.js")).recordWatchedReloads(this, paths, anima)).catch(() => {});
  }

  /** Settles when the folder watchers (if any) are watching. */
  async ready(): Promise<void> {
    await this.toolWatch.ready();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.status?.close();
    await this.watches?.close();
    await this.recording;
    await this.executor.close();
    await this.policies.settled();
    await this.audit.close();
  }

  canExitCleanly(): boolean {
    return this.executor.stuckEntries() === 0;
  }

  // ---- helpers ------------------------------------------------------------------------------------

  /** The cached view for an Anima (anima-views.ts), while the host is open. */
  private view(anima: string | undefined): Promise<AnimaView> {
    if (this.closed) return Promise.reject(new ToolHostError("SandboxCrashed", "the host is closed"));
    return this.views.view(anima);
  }

  private timeoutFor(profile: ProfileEntry | undefined, override: number | undefined): number {
    const wanted = override ?? profileTimeoutMs(profile) ?? this.config.timeoutMs;
    return Math.min(wanted, this.config.maxCallTimeoutMs);
  }

  private toResult(outcome: CallOutcome, structured?: { schema: ToolSchema; always: boolean }): CallResult {
    if (!outcome.ok) return callFailure(outcome.error, outcome.durationMs);
    // Throws (an ExecutionError result) when the value breaks the action's output_schema.
    const object = structured && (structured.always || structured.schema.outputSchema) ? structuredResult(structured.schema, outcome.value) : undefined;
    const formatted = formatOutput(outcome.value, this.config.maxOutputBytes);
    return {
      status: "ok",
      output: formatted.text,
      truncated: formatted.truncated,
      originalBytes: formatted.originalBytes,
      durationMs: outcome.durationMs,
      ...(object ? { structured: object } : {}),
    };
  }
}
