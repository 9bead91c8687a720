import { cpSync, mkdirSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { LogRecord } from "../../src/host-options.js";
import { type CallResult, type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir } from "./data-dir.js";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const FIXTURE_TOOLS = join(REPO_ROOT, "test", "fixtures", "tools");

export interface TestHost {
  data: TempDataDir;
  host: ToolHost;
  /** An empty core tools folder of this test's own (tests must not depend on the shipped core tools). */
  coreDir: string;
  logs: LogRecord[];
  /** Writes a personal tool file of Anima `alice` (created by `useTestHost`). */
  personal(file: string, source: string): string;
  shared(file: string, source: string): string;
  core(file: string, source: string): string;
  close(): Promise<void>;
}

export interface TestHostOptions {
  /** Use the project's `tools/` instead of an empty temporary core folder. */
  realCoreTools?: boolean;
  timeoutMs?: number;
  loadTimeoutMs?: number;
  maxOutputBytes?: number;
}

/**
 * A host over a throwaway data dir with Anima `alice`, isolates in this process (fast; the isolation
 * mode is not what these tests are about) and the log captured.
 */
export function useTestHost(options: TestHostOptions = {}): TestHost {
  const data = makeDataDir();
  data.anima("alice");
  const coreDir = join(data.dir, "core-tools");
  mkdirSync(coreDir, { recursive: true });
  const logs: LogRecord[] = [];
  const host = createHost({
    dataDir: data.dir,
    coreToolsDir: options.realCoreTools ? join(REPO_ROOT, "tools") : coreDir,
    isolation: "in-process",
    onLog: (record) => logs.push(record),
    logLevel: "debug", // tests see every line; the default ("info") is tested on its own
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    ...(options.loadTimeoutMs !== undefined ? { loadTimeoutMs: options.loadTimeoutMs } : {}),
    ...(options.maxOutputBytes !== undefined ? { maxOutputBytes: options.maxOutputBytes } : {}),
  });
  return {
    data,
    host,
    coreDir,
    logs,
    personal: (file, source) => data.write(`animas/alice/tools/${file}`, source),
    shared: (file, source) => data.write(`common_tools/${file}`, source),
    core: (file, source) => data.write(`core-tools/${file}`, source),
    async close() {
      await host.close();
      data.cleanup();
    },
  };
}

/** Copies every file of `test/fixtures/tools/<set>/` into `destination` (a tools folder). */
export function installFixtures(set: string, destination: string, only?: string[]): void {
  const from = join(FIXTURE_TOOLS, set);
  mkdirSync(destination, { recursive: true });
  for (const entry of readdirSync(from)) {
    if (only && !only.some((name) => entry === name || entry.startsWith(`${name}.`))) continue;
    cpSync(join(from, entry), join(destination, entry), { recursive: true });
  }
}

/** The output of a successful call; fails the test with the error otherwise. */
export function okOutput(result: CallResult): string {
  if (result.status !== "ok") throw new Error(`expected ok, got ${result.error_type}: ${result.message}`);
  return result.output;
}

/** A minimal valid tool: one action per name, each returning `{ action, args }`. */
export function simpleTool(tool: string, actions: string[] = ["run"]): string {
  const schemas = actions.map((action) => ({ name: `${tool}_${action}`, description: `${action} things` }));
  return `export function get_tool_schemas() { return ${JSON.stringify(schemas)}; }
export function dispatch(name, args) { return { tool: ${JSON.stringify(tool)}, name, args }; }
`;
}
