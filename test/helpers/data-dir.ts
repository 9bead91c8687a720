import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/** A throwaway data dir. Files are given relative to it: `{ "animas/alice/tools/x.ts": "…" }`. */
export interface TempDataDir {
  dir: string;
  write(relativePath: string, content: string): string;
  anima(name: string): string;
  cleanup(): void;
}

export function makeDataDir(files: Record<string, string> = {}): TempDataDir {
  const dir = mkdtempSync(join(tmpdir(), "awt-test-"));
  const api: TempDataDir = {
    dir,
    write(relativePath, content) {
      const path = join(dir, relativePath);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, content);
      return path;
    },
    anima(name) {
      const path = join(dir, "animas", name);
      mkdirSync(join(path, "tools"), { recursive: true });
      return path;
    },
    cleanup() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
  for (const [path, content] of Object.entries(files)) api.write(path, content);
  return api;
}

/** Waits until `check` returns true, polling every `intervalMs`, failing after `timeoutMs`. */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 5_000, intervalMs = 10): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * Writes `file` of `data` again (every 500 ms) until `check` holds, failing after 10 s: a folder watcher
 * (chokidar) may miss a write made right after it said it is ready.
 */
export async function writeUntil(data: TempDataDir, file: string, content: string, check: () => boolean | Promise<boolean>): Promise<void> {
  let writtenAt = 0;
  await waitFor(async () => {
    if (await check()) return true;
    if (Date.now() - writtenAt > 500) {
      data.write(file, content);
      writtenAt = Date.now();
    }
    return false;
  }, 10_000);
}

/** Settles as `work` does within `ms`, or fails naming `what`: a door or a read that hangs must fail the test, not wedge the suite. */
export function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms))),
  ]).finally(() => clearTimeout(timer));
}
