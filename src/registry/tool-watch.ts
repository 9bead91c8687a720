import { join, relative, sep } from "node:path";
import { printableName } from "../terminal-text.js";
import { isAnimaName } from "./animas.js";
import type { ToolFolderWatcher } from "./watcher.js";

/**
 * The host's watch over its tool folders, and the change event it emits: after a burst of edits settled
 * and the host reloaded (`onBurst`: refresh, record the reloads), each subscriber hears which Anima's tools
 * changed (undefined: the shared tools in common_tools/, which every Anima sees) and the paths.
 *
 * Watchers by scope:
 *  - every Anima (`HostOptions.watch`, or a subscriber without an Anima): `common_tools/`, `animas/` (to see
 *    Animas come and go) and each Anima's `tools/`, top level only, as discovery reads them. Nothing else
 *    in an Anima's folder is looked at (`watchesPath`): chokidar holds every path it tracks in memory, so
 *    an Anima's 100,000 notes grew the shared host by 150 MB;
 *  - one Anima (a subscriber for it, e.g. an MCP server, on a host not watching every Anima): only
 *    `common_tools/` and that Anima's `tools/`, so that edits elsewhere cost it nothing.
 * A watcher started for subscribers stops with the last of them; the host's own (`watchAll`) runs until
 * `close`. A subscriber hears the watcher of its scope and the every-Anima one.
 */
export interface ToolsChange {
  /** The Anima whose own tools changed; undefined: shared tools (common_tools/), which every Anima sees. */
  anima: string | undefined;
  /** The files of that folder the burst touched (written, added or removed). */
  paths: string[];
}

export type ToolsChangeListener = (change: ToolsChange) => void;

/** null: every Anima; else the one Anima watched. */
type Scope = string | null;

interface ScopeWatch {
  watcher: Promise<ToolFolderWatcher>;
  /** Subscribers holding it; the host's own watch holds it for good. */
  users: number;
  permanent: boolean;
}

export interface ToolWatchOptions {
  dataDir: string;
  /** After a burst in a watched scope: reload (and record), before subscribers are told. `anima`: the scope's Anima, if one. */
  onBurst: (paths: string[], anima: string | undefined) => Promise<void> | void;
  /** A path in a watched folder the watcher cannot follow (once per path and watcher); watching goes on. Default: ignored. */
  onWarning?: (message: string) => void;
}

export class ToolWatch {
  private readonly scopes = new Map<Scope, ScopeWatch>();
  private readonly listeners = new Set<{ listener: ToolsChangeListener; anima: string | undefined }>();

  constructor(private readonly options: ToolWatchOptions) {}

  /** Watches every Anima's tool folders until `close` (HostOptions.watch). Settles once watching. */
  watchAll(): Promise<void> {
    const scope = this.hold(null);
    scope.permanent = true;
    return scope.watcher.then(() => {});
  }

  /**
   * Tells `listener` of every change to the tools `anima` sees (all Animas' without one), watching their
   * folders if nothing does yet. Resolves once watching, to the function that unsubscribes (it settles
   * when a watcher it ends has stopped).
   */
  async subscribe(listener: ToolsChangeListener, anima?: string): Promise<() => Promise<void>> {
    const entry = { listener, anima };
    const scope: Scope = anima === undefined || this.scopes.has(null) ? null : anima;
    const watch = this.hold(scope);
    this.listeners.add(entry);
    let done = false;
    const unsubscribe = async (): Promise<void> => {
      if (done) return;
      done = true;
      this.listeners.delete(entry);
      await this.release(scope, watch);
    };
    try {
      await watch.watcher;
    } catch (error) {
      await unsubscribe();
      throw error;
    }
    return unsubscribe;
  }

  /** Settles once every watcher started so far is watching. */
  async ready(): Promise<void> {
    await Promise.all([...this.scopes.values()].map((scope) => scope.watcher));
  }

  /** Every path the running watchers hold (for tests: what the watch costs). */
  async tracked(): Promise<string[]> {
    const watchers = await Promise.all([...this.scopes.values()].map((scope) => scope.watcher.catch(() => undefined)));
    return watchers.flatMap((watcher) => watcher?.tracked() ?? []);
  }

  /** Stops every watcher, waiting for a reload in progress. */
  async close(): Promise<void> {
    const scopes = [...this.scopes.values()];
    this.scopes.clear();
    this.listeners.clear();
    await Promise.all(scopes.map(async (scope) => (await scope.watcher.catch(() => undefined))?.close()));
  }

  private hold(scope: Scope): ScopeWatch {
    let watch = this.scopes.get(scope);
    if (!watch) {
      watch = { watcher: this.start(scope), users: 0, permanent: false };
      this.scopes.set(scope, watch);
      // A subscribers' watcher that could not start is not kept: the next subscriber tries again. (The
      // host's own stays, so that `ready` reports the failure.)
      const started = watch;
      started.watcher.catch(() => !started.permanent && this.scopes.get(scope) === started && this.scopes.delete(scope));
    }
    watch.users++;
    return watch;
  }

  private async release(scope: Scope, watch: ScopeWatch): Promise<void> {
    watch.users--;
    if (watch.users > 0 || watch.permanent || this.scopes.get(scope) !== watch) return;
    this.scopes.delete(scope);
    await (await watch.watcher.catch(() => undefined))?.close();
  }

  private async start(scope: Scope): Promise<ToolFolderWatcher> {
    const { dataDir } = this.options;
    const { watchToolFolders } = await import("./watcher.js");
    const onChange = async (paths: string[]): Promise<void> => {
      await this.options.onBurst(paths, scope ?? undefined);
      for (const change of toolsChanges(dataDir, paths)) this.tell(change, scope);
    };
    const onProblem = (path: string, error: NodeJS.ErrnoException): void => this.options.onWarning?.(watchProblem(dataDir, path, error));
    if (scope !== null) return watchToolFolders([join(dataDir, "common_tools"), join(dataDir, "animas", scope, "tools")], onChange, { onProblem });
    return watchToolFolders([join(dataDir, "common_tools"), join(dataDir, "animas")], onChange, {
      depth: 2,
      skip: (path) => !watchesPath(dataDir, path),
      accept: (path) => ownerOfPath(dataDir, path) !== undefined,
      onProblem,
    });
  }

  private tell(change: ToolsChange, from: Scope): void {
    for (const { listener, anima } of [...this.listeners]) {
      if (from !== null && from !== anima) continue;
      if (anima !== undefined && change.anima !== undefined && change.anima !== anima) continue;
      try {
        listener(change);
      } catch {
        // a subscriber's failure is its own; the others are still told
      }
    }
  }
}

/**
 * The warning for a path the watcher cannot follow: which file, the system's code, and who acts. The
 * file is not served either way (the loader refuses links and unreadable files with a finding of its
 * own); this says why edits to it go unnoticed. The path is escaped: a file name is the Anima's text.
 */
export function watchProblem(dataDir: string, path: string, error: NodeJS.ErrnoException): string {
  const where = `"${printableName(relative(dataDir, path) || path)}"`;
  const code = error.code ?? "unknown error";
  const next =
    code === "ELOOP"
      ? "it is a symbolic link that leads back to itself; the Anima or operator should remove it"
      : code === "EACCES" || code === "EPERM"
        ? "the host may not read it; the operator should fix its permissions or remove it"
        : "the operator should check the file";
  return `the tool folder watcher cannot watch ${where} (${code}), so its edits are not noticed: ${next}; other tools are still watched and served`;
}

/**
 * The changes a burst of file events makes, one per folder it touched: an Anima's `tools/`, or
 * `common_tools/` (anima undefined). Files elsewhere, and hidden ones (the temporary files of atomic
 * writers, whose rename names the tool), are none.
 */
export function toolsChanges(dataDir: string, paths: Iterable<string>): ToolsChange[] {
  const byOwner = new Map<string | null, string[]>();
  for (const path of paths) {
    const located = toolFileOf(dataDir, path);
    if (located === undefined) continue;
    const list = byOwner.get(located.owner);
    if (list) list.push(path);
    else byOwner.set(located.owner, [path]);
  }
  return [...byOwner].map(([owner, list]) => ({ anima: owner ?? undefined, paths: list }));
}

/** Tool names a burst of file events touched: per Anima, `null` for common_tools/; "all" when a helper (`_x.ts`) changed. */
export function changedTools(dataDir: string, paths: Iterable<string>): Map<string | null, Set<string> | "all"> {
  const scope = new Map<string | null, Set<string> | "all">();
  for (const path of paths) {
    const located = toolFileOf(dataDir, path);
    if (located === undefined) continue;
    const names = scope.get(located.owner);
    if (names === "all") continue;
    // A helper may be imported by any tool of its folder.
    if (located.file.startsWith("_")) scope.set(located.owner, "all");
    else scope.set(located.owner, (names ?? new Set()).add(located.file.split(".")[0] as string));
  }
  return scope;
}

/** The folder a path directly in a tools folder belongs to (an Anima, `null` for common_tools/) and its file name; undefined for any other path and for hidden files. */
function toolFileOf(dataDir: string, path: string): { owner: string | null; file: string } | undefined {
  const owner = ownerOfPath(dataDir, path);
  const file = path.slice(path.lastIndexOf(sep) + 1);
  // Hidden files are the temporary files of atomic writers; the rename that follows names the tool.
  if (owner === undefined || file.startsWith(".")) return undefined;
  return { owner, file };
}

/**
 * Whether the every-Anima watcher looks at `path` (else chokidar never reads nor holds it): `animas/`, an
 * Anima's folder (to see its `tools/` come and go), its `tools/` and the entries directly in it, and
 * `common_tools/` with its entries: the folders discovery reads, one level each (discovery.ts).
 */
export function watchesPath(dataDir: string, path: string): boolean {
  const relativePath = relative(dataDir, path);
  if (relativePath === "") return true;
  const parts = relativePath.split(sep);
  if (parts[0] === "common_tools") return parts.length <= 2;
  if (parts[0] !== "animas" || parts.length > 4) return false;
  if (parts.length === 1) return true;
  return isAnimaName(parts[1] as string) && (parts.length === 2 || parts[2] === "tools");
}

/** Whose tools folder `path` is directly in: an Anima's, `null` for common_tools/; undefined for any other path. */
function ownerOfPath(dataDir: string, path: string): string | null | undefined {
  const parts = relative(dataDir, path).split(sep);
  if (parts.length === 2 && parts[0] === "common_tools") return null;
  if (parts.length === 4 && parts[0] === "animas" && parts[2] === "tools") return parts[1];
  return undefined;
}
