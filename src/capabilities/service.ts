import { type AuditLog, truncateForAudit } from "../audit/audit-log.js";
import type { LogRecord } from "../host-options.js";
import { type CredentialSources, CredentialDeniedError, getCredential } from "../credentials/index.js";
import { type ErrorInfo, ToolHostError } from "../errors.js";
import type { AnswerMeter, CallContext, CapabilityReply } from "../isolation/wire/messages.js";
import type { UndecodedText } from "../isolation/wire/bulk-channel.js";
import { CAPABILITY_NAMES, type CapabilityAnswerValue, type CapabilityName, type UncheckedCapabilityRequest } from "../contract/isolate.js";
import { loadPermissions } from "../policy/permissions.js";
import { FsCapability } from "./fs.js";
import { DEFAULT_FS_LIMITS, type FsLimits } from "../fs-limits.js";
import type { JobCalls } from "./job-calls.js";

/**
 * The host side of every capability a tool can ask for. It runs in the host process (never in a
 * sandbox process), binds each request to the Anima of the call that made it, validates the untrusted
 * JSON arguments, applies the Anima's policy, and audits every use and every denial. The capabilities,
 * their positional arguments and their answers are the contract's (`CapabilityCalls` in
 * src/contract/isolate.ts); a name it does not declare is refused.
 */
export interface NetworkRequester {
  /**
   * Performs one HTTP request for `context` under `policy`; throws ToolHostError on denial. Stops when
   * `signal` aborts. Charges the body it holds to `meter` before holding it (fails when it has no room).
   */
  fetch(
    context: CallContext,
    url: unknown,
    init: unknown,
    policy: Awaited<ReturnType<typeof loadPermissions>>["sandbox"],
    signal?: AbortSignal,
    meter?: AnswerMeter,
  ): Promise<CapabilityAnswerValue<"fetch">>;
}

export interface CapabilityServiceOptions {
  fsLimits?: FsLimits;
  credentials: CredentialSources;
  audit: AuditLog;
  log: (record: LogRecord) => void;
  /** Where the lines about one call go (a denial, a lookup refused…): that call's caller. Default: `log`. */
  callLog?: (context: CallContext, record: LogRecord) => void;
  network?: NetworkRequester;
  /** Background job runs, for `progress` and `isCancelled`. Default: none (every call is a direct call). */
  jobs?: JobCalls;
  /** The policy in force per Anima, for denials' records (audit/policy-ledger.ts). Default: none (denials carry no policy hash). */
  policyOf?: (anima: string) => string | undefined;
}

const CAPABILITIES: ReadonlySet<string> = new Set(CAPABILITY_NAMES);

function isCapabilityName(name: string): name is CapabilityName {
  return CAPABILITIES.has(name);
}

/**
 * Capabilities that write their own audit records: fetch, once per hop and without query strings (a
 * query may carry a secret), and credentials, with where the value came from. Job progress reaches only
 * the calling job and is recorded on it, not in the audit trail.
 */
const SELF_AUDITED: ReadonlySet<string> = new Set<CapabilityName>(["credential.get", "fetch", "job.progress", "job.cancelled"]);

/**
 * What the host's side produces for capability `N`: the contract's answer, with `undefined` for a `null`
 * answer (sent as null) and file text still as bytes (decoded where it is used: bulk-channel.ts).
 */
type HostAnswer<N extends CapabilityName> = N extends "fs.readFile"
  ? UndecodedText
  : null extends CapabilityAnswerValue<N>
    ? CapabilityAnswerValue<N> | void
    : CapabilityAnswerValue<N>;

export class CapabilityService {
  private readonly fsByAnimaDir = new Map<string, FsCapability>();
  /** Secret values handed to each Anima's tools, so logs can be redacted (see `secretsOf`). */
  private readonly secrets = new Map<string, Set<string>>();

  constructor(private readonly options: CapabilityServiceOptions) {}

  /** Values of credentials resolved for `anima` so far (never logged; used to redact tool output). */
  secretsOf(anima: string): string[] {
    return [...(this.secrets.get(anima) ?? [])];
  }

  /**
   * `signal` aborts when the call that asked ends: nothing it asked for starts after that, and a fetch
   * stops. `meter`: where a fetch charges the body it holds (the call's ledger).
   */
  invoke = async (context: CallContext, name: string, argsJson: string, signal?: AbortSignal, meter?: AnswerMeter): Promise<CapabilityReply> => {
    if (signal?.aborted) return { ok: false, error: { type: "ExecutionError", fault: "tool", message: `${name}: the call had already ended` } };
    let args: unknown;
    try {
      args = JSON.parse(argsJson);
    } catch {
      return this.deny(context, name, "", { type: "InvalidArguments", fault: "tool", message: `${name}: the arguments are not valid JSON` });
    }
    if (!Array.isArray(args)) return this.deny(context, name, "", { type: "InvalidArguments", fault: "tool", message: `${name}: malformed call` });
    const target = typeof args[0] === "string" ? args[0] : "";
    const selfAudited = SELF_AUDITED.has(name);
    try {
      if (!isCapabilityName(name)) throw new ToolHostError("InvalidArguments", `unknown capability ${name}`);
      const value = await this.run(context, { name, args } as UncheckedCapabilityRequest, signal, meter);
      if (!selfAudited) this.audit(context, name, target, "ok");
      return { ok: true, value: value === undefined ? null : value };
    } catch (error) {
      const info = toolFacing(error instanceof ToolHostError ? error.toInfo() : { type: "ExecutionError", fault: "host", message: `${name} failed` });
      if (name === "credential.get") return { ok: false, error: info };
      const denied = info.type === "SandboxViolation" || info.type === "PermissionDenied";
      if (!selfAudited) this.audit(context, name, target, denied ? "denied" : "error", `${info.type}: ${info.message}`);
      if (denied)
        this.logFor(context, {
          level: "warn",
          logger: "animaworks.host",
          // Capability errors mostly name their operation already ("fs.readFile: …"): said once.
          message: `denied ${info.message.startsWith(`${name}: `) ? info.message : `${name}: ${info.message}`}`,
          anima: context.anima,
          tool: context.tool,
        });
      return { ok: false, error: info };
    }
  };

  /** Runs one request of the contract's union; its arguments are checked by the capability that takes them. */
  private async run(
    context: CallContext,
    request: UncheckedCapabilityRequest,
    signal: AbortSignal | undefined,
    meter: AnswerMeter | undefined,
  ): Promise<unknown> {
    switch (request.name) {
      // Read as bytes: decoded where the text is used (bulk-channel.ts), not on the host's event loop.
      case "fs.readFile":
        return this.fsFor(context.animaDir).readText(request.args[0], request.args[1]) satisfies Promise<HostAnswer<"fs.readFile">>;
      case "fs.writeFile":
        return this.fsFor(context.animaDir).writeFile(request.args[0], request.args[1], request.args[2]) satisfies Promise<HostAnswer<"fs.writeFile">>;
      case "fs.appendFile":
        return this.fsFor(context.animaDir).appendFile(request.args[0], request.args[1], request.args[2]) satisfies Promise<HostAnswer<"fs.appendFile">>;
      case "fs.readdir": {
        // Entries left out of a listing (names that are not valid UTF-8) are reported to the call's caller.
        const notice = (message: string) =>
          this.logFor(context, { level: "warn", logger: "animaworks.host", message, anima: context.anima, tool: context.tool });
        return this.fsFor(context.animaDir).readdir(request.args[0], notice) satisfies Promise<HostAnswer<"fs.readdir">>;
      }
      case "fs.stat":
        return this.fsFor(context.animaDir).stat(request.args[0]) satisfies Promise<HostAnswer<"fs.stat">>;
      case "fs.exists":
        return this.fsFor(context.animaDir).exists(request.args[0]) satisfies Promise<HostAnswer<"fs.exists">>;
      case "fs.mkdir":
        return this.fsFor(context.animaDir).mkdir(request.args[0], request.args[1]) satisfies Promise<HostAnswer<"fs.mkdir">>;
      case "fs.rm":
        return this.fsFor(context.animaDir).rm(request.args[0], request.args[1]) satisfies Promise<HostAnswer<"fs.rm">>;
      case "fs.rename":
        return this.fsFor(context.animaDir).rename(request.args[0], request.args[1]) satisfies Promise<HostAnswer<"fs.rename">>;
      case "credential.get":
        return this.credential(context, request.args[0]) satisfies Promise<HostAnswer<"credential.get">>;
      // Outside a background job (or in a host without jobs) progress does nothing and nothing is cancelled.
      case "job.progress":
        this.options.jobs?.invoke(context, "progress", request.args);
        return null satisfies HostAnswer<"job.progress">;
      case "job.cancelled":
        return (this.options.jobs?.invoke(context, "cancelled", request.args) === true) satisfies HostAnswer<"job.cancelled">;
      case "fetch": {
        const permissions = await loadPermissions(context.animaDir);
        if (!this.options.network) throw new ToolHostError("PermissionDenied", "fetch is not available in this host", undefined, "host");
        if (signal?.aborted) throw new ToolHostError("ExecutionError", "fetch: the call had already ended");
        return this.options.network.fetch(context, request.args[0], request.args[1], permissions.sandbox, signal, meter) satisfies Promise<HostAnswer<"fetch">>;
      }
      default:
        request satisfies never;
        throw new ToolHostError("InvalidArguments", `unknown capability ${(request as { name: string }).name}`);
    }
  }

  private async credential(context: CallContext, raw: unknown): Promise<string> {
    const request = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
    const credentialName = typeof request["credentialName"] === "string" ? request["credentialName"] : "";
    const asString = (value: unknown) => (typeof value === "string" ? value : undefined);
    const audited = truncateForAudit(credentialName || "(none)");
    try {
      const resolved = await getCredential(
        { anima: context.anima, sources: this.options.credentials, log: (record) => this.logFor(context, record) },
        {
          credentialName: request["credentialName"] as string,
          toolName: request["toolName"] as string,
          ...(asString(request["keyName"]) !== undefined ? { keyName: asString(request["keyName"]) } : {}),
          envVar: asString(request["envVar"]) ?? null,
        },
      );
      let known = this.secrets.get(context.anima);
      if (!known) this.secrets.set(context.anima, (known = new Set()));
      known.add(resolved.value);
      this.options.audit.append({ kind: "credential", ...callOf(context), name: audited, outcome: "ok", source: resolved.source });
      return resolved.value;
    } catch (error) {
      // A denial names what was refused: another Anima's name (whichever of the three names spelled it), or
      // a variable the operator has not allowed, although the tool sees the latter as missing configuration.
      const envVar = asString(request["envVar"]);
      const refusedVariable =
        !(error instanceof CredentialDeniedError) && envVar !== undefined && this.options.credentials.environment.allows?.(envVar) === false
          ? envVar
          : undefined;
      const denied =
        error instanceof CredentialDeniedError || (error instanceof ToolHostError && error.type === "PermissionDenied") || refusedVariable !== undefined;
      const name =
        error instanceof CredentialDeniedError
          ? truncateForAudit(error.deniedName)
          : refusedVariable !== undefined
            ? truncateForAudit(refusedVariable)
            : audited;
      this.options.audit.append({
        kind: "credential",
        ...callOf(context),
        name,
        outcome: denied ? "denied" : "missing",
        ...(refusedVariable !== undefined ? { reason: "not in allowed_environment" } : {}),
        ...(denied ? this.policyField(context) : {}),
      });
      throw error;
    }
  }

  private logFor(context: CallContext, record: LogRecord): void {
    if (this.options.callLog) this.options.callLog(context, record);
    else this.options.log(record);
  }

  private fsFor(animaDir: string): FsCapability {
    let fs = this.fsByAnimaDir.get(animaDir);
    if (!fs) {
      fs = new FsCapability(animaDir, this.options.fsLimits ?? DEFAULT_FS_LIMITS);
      this.fsByAnimaDir.set(animaDir, fs);
    }
    return fs;
  }

  private deny(context: CallContext, name: string, target: string, error: ErrorInfo): CapabilityReply {
    this.audit(context, name, target, "denied", `${error.type}: ${error.message}`);
    return { ok: false, error };
  }

  private policyField(context: CallContext): { policy?: string } {
    const policy = this.options.policyOf?.(context.anima);
    return policy !== undefined ? { policy } : {};
  }

  private audit(context: CallContext, operation: string, target: string, outcome: "ok" | "denied" | "error", reason?: string): void {
    this.options.audit.append({
      kind: "capability",
      ...callOf(context),
      ...(outcome === "denied" ? this.policyField(context) : {}),
      operation,
      target: truncateForAudit(target),
      outcome,
      ...(reason ? { reason: truncateForAudit(reason) } : {}),
    });
  }
}

/**
 * A capability's failure as its caller, the tool, gets it: what a capability blames on its caller
 * (bad arguments, a path or host it may not reach) is the tool's fault; the host's own failures stay the host's.
 */
function toolFacing(info: ErrorInfo): ErrorInfo {
  return info.fault === "caller" ? { ...info, fault: "tool" } : info;
}

/** Who made a capability request, as every record of it says: the Anima, the tool and the call's id. */
function callOf(context: CallContext): { anima: string; tool: string; callId?: string } {
  return { anima: context.anima, tool: context.tool, ...(context.callId !== undefined ? { callId: context.callId } : {}) };
}
