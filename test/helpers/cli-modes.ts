import { hostname } from "node:os";
import { main } from "../../src/cli/main.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { runThroughHost } from "../../src/cli/client.js";
import { readBuildInfo } from "../../src/endpoint/paths.js";
import { Endpoint } from "../../src/endpoint/server.js";
import { type ToolHost, createHost } from "../../src/host.js";

/**
 * The CLI in either of its modes, for suites that must behave the same in both: `in-process` (the CLI's
 * `main` in this process, as a call with no host running) and `daemon` (the thin client talking to an
 * endpoint of a long-running host with sandbox processes, over its Unix socket).
 */
export type CliMode = "in-process" | "daemon";
export const CLI_MODES: CliMode[] = ["in-process", "daemon"];

export interface CliRun {
  /** Who ran it: the long-running host, or the CLI in this process (also in daemon mode, when the host declined). */
  ranBy: "host" | "in-process";
  code: number;
  /** What the process would write to fd 1, without its last newline. */
  stdout: string;
  stderr: string;
}

export interface CliRunOptions {
  env?: Record<string, string>;
  cwd?: string;
  stdin?: string;
  /** Sees each piece of stdout as it is written (before the run ends). */
  onStdout?: (text: string) => void;
}

export interface CliRunner {
  run(argv: string[], options?: CliRunOptions): Promise<CliRun>;
  /** The long-running host (daemon mode only). */
  host: ToolHost | undefined;
  close(): Promise<void>;
}

async function inProcess(argv: string[], options: CliRunOptions): Promise<CliRun> {
  const out = { 1: [] as string[], 2: [] as string[] };
  const line = (fd: 1 | 2) => (text: string) => {
    if (fd === 1) options.onStdout?.(text);
    out[fd].push(text.endsWith("\n") ? text : `${text}\n`);
  };
  const code = await main(
    argv,
    { stdout: line(1), stderr: line(2) },
    {
      env: options.env ?? {},
      ...(options.cwd ? { cwd: options.cwd } : {}),
      readStdin: async () => options.stdin ?? "",
      stderrIsTerminal: false,
    },
  );
  return { ranBy: "in-process", code, stdout: trimmed(out[1]), stderr: trimmed(out[2]) };
}

export async function cliRunner(mode: CliMode, dataDir: string): Promise<CliRunner> {
  if (mode === "in-process") return { host: undefined, run: (argv, options = {}) => inProcess(argv, options), async close() {} };
  const host = createHost({ dataDir, isolation: "process", watch: true, onLog: () => {} });
  await host.ready();
  const endpoint = await Endpoint.open({ host, kind: "serve", runInvocation: main });
  if (!endpoint) throw new Error(`another host serves ${dataDir}`);
  const build = readBuildInfo(PROJECT_ROOT);
  return {
    host,
    async run(argv, options = {}) {
      const out = { 1: [] as string[], 2: [] as string[] };
      const outcome = await runThroughHost(
        argv,
        {
          write: (fd, text) => {
            if (fd === 1) options.onStdout?.(text);
            out[fd].push(text);
          },
          readStdin: async () => options.stdin ?? "",
          isTerminal: () => false,
        },
        { ...build, env: options.env ?? {}, cwd: options.cwd ?? process.cwd(), hostname: hostname() },
      );
      // As the launcher does: a call the host declines (before anything ran) runs in-process.
      if (!outcome.served) return inProcess(argv, options);
      return { ranBy: "host", code: outcome.code, stdout: trimmed(out[1]), stderr: trimmed(out[2]) };
    },
    async close() {
      await endpoint.close();
      await host.close();
    },
  };
}

function trimmed(parts: string[]): string {
  const text = parts.join("");
  return text.endsWith("\n") ? text.slice(0, -1) : text;
}
