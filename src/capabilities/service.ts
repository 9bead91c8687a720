import { type AuditLog, truncateForAudit } from "../audit/audit-log.js";
import type { LogRecord } from "../config.js";
import { type CredentialSources, CredentialDeniedError, getCredential } from "../credentials/index.js";
import { type ErrorInfo, ToolHostError } from "../errors.js";
import type { CallContext, CapabilityReply } from "../isolation/protocol.js";
import { loadPermissions } from "../policy/permissions.js";
import { DEFAULT_FS_LIMITS, FsCapability, type FsLimits } from "./fs.js";
import type { JobCalls } from "./job-calls.js";

/**
 * The host side of every capability a tool can ask for. It runs in the host process (never in a
 * sandbox process), binds each request to the Anima of the call that made it, validates the untrusted
 * JSON arguments, applies the Anima's policy, and audits every use and every denial.
 */
export interface NetworkRequester {
  /** Performs one HTTP request for `context` under `policy`; throws ToolHostError on denial. Stops when `signal` aborts. */
  fetch(context: CallContext, url: unknown, init: unknown, policy: Awaited<ReturnType<typeof loadPermissions>>["sandbox"], signal?: AbortSignal): Promise<unknown>;
}

export interface CapabilityServiceOptions {
  fsLimits?: FsLimits;
  credentials: CredentialSources;
  audit: AuditLog;
  log: (record: LogRecord) => void;
  network?: NetworkRequester;
  /** Background job runs, for `progress` and `isCancelled`. Default: none (every call is a direct call). */
  jobs?: JobCalls;
}

const FS_OPERATIONS = new Set(["readFile", "writeFile", "appendFile", "readdir", "stat", "exists", "mkdir", "rm", "rename"]);

export class CapabilityService {
  private readonly fsByAnimaDir = new Map<string, FsCapability>();
  /** Secret values handed to each Anima's tools, so logs can be redacted (see `secretsOf`). */
  private readonly secrets = new Map<string, Set<string>>();

  constructor(private readonly options: CapabilityServiceOptions) {}

  /** Values of credentials resolved for `anima` so far (never logged; used to redact tool output). */
  secretsOf(anima: string): string[] {
    return [...(this.secrets.get(anima) ?? [])];
  }

  /** `signal` aborts when the call that asked ends: nothing it asked for starts after that, and a fetch stops. */
  invoke = async (context: CallContext, name: string, argsJson: string, signal?: AbortSignal): Promise<CapabilityReply> => {
    if (signal?.aborted) return { ok: false, error: { type: "ExecutionError", message: `${name}: the call had already ended` } };
    let args: unknown;
    try {
      args = JSON.parse(argsJson);
    } catch {
      return this.deny(context, name, "", { type: "InvalidArguments", message: `${name}: the arguments are not valid JSON` });
    }
    if (!Array.isArray(args)) return this.deny(context, name, "", { type: "InvalidArguments", message: `${name}: malformed call` });
    const target = typeof args[0] === "string" ? args[0] : "";
    // fetch audits itself, once per hop and without query strings (a query may carry a secret). Job
    // progress reaches only the calling job and is recorded on it, not in the audit trail.
    const selfAudited = name === "credential.get" || name === "fetch" || name.startsWith("job.");
    try {
      const value = await this.run(context, name, args, signal);
      if (!selfAudited) this.audit(context, name, target, "ok");
      return { ok: true, value: value === undefined ? null : value };
    } catch (error) {
      const info: ErrorInfo =
        error instanceof ToolHostError ? error.toInfo() : { type: "ExecutionError", message: `${name} failed` };
      if (name === "credential.get") return { ok: false, error: info };
      const denied = info.type === "SandboxViolation" || info.type === "PermissionDenied";
      if (!selfAudited) this.audit(context, name, target, denied ? "denied" : "error", `${info.type}: ${info.message}`);
      if (denied) this.options.log({ level: "warn", logger: "animaworks.host", message: `denied ${name}: ${info.message}`, anima: context.anima, tool: context.tool });
      return { ok: false, error: info };
    }
  };

  private async run(context: CallContext, name: string, args: unknown[], signal: AbortSignal | undefined): Promise<unknown> {
    if (name.startsWith("fs.")) {
      const operation = name.slice(3);
      if (!FS_OPERATIONS.has(operation)) throw new ToolHostError("InvalidArguments", `unknown capability ${name}`);
      const fs = this.fsFor(context.animaDir);
      // Read as bytes: decoded where the text is used (bulk-channel.ts), not on the host's event loop.
      if (operation === "readFile") return fs.readText(args[0], args[1]);
      // Entries left out of a listing (names that are not valid UTF-8) are reported in the host's log.
      if (operation === "readdir") return fs.readdir(args[0], (message) => this.options.log({ level: "warn", logger: "animaworks.host", message, anima: context.anima, tool: context.tool }));
      const method = fs[operation as "readFile"] as (...a: unknown[]) => Promise<unknown>;
      return method.apply(fs, args.slice(0, 3));
    }
    if (name === "credential.get") return this.credential(context, args[0]);
    if (name.startsWith("job.")) {
      const operation = name.slice(4);
      if (!this.options.jobs) return operation === "cancelled" ? false : null;
      return this.options.jobs.invoke(context, operation, args);
    }
    if (name === "fetch") {
      const permissions = await loadPermissions(context.animaDir);
      if (!this.options.network) throw new ToolHostError("PermissionDenied", "fetch is not available in this host");
      if (signal?.aborted) throw new ToolHostError("ExecutionError", "fetch: the call had already ended");
      return this.options.network.fetch(context, args[0], args[1], permissions.sandbox, signal);
    }
    throw new ToolHostError("InvalidArguments", `unknown capability ${name}`);
  }

  private async credential(context: CallContext, raw: unknown): Promise<string> {
    const request = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
    const credentialName = typeof request["credentialName"] === "string" ? request["credentialName"] : "";
    const asString = (value: unknown) => (typeof value === "string" ? value : undefined);
    const audited = truncateForAudit(credentialName || "(none)");
    try {
      const resolved = await getCredential(
        { anima: context.anima, sources: this.options.credentials, log: this.options.log },
        {
          credentialName: request["credentialName"] as string,
          toolName: request["toolName"] as string,
          ...(asString(request["keyName"]) !== undefined ? { keyName: asString(request["keyName"]) as string } : {}),
          envVar: asString(request["envVar"]) ?? null,
        },
      );
      let known = this.secrets.get(context.anima);
      if (!known) this.secrets.set(context.anima, (known = new Set()));
      known.add(resolved.value);
      this.options.audit.append({ kind: "credential", anima: context.anima, tool: context.tool, name: audited, outcome: "ok", source: resolved.source });
      return resolved.value;
    } catch (error) {
      const denied = error instanceof CredentialDeniedError || (error instanceof ToolHostError && error.type === "PermissionDenied");
      this.options.audit.append({ kind: "credential", anima: context.anima, tool: context.tool, name: audited, outcome: denied ? "denied" : "missing" });
      throw error;
    }
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

  private audit(context: CallContext, operation: string, target: string, outcome: "ok" | "denied" | "error", reason?: string): void {
    this.options.audit.append({
      kind: "capability",
      anima: context.anima,
      tool: context.tool,
      operation,
      target: truncateForAudit(target),
      outcome,
      ...(reason ? { reason: truncateForAudit(reason) } : {}),
    });
  }
}
