import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import type { WorkerArgs } from "./fixtures/worker.js";

const here = fileURLToPath(new URL(".", import.meta.url));

/**
 * Bundles the worker fixture with the job sources (TypeScript) into one ESM file in `outDir`, so the tests
 * need no prior `npm run build`. better-sqlite3 stays external (native addon), imported by absolute path
 * because the bundle lives outside the project's node_modules tree.
 */
export async function buildWorker(outDir: string): Promise<string> {
  const outfile = join(outDir, "worker.mjs");
  const sqlite = createRequire(import.meta.url).resolve("better-sqlite3");
  await build({
    entryPoints: [join(here, "fixtures", "worker.ts")],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    logLevel: "silent",
    plugins: [
      {
        name: "absolute-better-sqlite3",
        setup(b) {
          b.onResolve({ filter: /^better-sqlite3$/ }, () => ({ path: sqlite, external: true }));
        },
      },
    ],
  });
  return outfile;
}

export function spawnWorker(script: string, args: WorkerArgs): ChildProcess {
  return spawn(process.execPath, [script, JSON.stringify(args)], { stdio: ["ignore", "pipe", "pipe"] });
}

/** Resolves with the child's exit code and output; kills it and rejects after `timeoutMs`. */
export function exited(child: ChildProcess, timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`worker did not exit within ${timeoutMs} ms; stderr: ${stderr}`));
    }, timeoutMs);
    // 'close' comes after both the exit and the end of the output streams.
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
