import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { recordReloads, shareReloadEvent } from "../audit/reloads.js";
import { truncateForAudit } from "../audit/audit-log.js";
import { ToolHostError, callerNotTool, errorInfoOf } from "../errors.js";
import type { AuditWriter, AuditWriterSource, CapabilityPath, CapabilityPathSource, ToolHost, ToolInfo } from "../host-api.js";
import { resolveAnima } from "../registry/animas.js";
import { TOOL_EXTENSIONS } from "../registry/discovery.js";
import { printableName } from "../terminal-text.js";
import { hostLoader } from "./load-check.js";
import { shareTool } from "./share.js";
import { shareCollisions } from "./share-collisions.js";
import type { Finding } from "./findings.js";
import { failureFindings, failureLines } from "./refresh-findings.js";
import { errorsForShare } from "./validate.js";
import { writeMemoryFile } from "./write-memory.js";
import { readSharedFile, sharedReadTarget } from "./shared-reads.js";

/**
 * The management operations an Anima (over MCP) or an operator (the CLI) asks of a host: refresh its
 * tools, share one, write and read files of its own directory. One service for both front ends, on the
 * host's public API plus its capability path and its audit writer; every operation leaves its audit record:
 *  - refresh: the reloads it found (audit/reloads.ts), once per change whoever notices it;
 *  - share: the shared tool's reload record;
 *  - write_memory_file: a `capability` record (`write_memory_file`, the path, ok / denied / error);
 *  - read_memory_file: an `fs.readFile` through the capability service, as a tool of the Anima would
 *    read the file: the same policy checks and the same audit record (its tool: `read_memory_file`).
 *
 * `managementOf(host)` gives a host's service, with the capability path and the audit writer of a host
 * the composition root (src/composition.ts) made. A service holds no state of its own (what a refresh
 * compares with is on disk; the rest is the host's), so each caller may make its own.
 */

export interface ManagementOptions {
  /** How `readMemory` reads. Absent: reading is refused (no host capability path to go through). */
  capabilities?: CapabilityPath;
  /** Where the operations' records go (the public `ToolHost.audit` only reads). Absent: they go unrecorded. */
  audit?: AuditWriter;
}

export interface RefreshReport {
  anima: string | undefined;
  loaded: string[];
  changed: string[];
  removed: string[];
  /**
   * Tools that do not load: the load's error, and the findings `validate` gives for the tool's file (with
   * `path`, the file as shown: `tools/x.ts` or `common_tools/x.ts`) when it is found (refresh-findings.ts).
   */
  failed: Array<{ name: string; error: string; hint?: string; path?: string; findings?: Finding[] }>;
  /** Files not loaded as tools (named like a core tool, a reserved name…), with the reason. */
  skipped: Array<{ name: string; reason: string }>;
  tools: string[];
}

/** The operations' names, as the audit log records them (and as MCP offers them). */
export const WRITE_MEMORY_FILE = "write_memory_file";
export const READ_MEMORY_FILE = "read_memory_file";

export class ManagementService {
  constructor(
    private readonly host: ToolHost,
    private readonly options: ManagementOptions = {},
  ) {}

  /**
   * Rescans, rebuilds and revalidates: what the Anima (or none: core and shared tools) sees now, against
   * what the last refresh saw (`loaded`, `changed`, `removed`, `failed`, `skipped`). The audit log gets
   * the reloads it has not recorded yet; a failure to record never fails the refresh.
   */
  async refresh(anima: string | undefined): Promise<RefreshReport> {
    // An Anima's refresh rebuilds its own view only (a tool whose files changed is rebuilt when the view
    // loads it; core and shared tools included): every Anima may run it, and a full refresh made every
    // other Anima's next calls rediscover and reload all they see. Without an Anima, everything.
    this.host.refresh(anima);
    const listing = await this.host.list(anima);
    const file = this.snapshotPath(anima);
    const before = (await readFile(file, "utf8")
      .then((t) => JSON.parse(t) as Record<string, string>)
      .catch(() => ({}))) as Record<string, string>;
    const now: Record<string, string> = {};
    const report: RefreshReport = {
      anima,
      loaded: [],
      changed: [],
      removed: [],
      failed: [],
      skipped: listing.problems.map((p) => ({ name: p.name, reason: p.message })),
      tools: [],
    };
    for (const tool of listing.tools) {
      const version = versionOf(tool);
      now[tool.name] = version;
      if (tool.status === "error") {
        const found = await failureFindings(this.host.config.dataDir, anima, tool);
        report.failed.push({
          name: tool.name,
          error: tool.error?.message ?? "load error",
          ...(tool.error?.hint ? { hint: tool.error.hint } : {}),
          ...(found ? { path: found.path, findings: found.findings } : {}),
        });
        continue;
      }
      report.tools.push(tool.name);
      if (!(tool.name in before)) report.loaded.push(tool.name);
      else if (before[tool.name] !== version) report.changed.push(tool.name);
    }
    for (const name of Object.keys(before)) if (!(name in now)) report.removed.push(name);
    await mkdir(dirname(file), { recursive: true });
    await writeFile(`${file}.tmp`, JSON.stringify(now));
    await rename(`${file}.tmp`, file);
    // The audit log's record of the reload, against what it last recorded (not this report's memory: a
    // watcher may have recorded the change already).
    const audit = this.options.audit;
    if (audit) await recordReloads({ dataDir: this.host.config.dataDir, audit, listing, trigger: "refresh" }).catch(() => {});
    return report;
  }

  /** Copies the Anima's personal tool `toolName` to common_tools/ (lifecycle/share.ts); returns what was done. */
  async share(anima: string, toolName: unknown): Promise<string> {
    try {
      return await shareTool({
        dataDir: this.host.config.dataDir,
        animaDir: this.animaDir(anima),
        anima,
        toolName,
        validate: errorsForShare({ load: hostLoader(this.host), anima }),
        collisions: async (tool) => {
          // As the validation's load does: the folders as they are now, in the two views read here only.
          this.host.refresh(anima);
          this.host.refresh("");
          const draft = await this.host.describe(anima, tool);
          const schemas = draft.origin === "personal" && draft.status === "ok" ? draft.schemas.map((schema) => schema.name) : [];
          // Core and shared tools only: what every Anima sees.
          return shareCollisions(tool, schemas, (await this.host.list()).tools);
        },
        onShared: (tool) => this.options.audit?.append(shareReloadEvent(anima, tool)),
      });
    } catch (error) {
      // A refused share is recorded as a refusal, whatever refused it (the permission, validation, a name).
      const info = errorInfoOf(error);
      this.options.audit?.append({
        kind: "refusal",
        anima,
        command: "share_tool",
        target: truncateForAudit(typeof toolName === "string" ? toolName : (JSON.stringify(toolName) ?? "(none)")),
        errorType: info.type,
        errorFault: info.fault,
        reason: truncateForAudit(info.message),
      });
      throw error;
    }
  }

  /** `write_memory_file` (lifecycle/write-memory.ts) for the Anima; returns what was written. */
  async writeMemory(anima: string, request: { path: unknown; content: unknown; mode?: unknown }): Promise<string> {
    const target = typeof request.path === "string" ? request.path : "";
    try {
      const text = await writeMemoryFile({ animaDir: this.animaDir(anima), path: request.path, content: request.content, mode: request.mode });
      this.record(anima, WRITE_MEMORY_FILE, WRITE_MEMORY_FILE, target, "ok");
      return text;
    } catch (error) {
      const info = errorInfoOf(error);
      const denied = info.type === "PermissionDenied" || info.type === "SandboxViolation";
      this.record(anima, WRITE_MEMORY_FILE, WRITE_MEMORY_FILE, target, denied ? "denied" : "error", `${info.type}: ${info.message}`);
      throw error;
    }
  }

  /**
   * `write_memory_file` as an Anima calls it (MCP): the write, and for a tool file (`tools/<name>.ts`, `.py`…)
   * what the host then did with it — refreshed at once, and answered with its actions or with why it does
   * not load (an error result: an Anima must not be told that a broken tool worked).
   */
  async writeMemoryAndLoad(anima: string, request: { path: unknown; content: unknown; mode?: unknown }): Promise<{ text: string; isError?: true }> {
    const written = await this.writeMemory(anima, request);
    const tool = typeof request.path === "string" ? TOOL_FILE.exec(request.path.replace(/^\.\//, "")) : null;
    if (!tool) return { text: written };
    const name = tool[1]!;
    const report = await this.refresh(anima);
    const failure = report.failed.find((failed) => failed.name === name);
    if (failure) {
      // The findings `validate` gives, as refresh lists them (one per line, path:line:col first).
      if (failure.path !== undefined && failure.findings && failure.findings.length > 0) {
        const [, ...findings] = failureLines(name, { path: failure.path, findings: failure.findings });
        return { text: `${written} The tool "${name}" does not load:\n${findings.join("\n")}\nFix it and write it again.`, isError: true };
      }
      return {
        text: `${written} The tool "${name}" does not load: ${failure.error}${failure.hint ? ` (fix: ${failure.hint})` : ""}. Fix it and write it again; \`animaworks-tool validate ${tool[0]}\` lists every problem.`,
        isError: true,
      };
    }
    // Skipped names are shown escaped (registry/discovery.ts): compared so.
    const shown = printableName(name);
    const skipped = report.skipped.find((skip) => skip.name === shown || skip.name.startsWith(`${shown}.`));
    if (skipped) return { text: `${written} It is not loaded: ${skipped.reason}.`, isError: true };
    const listing = await this.host.list(anima);
    const loaded = listing.tools.find((info) => info.name === name);
    if (!loaded || loaded.status !== "ok") return { text: `${written} The tool "${name}" is not among this Anima's tools after a refresh.`, isError: true };
    const origin = loaded.origin === "personal" ? "" : ` (a ${loaded.origin} tool of that name is used instead of yours)`;
    return { text: `${written} Loaded "${name}"${origin}: ${loaded.schemas.map((schema) => schema.name).join(", ")}.` };
  }

  /**
   * A text file of the Anima's own directory, read through the host's capability path (see above), or of
   * a folder of the data dir every Anima may read (`common_skills/…`: shared-reads.ts), recorded the same way.
   */
  async readMemory(anima: string, path: unknown): Promise<string> {
    const shared = sharedReadTarget(path);
    if (shared) return this.readShared(anima, path as string, shared);
    if (!this.options.capabilities) {
      throw new ToolHostError("PermissionDenied", `${READ_MEMORY_FILE}: this host has no capability path to read through`, "use a host made by createHost");
    }
    const ref = await resolveAnima(this.host.config.dataDir, anima);
    const reply = await this.options.capabilities(
      { anima: ref.name, animaDir: ref.dir, tool: READ_MEMORY_FILE },
      "fs.readFile",
      JSON.stringify([path ?? null]),
    );
    // Read as a tool reads, but asked for by the caller: no tool is involved in a refusal (#35 item 4).
    if (!reply.ok) throw callerNotTool(ToolHostError.fromInfo(reply.error));
    // A file's text may arrive undecoded; it serialises as its text (isolation/wire/messages.ts CapabilityReply).
    return typeof reply.value === "string" ? reply.value : (JSON.parse(JSON.stringify(reply.value)) as string);
  }

  private async readShared(anima: string, path: string, target: { folder: string; inside: string }): Promise<string> {
    const ref = await resolveAnima(this.host.config.dataDir, anima);
    try {
      const text = await readSharedFile(this.host.config.dataDir, target);
      this.record(ref.name, READ_MEMORY_FILE, "fs.readFile", path, "ok");
      return text;
    } catch (error) {
      const info = errorInfoOf(error);
      const denied = info.type === "PermissionDenied" || info.type === "SandboxViolation";
      this.record(ref.name, READ_MEMORY_FILE, "fs.readFile", path, denied ? "denied" : "error", `${info.type}: ${info.message}`);
      // Paths in the message are inside the shared folder: say which folder (and no tool is involved).
      const shown = new ToolHostError(info.type, info.message.replace(/"([^"]*)"/, `"${target.folder}/$1"`), info.hint, info.fault);
      throw callerNotTool(shown);
    }
  }

  private animaDir(anima: string): string {
    return join(this.host.config.dataDir, "animas", anima);
  }

  /** Each refresh remembers the version of every tool it saw, so the next one can say what changed. */
  private snapshotPath(anima: string | undefined): string {
    return join(this.host.config.dataDir, "cache", "animaworks-tool", `refresh-${anima === undefined ? "_" : encodeURIComponent(anima)}.json`);
  }

  private record(anima: string, tool: string, operation: string, target: string, outcome: "ok" | "denied" | "error", reason?: string): void {
    this.options.audit?.append({
      kind: "capability",
      anima,
      tool,
      operation,
      target: truncateForAudit(target),
      outcome,
      ...(reason ? { reason: truncateForAudit(reason) } : {}),
    });
  }
}

/** A personal tool's file: directly in tools/, with any extension discovery loads (group 1: the tool's name). */
const TOOL_FILE = new RegExp(`^tools/([^/]+)(?:${TOOL_EXTENSIONS.map((ext) => ext.replace(".", "\\.")).join("|")})$`);

function versionOf(tool: ToolInfo): string {
  return tool.status === "error" ? `error:${tool.error?.message ?? ""}` : `${tool.origin}:${JSON.stringify(tool.schemas)}:${tool.bundleHash ?? ""}`;
}

export function formatRefresh(report: RefreshReport): string {
  const lines: string[] = [];
  for (const name of report.loaded) lines.push(`loaded   ${name}`);
  for (const name of report.changed) lines.push(`changed  ${name}`);
  for (const name of report.removed) lines.push(`removed  ${name}`);
  for (const failure of report.failed) {
    if (failure.path !== undefined && failure.findings) lines.push(...failureLines(failure.name, { path: failure.path, findings: failure.findings }));
    // A load error often starts with the tool's name already: said once.
    else lines.push(`failed   ${failure.name}: ${withoutName(failure.name, failure.error)}${failure.hint ? ` (fix: ${failure.hint})` : ""}`);
  }
  for (const skip of report.skipped) lines.push(`skipped  ${skip.name}: ${skip.reason}`);
  if (report.tools.length === 0) lines.push("No personal or common tools found.");
  else lines.push(`Refreshed tools (${report.tools.length} discovered): ${report.tools.join(", ")}`);
  // Never "all available" when some are not (issue #35): the failed ones are named, with what to do.
  const failed = report.failed.map((failure) => failure.name);
  if (failed.length > 0) {
    lines.push(
      `${report.tools.length > 0 ? "These tools are available for use; " : ""}${failed.join(", ")} ${failed.length === 1 ? "does" : "do"} not load: fix ${failed.length === 1 ? "it" : "them"} (see "failed" above) and refresh again.`,
    );
  } else if (report.tools.length > 0) lines.push("These tools are now available for use.");
  return lines.join("\n");
}

function withoutName(name: string, message: string): string {
  return message.startsWith(`${name}: `) ? message.slice(name.length + 2) : message;
}

/**
 * The management service of `host`, with its capability path when it is a host the composition root made
 * (`CapabilityPathSource`; any other ToolHost, such as a CLI invocation's view of a running host or a test
 * double, gets one without, which cannot read files), and its audit writer (`AuditWriterSource`; a CLI
 * invocation's view hands on the running host's).
 */
export function managementOf(host: ToolHost): ManagementService {
  const source = host as ToolHost & Partial<CapabilityPathSource & AuditWriterSource>;
  const capabilities = typeof source.capabilityPath === "function" ? source.capabilityPath : undefined;
  const audit = typeof source.auditWriter?.append === "function" ? source.auditWriter : undefined;
  return new ManagementService(host, { ...(capabilities ? { capabilities } : {}), ...(audit ? { audit } : {}) });
}
