import type { AuditLog } from "./audit/audit-log.js";
import { recordLoadError } from "./audit/load-errors.js";
import type { PolicyLedger } from "./audit/policy-ledger.js";
import type { HostConfig } from "./config.js";
import { ToolHostError } from "./errors.js";
import { unknownTool } from "./host-support.js";
import { resolveAnima } from "./registry/animas.js";
import type { DiscoveryProblem } from "./registry/discovery.js";
import { type AnimaRef, type LoadedTool, type ToolEntry, type ToolRegistry, type ToolSources, ownerOf } from "./registry/registry.js";

/** What one Anima sees, discovered once and loaded tool by tool on first use. */
export interface AnimaView {
  ref: AnimaRef | undefined;
  sources: ToolSources;
  names: string[];
  entries: Map<string, Promise<ToolEntry>>;
}

/** What the views need of the host (host.ts), all made by the composition root. */
export interface AnimaViewParts {
  config: HostConfig;
  audit: AuditLog;
  registry: ToolRegistry;
  policies: PolicyLedger;
}

/**
 * The host's views per Anima (host.ts): which tools each Anima sees, and each tool loaded on first use
 * and found by a schema or tool name as the host's precedence says (registry/registry.ts).
 */
export class AnimaViews {
  /** Views by Anima name ("" for none). Cleared by `forget()`. */
  private views = new Map<string, Promise<AnimaView>>();
  private readonly warned = new Set<string>();

  constructor(private readonly parts: AnimaViewParts) {}

  /** The cached view for an Anima (undefined: core and shared tools only). A failed lookup is not cached. */
  view(anima: string | undefined): Promise<AnimaView> {
    const key = anima ?? "";
    let view = this.views.get(key);
    if (!view) {
      view = this.discover(anima);
      this.views.set(key, view);
      view.catch(() => this.views.get(key) === view && this.views.delete(key));
    }
    return view;
  }

  /** Drops the view of `anima`, or every view: each is discovered again on next use. */
  forget(anima?: string): void {
    if (anima === undefined) this.views = new Map();
    else this.views.delete(anima);
  }

  entry(view: AnimaView, toolName: string): Promise<ToolEntry> {
    let entry = view.entries.get(toolName);
    if (!entry) {
      entry = this.parts.registry.load(view.sources.tools.get(toolName)!, view.names);
      view.entries.set(toolName, entry);
      void entry.then((loaded) => {
        // Once per broken version, however many processes load it (audit/load-errors.ts).
        if (loaded.state === "error") {
          const event = {
            kind: "load_error" as const,
            ...(view.ref ? { anima: view.ref.name } : {}),
            tool: loaded.name,
            origin: loaded.origin,
            message: loaded.error.message,
          };
          recordLoadError(this.parts.config.dataDir, this.parts.audit, event, loaded);
        }
      });
    }
    return entry;
  }

  async toolForSchema(view: AnimaView, schemaName: string): Promise<LoadedTool> {
    if (typeof schemaName !== "string" || schemaName === "") throw new ToolHostError("InvalidArguments", "no tool schema name was given");
    const owner = ownerOf(schemaName, view.names);
    if (!owner) {
      if (view.sources.tools.has(schemaName)) {
        const entry = await this.entry(view, schemaName);
        const actions = entry.state === "ok" ? entry.tool.schemas.map((s) => s.action).join(", ") : "";
        throw new ToolHostError("ToolNotFound", `"${schemaName}" is a tool, not an action`, actions ? `name an action: ${actions}` : undefined);
      }
      throw unknownTool(schemaName, view.names);
    }
    return this.loadTool(view, owner);
  }

  async loadTool(view: AnimaView, toolName: string): Promise<LoadedTool> {
    if (!view.sources.tools.has(toolName)) throw unknownTool(toolName, view.names);
    const entry = await this.entry(view, toolName);
    if (entry.state === "error") throw ToolHostError.fromInfo(entry.error);
    return entry.tool;
  }

  private async discover(anima: string | undefined): Promise<AnimaView> {
    const ref = anima === undefined ? undefined : await resolveAnima(this.parts.config.dataDir, anima);
    // The Anima's policy as this host first serves it (a change since any host last looked is recorded).
    if (ref) await this.parts.policies.recheck(ref.name);
    const sources = await this.parts.registry.sources(ref);
    this.warnProblems(sources.problems);
    return { ref, sources, names: [...sources.tools.keys()], entries: new Map() };
  }

  private warnProblems(problems: DiscoveryProblem[]): void {
    for (const problem of problems) {
      const key = `${problem.file}\0${problem.message}`;
      if (this.warned.has(key)) continue;
      this.warned.add(key);
      this.parts.config.onLog({ level: "warn", logger: "animaworks.host", message: problem.message, tool: problem.name });
    }
  }
}
