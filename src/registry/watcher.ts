import { join } from "node:path";
import { watch } from "chokidar";

/**
 * Watches tool folders (top level only) and calls `onChange` once a burst of writes has settled.
 *
 * chokidar coalesces quick repeated change events, so no single event is trusted to carry the final
 * content: every event (re)starts a debounce timer, and when it fires the whole folder is re-read by
 * the caller (a refresh). Writers are expected to replace files atomically (the host's own writers
 * do); `awaitWriteFinish` covers editors that write in place. `onChange` is told which paths the
 * burst touched (to say which tools were reloaded: audit/reloads.ts), not what happened to them.
 */
export interface WatchOptions {
  /** Quiet time after the last event before `onChange` runs, in ms. Default: 25. */
  debounceMs?: number;
  /** Folder levels watched below each given folder. Default: 0 (the top level only). */
  depth?: number;
  /** Only events for paths this accepts count. Default: all. */
  accept?: (path: string) => boolean;
  /**
   * Paths never looked at (nor below them): chokidar keeps in memory every path it tracks, and `accept`
   * only filters events of tracked ones. Default: none (but the hidden temp files of atomic writers).
   */
  skip?: (path: string) => boolean;
  /**
   * Told, once per path, why chokidar could not watch it (a symbolic link loop: ELOOP; a file the host
   * may not read: EACCES; a file gone before it was looked at: ENOENT; anything else). Default: ignored.
   */
  onProblem?: (path: string, error: NodeJS.ErrnoException) => void;
}

export interface ToolFolderWatcher {
  close(): Promise<void>;
  /** Every path the watcher holds (folders and their entries), as chokidar reports them. */
  tracked(): string[];
}

export async function watchToolFolders(
  folders: string[],
  onChange: (paths: string[]) => Promise<void> | void,
  options: WatchOptions = {},
): Promise<ToolFolderWatcher> {
  const debounceMs = options.debounceMs ?? 25;
  const skip = options.skip ?? (() => false);
  const watcher = watch(folders, {
    ignoreInitial: true,
    depth: options.depth ?? 0,
    awaitWriteFinish: { stabilityThreshold: 10, pollInterval: 5 },
    // Hidden temp files of atomic writers are noise; the rename that follows is the event that counts.
    ignored: (path: string) => /(^|\/)\.[^/]+\.tmp$/.test(path) || skip(path),
  });
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  // The paths of the burst being debounced (a set: bounded by the files in the folders, however many events).
  let touched = new Set<string>();
  const schedule = (path: string) => {
    touched.add(path);
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      const paths = [...touched];
      touched = new Set();
      // Reloads run one after another, so the last one always reflects the last write.
      running = running.then(() => onChange(paths)).catch(() => {});
    }, debounceMs);
  };
  // chokidar emits "error" for a path it cannot stat or watch (e.g. `ln -s loop.ts loop.ts`: ELOOP). An
  // EventEmitter's "error" with no listener throws: that ended the daemon and the MCP server, and with
  // them every Anima's calls, for one bad file in one Anima's folder. So every error is handled here and
  // watching goes on; the path itself is left to the loader, which refuses links (registry/discovery.ts).
  // Reported once per path (a set bounded by the files in the folders), since chokidar retries it.
  const reported = new Set<string>();
  watcher.on("error", (raw: unknown) => {
    const error = (raw instanceof Error ? raw : new Error(String(raw))) as NodeJS.ErrnoException;
    const path = error.path ?? "(unknown path)";
    if (reported.has(path)) return;
    reported.add(path);
    try {
      options.onProblem?.(path, error);
    } catch {
      // a failing reporter must not turn a handled error into an unhandled one
    }
  });
  const accept = options.accept ?? (() => true);
  watcher.on("all", (_event: string, path: string) => {
    if (accept(path)) schedule(path);
  });
  await new Promise<void>((resolve) => watcher.once("ready", () => resolve()));
  return {
    close: async () => {
      if (timer) clearTimeout(timer);
      await watcher.close();
      await running;
    },
    tracked: () => Object.entries(watcher.getWatched()).flatMap(([dir, names]) => [dir, ...names.map((name) => join(dir, name))]),
  };
}
