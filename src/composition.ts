import type { AuditLog } from "./audit/audit-log.js";
import { HostStatusPublisher } from "./audit/host-status.js";
import { JsonlAuditLog } from "./audit/jsonl-audit-log.js";
import { ToolBundler } from "./build/bundler.js";
import type { FetchCapability } from "./capabilities/fetch.js";
import { JobCalls } from "./capabilities/job-calls.js";
import { CapabilityService, type NetworkRequester } from "./capabilities/service.js";
import type { HostConfig } from "./config.js";
import type { LogRecord } from "./host-options.js";
import { openCredentialSources, redactSecrets } from "./credentials/index.js";
import type { ToolHost } from "./host-api.js";
import { createExecutor, warmPoolReport } from "./isolation/executor.js";
import type { CallContext, Executor, ToolLogLine } from "./isolation/wire/messages.js";
import { provideCapabilityPath } from "./lifecycle/capability-path.js";
import { ToolRegistry } from "./registry/registry.js";
import { accessHint, systemFileError } from "./errors.js";

/**
 * The composition root: the one module that wires a host from one resolved configuration (its audit
 * log, capability service, executor, bundler, registry, status publisher) and registers what the
 * library's front ends need of it beyond its public API (its capability path, for the management
 * service). It only wires; what each part does lives in its own module. `createHost` and
 * `hostFromConfig` (host.ts) are its entry points: host.ts hands it the constructor of its `Host`, so
 * that this module needs nothing of host.ts and host.ts can call it.
 */
export interface HostParts {
  config: HostConfig;
  executor: Executor;
  registry: ToolRegistry;
  audit: AuditLog;
  jobCalls: JobCalls;
  status: HostStatusPublisher | undefined;
  /**
   * Sinks of calls that asked for their own log lines, keyed by the host's record of the call (never by
   * anything the sandbox reports).
   */
  callLogSinks: WeakMap<CallContext, (record: LogRecord) => void>;
}

/** What composeHost needs of the host object it builds. */
export interface ComposedHost extends ToolHost {
  /** Watches the tool folders of every Anima (`HostOptions.watch`). */
  startWatching(): void;
}

export function composeHost<H extends ComposedHost>(config: HostConfig, construct: (parts: HostParts) => H): H {
  const audit = new JsonlAuditLog(config.auditFile, {
    onWriteError: (error, file) => {
      const known = systemFileError(error, file);
      const reason = known?.message ?? `cannot write ${file}: ${error instanceof Error ? error.message : String(error)}`;
      config.onLog({ level: "error", logger: "animaworks.host", message: `the audit log is not being written (${reason}); calls, denials and credential uses go unrecorded until it can be — ${known?.hint ?? accessHint()}` });
    },
  });
  const jobCalls = new JobCalls();
  const capabilities = new CapabilityService({
    jobs: jobCalls,
    fsLimits: config.fsLimits,
    credentials: openCredentialSources(config.dataDir, { environment: config.environment, allowedEnvironment: config.allowedEnvironment, log: config.onLog }),
    audit,
    log: config.onLog,
    network: lazyNetwork(config, audit),
  });
  const callLogSinks = new WeakMap<CallContext, (record: LogRecord) => void>();
  const executor = createExecutor(config, (line) => forwardToolLog(config, line, capabilities, callLogSinks.get(line.context)), capabilities.invoke, {
    onRefusal: (context, name, error) =>
      audit.append({ kind: "capability", anima: context.anima, tool: context.tool, operation: name, target: "", outcome: "denied", reason: `${error.type}: ${error.message}` }),
    onViolation: (message) => {
      audit.append({ kind: "sandbox_crash", message });
      config.onLog({ level: "error", logger: "animaworks.host", message });
    },
  });
  const registry = new ToolRegistry({
    dataDir: config.dataDir,
    coreToolsDir: config.coreToolsDir,
    loadTimeoutMs: config.loadTimeoutMs,
    memoryLimitMb: config.memoryLimitMb,
    bundler: new ToolBundler(config.cacheDir),
    executor,
  });
  // Long-running hosts say what their warm pools hold, for `audit` in another process.
  const status = config.isolation === "process" ? new HostStatusPublisher(config.dataDir, () => warmPoolReport(config)) : undefined;
  const host = construct({ config, executor, registry, audit, jobCalls, status, callLogSinks });
  // read_memory_file reads as a tool of the Anima would (lifecycle/management.ts).
  provideCapabilityPath(host, capabilities.invoke);
  if (config.watch) host.startWatching();
  return host;
}

/** The fetch capability, loaded on the first request (its network stack is not needed by most calls). */
function lazyNetwork(config: HostConfig, audit: AuditLog): NetworkRequester {
  let capability: Promise<FetchCapability> | undefined;
  return {
    fetch: async (context, url, init, policy, signal) => {
      capability ??= import("./capabilities/fetch.js").then(
        ({ FetchCapability }) =>
          new FetchCapability({ allowInternalHosts: config.allowInternalHosts, onAudit: (event) => audit.append({ kind: "capability", ...event }) }),
      );
      return (await capability).fetch(context, url, init, policy, signal);
    },
  };
}

/** Tool log lines go to the call's or the operator's sink with any secret the Anima's tools obtained redacted. */
function forwardToolLog(config: HostConfig, line: ToolLogLine, capabilities: CapabilityService, callSink: ((record: LogRecord) => void) | undefined): void {
  const message = redactSecrets(line.message, capabilities.secretsOf(line.context.anima));
  (callSink ?? config.onLog)({ level: line.level, logger: "animaworks.tools", message, anima: line.context.anima, tool: line.context.tool });
}
