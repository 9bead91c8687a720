import { watch } from "chokidar";

/**
 * Watches tool folders (top level only) and calls `onChange` once a burst of writes has settled.
 *
 * chokidar coalesces quick repeated change events, so no single event is trusted to carry the final
 * content: every event (re)starts a debounce timer, and when it fires the whole folder is re-read by
 * the caller (a refresh). Writers are expected to replace files atomically (the host's own writers
 * do); `awaitWriteFinish` covers editors that write in place.
 */
export interface WatchOptions {
  /** Quiet time after the last event before `onChange` runs, in ms. Default: 40. */
  debounceMs?: number;
}

export interface ToolFolderWatcher {
  close(): Promise<void>;
}

export async function watchToolFolders(folders: string[], onChange: () => Promise<void> | void, options: WatchOptions = {}): Promise<ToolFolderWatcher> {
  const debounceMs = options.debounceMs ?? 40;
  const watcher = watch(folders, {
    ignoreInitial: true,
    depth: 0,
    awaitWriteFinish: { stabilityThreshold: 20, pollInterval: 10 },
    // Hidden temp files of atomic writers are noise; the rename that follows is the event that counts.
    ignored: (path: string) => /(^|\/)\.[^/]+\.tmp$/.test(path),
  });
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const schedule = () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      // Reloads run one after another, so the last one always reflects the last write.
      running = running.then(() => onChange()).catch(() => {});
    }, debounceMs);
  };
  watcher.on("all", schedule);
  await new Promise<void>((resolve) => watcher.once("ready", () => resolve()));
  return {
    close: async () => {
      if (timer) clearTimeout(timer);
      await watcher.close();
      await running;
    },
  };
}
