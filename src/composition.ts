import type { AuditLog, AuditRecord } from "./audit/audit-log.js";
import { HostStatusPublisher } from "./audit/host-status.js";
import { statSync } from "node:fs";
import { join } from "node:path";
import { JsonlAuditLog } from "./audit/jsonl-audit-log.js";
import { ExportingAuditLog } from "./audit/otel-export.js";
import { PolicyLedger } from "./audit/policy-ledger.js";
import { RedactingAuditLog } from "./audit/redacting-audit-log.js";
import { ToolBundler } from "./bundling/bundler.js";
import type { FetchCapability } from "./capabilities/fetch.js";
import { JobCalls } from "./capabilities/job-calls.js";
import { CapabilityService, type NetworkRequester } from "./capabilities/service.js";
import type { HostConfig } from "./config.js";
import type { LogRecord } from "./host-options.js";
import { openCredentialSources, redactSecrets } from "./credentials/index.js";
import type { CapabilityPath, ToolHost } from "./host-api.js";
import type { PreparedCallRunner } from "./prepared-calls.js";
import { type SandboxHandle, createExecutor } from "./isolation/executor.js";
import { withToolFrames } from "./bundling/tool-frames.js";
import type { CallContext, ToolLogLine } from "./isolation/wire/messages.js";
import { ToolRegistry } from "./registry/registry.js";
import { sharedSourceChecker } from "./lifecycle/source-checker.js";
import { accessHint, systemFileError } from "./errors.js";
import { NOT_REGULAR_CODE } from "./audit/trail-file.js";
import { CallWarnings } from "./capabilities/call-warnings.js";

/**
 * The composition root: the one module that wires a host from one resolved configuration (its audit
 * log, capability service, tool log router, executor, bundler, registry, status publisher) and hands the
 * host every part it keeps: what the library's front ends need of it beyond its public API (its capability
 * path, for the management service; its sandbox handle, for operators and tests) included. No part is
 * found later by the host's or its config's identity: each is a member of the host. It only wires; what
 * each part does lives in its own module. `createHost` and `hostFromConfig` (host.ts) are its entry
 * points: host.ts hands it the constructor of its `Host`, so that this module needs nothing of host.ts
 * and host.ts can call it.
 */
export interface HostParts {
  config: HostConfig;
  /** The executor and the view of its sandbox processes (`sandboxOf` in host.ts). */
  sandbox: SandboxHandle;
  registry: ToolRegistry;
  audit: AuditLog;
  /** The policy in force per Anima and the operator's, with their changes recorded (audit/policy-ledger.ts). */
  policies: PolicyLedger;
  jobCalls: JobCalls;
  status: HostStatusPublisher | undefined;
  /** Where the tool log lines of the host's calls go; the host registers the calls that want their own. */
  toolLogs: ToolLogRouter;
  /** The capability service's `invoke`: what the management service reads memory files through. */
  capabilityPath: CapabilityPath;
}

/**
 * What composeHost needs of the host object it builds: besides the public API, the prepared calls the job
 * service runs (prepared-calls.ts), so that every host made here can serve background jobs.
 */
export interface ComposedHost extends ToolHost, PreparedCallRunner {
  /** Watches the tool folders of every Anima (`HostOptions.watch`). */
  startWatching(): void;
}

/**
 * A trail file replaced by something that is not a regular file (a link: ELOOP; a FIFO with no reader:
 * ENXIO; a FIFO, socket, device or directory: trail-file.ts): no permission fix helps, the file was put there.
 */
function replacedTrailFile(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === "ELOOP" || code === "ENXIO" || code === NOT_REGULAR_CODE;
}

const REPLACED_TRAIL_HINT =
  "something that is not a regular file (a symlink, FIFO, socket, device or directory) was put in place of the trail file: move it aside, put the trail back, and run `animaworks-tool audit verify`";

export function composeHost<H extends ComposedHost>(config: HostConfig, construct: (parts: HostParts) => H): H {
  const makeTrail = (onWritten?: (records: AuditRecord[]) => void) =>
    new JsonlAuditLog(config.auditDir, {
      ...(onWritten ? { onWritten } : {}),
      // Only an Anima of this data dir gets a trail of its own: a caller naming made-up Animas makes no files.
      isAnima: (name) => isDirectory(join(config.dataDir, "animas", name)),
      onWriteError: (error, file) => {
        const known = systemFileError(error, file);
        const reason = known?.message ?? `cannot write ${file}: ${error instanceof Error ? error.message : String(error)}`;
        config.onLog({
          level: "error",
          logger: "animaworks.host",
          message: `the audit log is not being written (${reason}); calls, denials and credential uses go unrecorded until it can be — ${known?.hint ?? (replacedTrailFile(error) ? REPLACED_TRAIL_HINT : accessHint())}`,
        });
      },
    });
  // Every record also goes to the operator's OpenTelemetry collector, if one is named (the SDK loads only then).
  const trail: AuditLog =
    config.auditOtlpEndpoint === undefined
      ? makeTrail()
      : new ExportingAuditLog((onWritten) => makeTrail(onWritten), { endpoint: config.auditOtlpEndpoint, onLog: config.onLog });
  // The capability service knows each Anima's secrets and needs the audit log: records appended before it
  // exists (the policy ledger's first) name no secret yet.
  let secretsSource: Pick<CapabilityService, "secretsOf"> | undefined;
  const audit: AuditLog = new RedactingAuditLog(trail, (anima) => secretsSource?.secretsOf(anima) ?? []);
  const policies = new PolicyLedger(config, (event) => audit.append(event));
  const policyOf = (anima: string) => policies.policyOf(anima);
  const jobCalls = new JobCalls();
  const capabilities = new CapabilityService({
    policyOf,
    jobs: jobCalls,
    fsLimits: config.fsLimits,
    credentials: openCredentialSources(config.dataDir, { environment: config.environment, allowedEnvironment: config.allowedEnvironment, log: config.onLog }),
    audit,
    log: config.onLog,
    // The host's lines about one call (a denial…) go to that call's caller, like its tool's log lines.
    callLog: (context, record) => toolLogs.hostLine(context, record),
    network: lazyNetwork(config, audit, policyOf),
  });
  secretsSource = capabilities;
  const toolLogs = new ToolLogRouter(config, capabilities);
  const bundler = new ToolBundler(config.cacheDir);
  // A failing tool's error names its own lines, mapped here with the bundler's source maps.
  const executor = createExecutor(config, (line) => toolLogs.forward(line), capabilities.invoke, {
    onRefusal: (context, name, error) =>
      audit.append({
        kind: "capability",
        anima: context.anima,
        tool: context.tool,
        ...(context.callId !== undefined ? { callId: context.callId } : {}),
        ...withPolicy(policyOf(context.anima)),
        operation: name,
        target: "",
        outcome: "denied",
        reason: `${error.type}: ${error.message}`,
      }),
    onViolation: (message, cordon) => {
      // A process of one Anima's own cordon broke the protocol: the record is that Anima's (a group's is the host's).
      const anima = cordon?.startsWith("anima:") ? cordon.slice("anima:".length) : undefined;
      audit.append({ kind: "sandbox_crash", ...(anima !== undefined ? { anima } : {}), message });
      config.onLog({ level: "error", logger: "animaworks.host", message });
    },
  });
  const sandbox = withToolFrames(executor, bundler.sourceMaps);
  const registry = new ToolRegistry({
    dataDir: config.dataDir,
    coreToolsDir: config.coreToolsDir,
    loadTimeoutMs: config.loadTimeoutMs,
    memoryLimitMb: config.memoryLimitMb,
    bundler,
    executor: sandbox.executor,
    // A large tool schema is checked and compiled in the source-checks process, never on the host's thread.
    schemaChecker: sharedSourceChecker(),
  });
  // Long-running hosts say what their warm pools hold, for `audit` in another process.
  const status = config.isolation === "process" ? new HostStatusPublisher(config.dataDir, () => sandbox.warmPoolReport()) : undefined;
  // read_memory_file reads through the capability path as a tool of the Anima would (lifecycle/management.ts).
  const host = construct({ config, sandbox, registry, audit, policies, jobCalls, status, toolLogs, capabilityPath: capabilities.invoke });
  if (config.watch) host.startWatching();
  return host;
}

/** The fetch capability, loaded on the first request (its network stack is not needed by most calls). */
function lazyNetwork(config: HostConfig, audit: AuditLog, policyOf: (anima: string) => string | undefined): NetworkRequester {
  let capability: Promise<FetchCapability> | undefined;
  return {
    fetch: async (context, url, init, policy, signal, meter) => {
      capability ??= import("./capabilities/fetch.js").then(
        ({ FetchCapability }) =>
          new FetchCapability({
            allowInternalHosts: config.allowInternalHosts,
            onAudit: (event) => audit.append({ kind: "capability", ...event, ...(event.outcome === "denied" ? withPolicy(policyOf(event.anima)) : {}) }),
          }),
      );
      return (await capability).fetch(context, url, init, policy, signal, meter);
    },
  };
}

/**
 * Where tool log lines go: to the sink of the call that asked for its own (`CallOptions.onLog`), else to
 * the operator's `onLog`; either way with every secret the Anima's tools obtained redacted. Invariant: a
 * call's sink is found by the host's own record of the call (the `CallContext` object it hands the
 * executor, which each line carries back), never by anything the sandbox reports.
 */
export class ToolLogRouter {
  /** Keyed by the host's record of each call, so a sink goes with its call. */
  private readonly callSinks = new WeakMap<CallContext, (record: LogRecord) => void>();
  /** The host's lines about each call so far (bounded per call: capabilities/call-warnings.ts). */
  private readonly callWarnings = new WeakMap<CallContext, CallWarnings>();

  constructor(
    private readonly config: Pick<HostConfig, "onLog">,
    private readonly capabilities: Pick<CapabilityService, "secretsOf">,
  ) {}

  /** For the host: the lines of the call `context` go to `sink` instead of the operator's `onLog`. */
  sendCallLogsTo(context: CallContext, sink: (record: LogRecord) => void): void {
    this.callSinks.set(context, sink);
  }

  /** For the executor: one line a tool logged. */
  forward(line: ToolLogLine): void {
    const message = redactSecrets(line.message, this.capabilities.secretsOf(line.context.anima));
    (this.callSinks.get(line.context) ?? this.config.onLog)({
      level: line.level,
      logger: "animaworks.tools",
      message,
      anima: line.context.anima,
      tool: line.context.tool,
    });
  }

  /**
   * For the capability service: a line of the host's own about the call `context` (a request it
   * denied…), to that call's sink as its tool's lines go, redacted the same way, and bounded per call.
   */
  hostLine(context: CallContext, record: LogRecord): void {
    let warnings = this.callWarnings.get(context);
    if (!warnings) this.callWarnings.set(context, (warnings = new CallWarnings()));
    if (!warnings.admit(record)) return;
    const message = redactSecrets(record.message, this.capabilities.secretsOf(context.anima));
    (this.callSinks.get(context) ?? this.config.onLog)({ ...record, message });
  }

  /** For the host, when the call `context` has ended: says how many of its host lines were not shown. */
  callEnded(context: CallContext): void {
    const closing = this.callWarnings.get(context)?.end({ anima: context.anima, tool: context.tool });
    if (closing) (this.callSinks.get(context) ?? this.config.onLog)(closing);
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function withPolicy(policy: string | undefined): { policy?: string } {
  return policy !== undefined ? { policy } : {};
}
