import type { AuditLog } from "./audit/audit-log.js";
import { recordLoadError } from "./audit/load-errors.js";
import type { PolicyLedger } from "./audit/policy-ledger.js";
import type { HostConfig } from "./config.js";
import { ToolHostError } from "./errors.js";
import { unknownTool } from "./host-support.js";
import { resolveAnima } from "./registry/animas.js";
import type { DiscoveryProblem } from "./registry/discovery.js";
import { higherPrefixes, yieldOf } from "./registry/precedence.js";
import { type AnimaRef, type LoadedTool, type ToolEntry, type ToolRegistry, type ToolSources, ownersOf, withCollisions } from "./registry/registry.js";

/** What one Anima sees, discovered once and loaded tool by tool on first use. */
export interface AnimaView {
  ref: AnimaRef | undefined;
  sources: ToolSources;
  names: string[];
  /** Each tool as seen in this view (what its Anima is shown and can call). */
  entries: Map<string, Promise<ToolEntry>>;
  /** Each tool as it declares itself, before it is set against the others (registry `loadDeclared`). */
  declared: Map<string, Promise<ToolEntry>>;
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
      entry = this.seen(view, toolName);
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

  /**
   * The tool a schema name routes to: the longest visible tool name that prefixes it, passing over a tool
   * that gives way to one of higher precedence (registry/precedence.ts), as `list` shows it unavailable.
   */
  async toolForSchema(view: AnimaView, schemaName: string): Promise<LoadedTool> {
    if (typeof schemaName !== "string" || schemaName === "") throw new ToolHostError("InvalidArguments", "no tool schema name was given");
    let owner: string | undefined;
    for (const candidate of ownersOf(schemaName, view.names)) {
      const entry = await this.entry(view, candidate);
      if (entry.state === "error" && entry.yieldsTo !== undefined) continue;
      owner = candidate;
      break;
    }
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

  private declared(view: AnimaView, toolName: string): Promise<ToolEntry> {
    let declared = view.declared.get(toolName);
    if (!declared) {
      declared = this.parts.registry.loadDeclared(view.sources.tools.get(toolName)!);
      view.declared.set(toolName, declared);
    }
    return declared;
  }

  /** A tool as this view sees it: as declared, unless it gives way to a tool of higher precedence or collides. */
  private async seen(view: AnimaView, toolName: string): Promise<ToolEntry> {
    const declared = await this.declared(view, toolName);
    if (declared.state !== "ok") return declared;
    const higher = higherPrefixes(declared, view.sources.tools);
    const yielded = yieldOf(declared, await Promise.all(higher.map((name) => this.declared(view, name))));
    if (yielded) {
      const { name, origin, path } = declared;
      const error = { type: "LoadError" as const, fault: "tool" as const, message: yielded.message };
      return { name, origin, path, state: "error", error, bundleHash: declared.tool.bundle.hash, yieldsTo: yielded.yieldsTo };
    }
    return withCollisions(declared, view.sources.tools);
  }

  private async discover(anima: string | undefined): Promise<AnimaView> {
    const ref = anima === undefined ? undefined : await resolveAnima(this.parts.config.dataDir, anima);
    // The Anima's policy as this host first serves it (a change since any host last looked is recorded).
    if (ref) await this.parts.policies.recheck(ref.name);
    const sources = await this.parts.registry.sources(ref);
    this.warnProblems(sources.problems);
    return { ref, sources, names: [...sources.tools.keys()], entries: new Map(), declared: new Map() };
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
