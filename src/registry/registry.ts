import { join } from "node:path";
import type { ToolBundler } from "../bundling/bundler.js";
import { sha256 } from "../bundling/sha256.js";
import { type ErrorInfo, errorInfoOf } from "../errors.js";
import type { Executor, ToolBundle } from "../isolation/wire/messages.js";
import { PYTHON_BOOT_GRACE_MS, isPythonBundle } from "../isolation/wire/tool-bundle.js";
import { type DiscoveredTool, type DiscoveryProblem, type ToolOrigin, discoverFolder } from "./discovery.js";
import type { ProfileEntry } from "./profile.js";
import type { SchemaCheck, ToolSchema } from "./schemas.js";
import { type SchemaCheckRequest, type SchemaChecker, SchemaCheckTurns, checkAndCompile, checkInline } from "./schema-compile.js";
import { monotonicMs } from "../clock.js";
import { type VisibleTools, findSchemaCollision } from "./precedence.js";

export interface AnimaRef {
  name: string;
  dir: string;
}

export interface LoadedTool {
  name: string;
  origin: ToolOrigin;
  path: string;
  bundle: ToolBundle;
  schemas: ToolSchema[];
  profile: Record<string, ProfileEntry>;
  hasCliMain: boolean;
}

export type ToolEntry =
  | { name: string; origin: ToolOrigin; path: string; state: "ok"; tool: LoadedTool }
  /** `bundleHash`: the failed version, when it built (it tells one broken version from the next). */
  /**
   * `yieldsTo`: the tool of higher precedence this one gives way to in this view (precedence.ts): its name
   * then owns no schema name.
   */
  | { name: string; origin: ToolOrigin; path: string; state: "error"; error: ErrorInfo; bundleHash?: string; yieldsTo?: string };

/** The tools one Anima sees, before loading: core, then shared, then personal (personal wins). */
export interface ToolSources {
  tools: Map<string, DiscoveredTool>;
  /** Files that are not tools for a reason the author should hear about (bad name, shadowing…). */
  problems: DiscoveryProblem[];
}

interface CachedDescription {
  schemas: ToolSchema[];
  profile: Record<string, ProfileEntry>;
  hasCliMain: boolean;
}

/** Bump when what `describe` yields or how it is checked changes. */
const DESCRIPTION_FORMAT = "d8";
/** Pinned tool versions whose schemas `schemaFor` keeps in memory. */
const MAX_PINNED_DESCRIPTIONS = 256;
/**
 * Tool files whose loads the registry keeps in memory (`RegistryOptions.maxLoaded`). Paths are chosen by
 * Animas and only a full refresh forgets loads, so without a bound every file an Anima ever had loaded
 * would be held for the life of the host.
 */
export const MAX_LOADED_TOOLS = 4096;

/**
 * A failure to run a tool's module (as opposed to its declaration failing the checks) may be transient:
 * a sandbox process that crashed because of another call, a host too busy to finish within the load
 * timeout. The executor reports all of these as LoadError, so such a failure is kept only this long
 * before the next use tries again, and twice as long after each further failure of that same version
 * (`LOAD_FAILURE_MAX_DOUBLINGS`): a tool whose load spins until its timeout costs a few load attempts,
 * not one every 10 s for as long as its Anima keeps asking.
 */
export const LOAD_FAILURE_RETRY_MS = 10_000;
/** The retry period of a version's load failures doubles at most this many times: 10 s, 20 s, … 640 s. */
export const LOAD_FAILURE_MAX_DOUBLINGS = 6;

/** How long after its `failures`-th transient load failure in a row (from 1) a tool version is tried again, ms. */
export function loadRetryAfterMs(failures: number): number {
  return LOAD_FAILURE_RETRY_MS * 2 ** Math.min(Math.max(0, failures - 1), LOAD_FAILURE_MAX_DOUBLINGS);
}

/**
 * How long a failed version's retry must have been due, unused, before a refresh forgets it (and with it
 * its count of failures): the longest retry period. Forgetting it as soon as it is due would let every
 * refresh (which Animas can cause by editing files) restart its doubling at 10 s.
 */
export const LOAD_FAILURE_FORGET_AFTER_MS = loadRetryAfterMs(LOAD_FAILURE_MAX_DOUBLINGS + 1);

export interface RegistryOptions {
  dataDir: string;
  coreToolsDir: string;
  loadTimeoutMs: number;
  memoryLimitMb: number;
  bundler: ToolBundler;
  executor: Executor;
  /** At most this many tool files' loads are kept (MAX_LOADED_TOOLS). */
  maxLoaded?: number;
  /** Checks and compiles schemas larger than INLINE_SCHEMA_CHARS off this thread (schema-compile.ts). Default: all on this thread. */
  schemaChecker?: SchemaChecker;
}

interface KeptLoad {
  hash: string;
  entry: ToolEntry;
  expiresAt: number;
  failures: number;
}

/**
 * Finds and loads tools. Loading = bundle (cached on disk by content) + describe in a throwaway isolate
 * (cached by bundle hash) + schema checks. One tool's failure never affects another's availability.
 */
export class ToolRegistry {
  /**
   * Loaded entries by file path, valid while the bundle hash is unchanged (a transient failure until
   * `expiresAt`), with the transient load failures in a row of that version.
   */
  private readonly loaded = new Map<string, KeptLoad>();
  /** Large schemas' checks of each Anima's loads, in turn (schema-compile.ts). */
  private readonly schemaTurns = new SchemaCheckTurns();
  /** Schemas of pinned tool versions (`schemaFor`), oldest first. */
  private readonly pinnedSchemas = new Map<string, ToolSchema[]>();

  constructor(private readonly options: RegistryOptions) {}

  async sources(anima: AnimaRef | undefined): Promise<ToolSources> {
    const [core, shared, personal] = await Promise.all([
      discoverFolder(this.options.coreToolsDir, "core"),
      discoverFolder(join(this.options.dataDir, "common_tools"), "shared"),
      anima ? discoverFolder(join(anima.dir, "tools"), "personal") : Promise.resolve({ tools: [], problems: [] }),
    ]);
    if (anima) for (const tool of personal.tools) tool.anima = anima.name;
    const tools = new Map<string, DiscoveredTool>();
    const problems = [...core.problems, ...shared.problems, ...personal.problems];
    for (const tool of core.tools) tools.set(tool.name, tool);
    for (const tool of [...shared.tools, ...personal.tools]) {
      const existing = tools.get(tool.name);
      if (existing?.origin === "core") {
        problems.push({
          name: tool.name,
          origin: tool.origin,
          file: tool.path,
          message: `${tool.origin} tool "${tool.name}" has the name of a core tool and is skipped; rename it`,
        });
        continue;
      }
      tools.set(tool.name, tool); // personal is added after shared, so it wins
    }
    return { tools, problems };
  }

  /**
   * Loads one tool as it declares itself, before it is set against the other tools one Anima sees
   * (anima-views.ts: `withCollisions`, and precedence.ts for tools of different origins).
   */
  async loadDeclared(source: DiscoveredTool): Promise<ToolEntry> {
    const base = { name: source.name, origin: source.origin, path: source.path };
    const built = await this.options.bundler.build({
      path: source.path,
      folder: source.folder,
      ...(source.folderReal !== undefined ? { folderReal: source.folderReal } : {}),
      ...(source.origin === "core" ? { core: true } : {}),
      displayName: `${source.origin}/${source.path.slice(source.folder.length + 1)}`,
    });
    if (!built.ok) return { ...base, state: "error", error: built.error };
    const bundle = built.bundle;
    const previous = this.loaded.get(source.path);
    let entry: ToolEntry;
    if (previous && previous.hash === bundle.hash && monotonicMs() < previous.expiresAt) {
      entry = previous.entry;
      this.keep(source.path, previous); // now the newest: the bound drops loads not used for longest
    } else {
      const failures = previous?.hash === bundle.hash ? previous.failures : 0;
      const described = await this.describe(source, bundle);
      entry = described.entry;
      if (described.transient)
        this.keep(source.path, { hash: bundle.hash, entry, expiresAt: monotonicMs() + loadRetryAfterMs(failures + 1), failures: failures + 1 });
      else this.keep(source.path, { hash: bundle.hash, entry, expiresAt: Number.POSITIVE_INFINITY, failures: 0 });
    }
    if (entry.state === "ok") return entry;
    return { ...entry, bundleHash: bundle.hash };
  }

  /**
   * The schema `schemaName` of a pinned tool version (a background job's bundle), from its cached
   * description, or by describing the bundle again when that is gone. Undefined if it has no such schema.
   */
  async schemaFor(toolName: string, bundle: ToolBundle, schemaName: string): Promise<ToolSchema | undefined> {
    const key = `${toolName}\0${bundle.hash}`;
    let schemas = this.pinnedSchemas.get(key);
    if (!schemas) {
      const { entry } = await this.describe({ name: toolName, origin: "personal", path: "", folder: "" }, bundle);
      schemas = entry.state === "ok" ? entry.tool.schemas : [];
      if (this.pinnedSchemas.size >= MAX_PINNED_DESCRIPTIONS) this.pinnedSchemas.delete(this.pinnedSchemas.keys().next().value as string);
      this.pinnedSchemas.set(key, schemas);
    }
    return schemas.find((schema) => schema.name === schemaName);
  }

  /**
   * Forgets loaded tools so the next load re-reads everything, except a version whose load failed and
   * waits for its retry (`loadRetryAfterMs`), or has been due for less than LOAD_FAILURE_FORGET_AFTER_MS:
   * a refresh does not cut its backoff short (a changed file is another version, loaded at once). A
   * failed version is kept whether or not its file still exists (that is not known here without a
   * look at the disk per entry, and deleting and writing the file again must not cut the backoff short
   * either); it is forgotten by the first refresh once it has been due that long.
   */
  forget(path?: string): void {
    const now = monotonicMs();
    for (const [key, kept] of this.loaded) {
      if ((path === undefined || key === path) && forgettable(kept, now)) this.loaded.delete(key);
    }
  }

  /**
   * Keeps a load, as the newest (the map is oldest first). When full, it makes room by dropping the oldest
   * load a refresh would forget, or else the oldest of all (its backoff is cut short, but only by loads
   * of `maxLoaded` other files since, each costing as much as that retry).
   */
  private keep(path: string, kept: KeptLoad): void {
    this.loaded.delete(path);
    if (this.loaded.size >= (this.options.maxLoaded ?? MAX_LOADED_TOOLS)) {
      const now = monotonicMs();
      let victim: string | undefined;
      for (const [key, other] of this.loaded) {
        if (forgettable(other, now)) {
          victim = key;
          break;
        }
      }
      this.loaded.delete(victim ?? (this.loaded.keys().next().value as string));
    }
    this.loaded.set(path, kept);
  }

  /** `request` checked and compiled: here when small, else by the schema checker (schema-compile.ts). */
  private checkSchemas(request: SchemaCheckRequest, anima: string | undefined): Promise<SchemaCheck> | SchemaCheck {
    const checker = this.options.schemaChecker;
    if (!checker || checkInline(request)) return checkAndCompile(request);
    return this.schemaTurns.run(anima ?? "", () => checker.checkSchemas(request, anima));
  }

  /** `transient`: the module could not be run, which may succeed on a later try (see LOAD_FAILURE_RETRY_MS). */
  private async describe(source: DiscoveredTool, bundle: ToolBundle): Promise<{ entry: ToolEntry; transient: boolean }> {
    const base = { name: source.name, origin: source.origin, path: source.path };
    // The checks depend on the tool's name (schema prefixes), so two tools with the same bundle text
    // must not share a description. Nor may two owners: a personal tool is described in its Anima's
    // cordon, and what a process there answered is never cached for anyone else.
    const describer = source.anima === undefined ? source.origin : `anima-${sha256(source.anima).slice(0, 16)}`;
    const cacheKey = `${DESCRIPTION_FORMAT}-${source.name}-${bundle.hash}-${describer}`;
    const cache = this.options.bundler.cache;
    let description = await cache.getMeta<CachedDescription>(cacheKey);
    if (!description || !Array.isArray(description.schemas)) {
      const outcome = await this.options.executor.describe({
        op: "describe",
        bundle,
        // A Python tool's load starts an interpreter first (PYTHON_BOOT_GRACE_MS).
        timeoutMs: this.options.loadTimeoutMs + (isPythonBundle(bundle.code) ? PYTHON_BOOT_GRACE_MS : 0),
        memoryLimitMb: this.options.memoryLimitMb,
        ...(source.anima !== undefined ? { owner: source.anima } : {}),
      });
      if (!outcome.ok) return { entry: { ...base, state: "error", error: { ...outcome.error, type: "LoadError" } }, transient: true };
      let check: SchemaCheck;
      try {
        check = await this.checkSchemas({ toolName: source.name, schemas: outcome.module.schemas, profile: outcome.module.profile }, source.anima);
      } catch (error) {
        // The checks could not run now (busy, past their time, their process ended): a later load tries again.
        const info = errorInfoOf(error);
        return { entry: { ...base, state: "error", error: { ...info, type: "LoadError", message: `${source.name}: ${info.message}` } }, transient: true };
      }
      if (!check.ok) {
        return {
          entry: { ...base, state: "error", error: { type: "LoadError", fault: "tool", message: `${source.name}: ${check.problems.join("; ")}` } },
          transient: false,
        };
      }
      const exportsInfo = outcome.module.exports;
      const hasDispatch = exportsInfo["dispatch"] === "function";
      const missing = check.schemas.filter((schema) => !hasDispatch && exportsInfo[schema.name] !== "function");
      if (missing.length > 0) {
        const error = {
          type: "LoadError" as const,
          fault: "tool" as const,
          message: `${source.name}: no handler for ${missing.map((s) => s.name).join(", ")}`,
          hint: "export dispatch(name, args), or a function named like each schema",
        };
        return { entry: { ...base, state: "error", error }, transient: false };
      }
      description = {
        // Each schema carries its generated validators, so a fresh process validates without ajv.
        schemas: check.schemas,
        profile: check.profile,
        hasCliMain: exportsInfo["cli_main"] === "function" || exportsInfo["cliMain"] === "function",
      };
      await cache.putMeta(cacheKey, description);
    }
    return { entry: { ...base, state: "ok", tool: { ...base, bundle, ...description } }, transient: false };
  }
}

/** A refresh forgets a load, unless it is a failed version whose retry is not yet due, or only recently. */
function forgettable(kept: KeptLoad, now: number): boolean {
  return kept.failures === 0 || now >= kept.expiresAt + LOAD_FAILURE_FORGET_AFTER_MS;
}

/** `entry` as seen with `visible`: unavailable when one of its schema names belongs to another tool (precedence.ts). */
export function withCollisions(entry: ToolEntry, visible: VisibleTools): ToolEntry {
  if (entry.state !== "ok") return entry;
  const collision = findSchemaCollision(entry.tool, visible);
  if (!collision) return entry;
  const { name, origin, path } = entry;
  return { name, origin, path, state: "error", error: { type: "LoadError", fault: "tool", message: collision }, bundleHash: entry.tool.bundle.hash };
}

/**
 * The visible tool names that could own `schemaName` (each followed by `_` and an action starts it),
 * longest first: a schema name belongs to the longest (docs/animaworks-reference.md §3.3), unless that
 * tool gives way to one of higher precedence (precedence.ts), when the next longest does.
 */
export function ownersOf(schemaName: string, visibleNames: Iterable<string>): string[] {
  return [...visibleNames].filter((name) => schemaName.startsWith(`${name}_`) && schemaName.length > name.length + 1).sort((a, b) => b.length - a.length);
}
