import { hostname } from "node:os";
import { main } from "../../src/cli/main.js";
import { runThroughHost } from "../../src/cli/client.js";
import { readBuildInfo } from "../../src/endpoint/paths.js";
import { Endpoint, type EndpointOptions } from "../../src/endpoint/server.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * What the endpoint's bound tests share (connection-budget, reply-bounds, output-backpressure,
 * stdin-hold): alice's `echo` tool (`echo_say` answers "said <word>", `echo_spin` never returns) in a
 * host with process isolation, behind an endpoint opened with the options a test is about, and an
 * honest client's call through it.
 */
export const ECHO_TOOL = `
export function get_tool_schemas() {
  return [{ name: "echo_say", description: "says", input_schema: { type: "object", properties: { word: { type: "string" } }, required: ["word"] } },
          { name: "echo_spin", description: "never returns" }];
}
export function dispatch(name, args) {
  if (name === "echo_spin") { for (;;) {} }
  return "said " + args.word;
}
`;

/** The build a client of this checkout announces. */
export const BUILD = readBuildInfo(PROJECT_ROOT);

export interface EchoEndpoint {
  data: TempDataDir;
  host: ToolHost;
  endpoint: Endpoint;
  /** What the endpoint logged. */
  log: string[];
  close(): Promise<void>;
}

/** The host and its endpoint: kind `serve` and the CLI's `main` unless `options` say otherwise. */
export async function openEchoEndpoint(options: Partial<Omit<EndpointOptions, "host" | "log">> = {}): Promise<EchoEndpoint> {
  const data = makeDataDir({ "animas/alice/tools/echo.mjs": ECHO_TOOL });
  const host = createHost({ dataDir: data.dir, isolation: "process", watch: false, timeoutMs: 20_000, onLog: () => {} });
  const log: string[] = [];
  const endpoint = await Endpoint.open({ kind: "serve", runInvocation: main, ...options, host, log: (line) => void log.push(line) });
  if (!endpoint) throw new Error("no endpoint");
  return {
    data,
    host,
    endpoint,
    log,
    async close() {
      await endpoint.close({ graceMs: 1_000 });
      await host.close();
      data.cleanup();
    },
  };
}

/** alice's `echo say <word>` as the CLI's client makes it through the endpoint: its outcome and stdout. */
export async function honestCall(fixture: EchoEndpoint, word: string) {
  const out: string[] = [];
  const outcome = await runThroughHost(
    ["--data-dir", fixture.data.dir, "--anima", "alice", "echo", "say", word],
    { write: (fd, text) => void (fd === 1 && out.push(text)), readStdin: async () => "", isTerminal: () => false },
    { ...BUILD, env: {}, cwd: "/", hostname: hostname() },
  );
  return { outcome, stdout: out.join("") };
}
