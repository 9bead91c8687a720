import { main } from "../../src/cli/main.js";
import { writeFileSync } from "node:fs";
import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Endpoint } from "../../src/endpoint/server.js";
import { createHost } from "../../src/host.js";
import { CLI_MODES, cliRunner } from "../helpers/cli-modes.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";

// What a new user met: an internal API on 127.0.0.1 and a credential in the environment could not be
// allowed through the CLI. Now the operator allows them in config.json (or a variable), in both CLI modes.
const PROBE = `
import { fetch, getCredential } from "@animaworks/tool";
export function get_tool_schemas() {
  return [
    { name: "probe_internal", description: "GET a URL", input_schema: { type: "object", properties: { url: { type: "string" } }, required: ["url"] } },
    { name: "probe_key", description: "read WEATHER_API_KEY" },
  ];
}
export async function dispatch(name, args) {
  if (name === "probe_internal") return "status " + (await fetch(args.url)).status;
  const key = await getCredential("weather", "probe", { envVar: "WEATHER_API_KEY" });
  return "key of " + key.length + " chars";
}
`;

let server: Server;
let base: string;
beforeAll(async () => {
  server = createServer((_req, res) => res.end("ok"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe.each(CLI_MODES)("operator configuration through the CLI (%s)", (mode) => {
  let data: TempDataDir;
  const close: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const done of close.splice(0)) await done();
    data.cleanup();
  });

  async function runnerWith(section: unknown) {
    data = makeDataDir({
      "animas/alice/tools/probe.ts": PROBE,
      ...(section === undefined ? {} : { "config.json": JSON.stringify({ animaworks_tool: section }) }),
    });
    const runner = await cliRunner(mode, data.dir);
    close.push(() => runner.close());
    return runner;
  }
  const cli = (...argv: string[]) => ["--data-dir", data.dir, "--anima", "alice", ...argv];

  it("refuses a loopback API with a hint naming the setting, and reaches it once allowed", async () => {
    let runner = await runnerWith(undefined);
    const denied = await runner.run(cli("probe", "internal", "--url", `${base}/x`, "-j"));
    expect(denied.code).toBe(4);
    const envelope = JSON.parse(denied.stdout);
    expect(envelope.error_type).toBe("SandboxViolation");
    expect(envelope.hint).toContain('"allow_internal_hosts" in the "animaworks_tool" section');
    await close.shift()!();
    data.cleanup();

    runner = await runnerWith({ allow_internal_hosts: ["127.0.0.1"] });
    const allowed = await runner.run(cli("probe", "internal", "--url", `${base}/x`));
    expect(allowed).toMatchObject({ code: 0, stdout: "status 200", ranBy: mode === "daemon" ? "host" : "in-process" });
  });

  it("says a credential's variable is set but not allowed, and reads it once allowed", async () => {
    let runner = await runnerWith(undefined);
    const refused = await runner.run(cli("probe", "key", "-j"), { env: { WEATHER_API_KEY: "abc123" } });
    expect(refused.code).toBe(1);
    const envelope = JSON.parse(refused.stdout);
    expect(envelope.error_type).toBe("ToolConfigError");
    expect(envelope.hint).toContain('add it to "allowed_environment"');
    expect(refused.stdout + refused.stderr).not.toContain("abc123");
    await close.shift()!();
    data.cleanup();

    runner = await runnerWith({ allowed_environment: ["WEATHER_API_KEY"] });
    const allowed = await runner.run(cli("probe", "key"), { env: { WEATHER_API_KEY: "abc123" } });
    // The running host does not have the caller's value: it declines, and the call runs as the caller's own.
    expect(allowed).toMatchObject({ code: 0, stdout: "key of 6 chars", ranBy: "in-process" });
    const byVariable = await runner.run(cli("probe", "key"), { env: { WEATHER_API_KEY: "abcd", ANIMAWORKS_ALLOWED_ENVIRONMENT: "WEATHER_API_KEY" } });
    expect(byVariable).toMatchObject({ code: 0, stdout: "key of 4 chars" });
  });

  it("stops at start on a wrong section, naming the file and key: the operator's error (ToolConfigError, exit 1)", async () => {
    const runner = await runnerWith(undefined);
    writeFileSync(join(data.dir, "config.json"), JSON.stringify({ animaworks_tool: { timeout_ms: "soon" } }));
    const run = await runner.run(cli("list"));
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^Error \(ToolConfigError\): .*animaworks_tool\.timeout_ms must be number — fix "timeout_ms" in the "animaworks_tool" section of .*config\.json/m,
    );
    const json = await runner.run(cli("list", "-j"));
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ status: "error", error_type: "ToolConfigError", fault: "host" });
  });

  it("audit shows each setting in force and where it came from, secrets masked", async () => {
    const runner = await runnerWith({ jobs_url: "postgres://worker:hunter2@127.0.0.1:1/none", timeout_ms: 7_000 });
    const text = await runner.run(cli("audit"), { env: { ANIMAWORKS_ALLOW_INTERNAL_HOSTS: "10.1.2.3" } });
    expect(text.code).toBe(0);
    expect(text.stdout).toContain("  timeout_ms: 7000 [file]");
    expect(text.stdout).toContain("  allow_internal_hosts: 10.1.2.3 [environment]");
    expect(text.stdout).toContain("  jobs_url: postgres://worker:***@127.0.0.1:1/none [file]");
    expect(text.stdout).toContain("  memory_limit_mb: 128\n");
    const json = JSON.parse((await runner.run(cli("audit", "-j"))).stdout);
    expect(json.settings).toContainEqual({ key: "timeout_ms", value: 7_000, source: "file" });
    expect(JSON.stringify(json)).not.toContain("hunter2");
  });
});

describe("a running host and a changed config.json", () => {
  it("a daemon started before the change declines the next call and makes way for a new one", async () => {
    const data = makeDataDir({ "config.json": JSON.stringify({ animaworks_tool: { timeout_ms: 9_000 } }) });
    data.anima("alice");
    const host = createHost({ dataDir: data.dir, isolation: "process", onLog: () => {} });
    const stops: string[] = [];
    const endpoint = await Endpoint.open({ host, kind: "daemon", runInvocation: main, onStopRequest: (reason) => stops.push(reason) });
    try {
      const runner = await cliRunner("in-process", data.dir);
      const { runThroughHost } = await import("../../src/cli/client.js");
      const { readBuildInfo } = await import("../../src/endpoint/paths.js");
      const { PROJECT_ROOT } = await import("../../src/project-root.js");
      const { hostname } = await import("node:os");
      const setup = { ...readBuildInfo(PROJECT_ROOT), env: {}, cwd: data.dir, hostname: hostname() };
      const io = { write: () => {}, readStdin: async () => "", isTerminal: () => false };
      expect(await runThroughHost(["--data-dir", data.dir, "list"], io, setup)).toEqual({ served: true, code: 0 });
      writeFileSync(join(data.dir, "config.json"), JSON.stringify({ animaworks_tool: { timeout_ms: 10_000 } }));
      const outcome = await runThroughHost(["--data-dir", data.dir, "list"], io, setup);
      expect(outcome).toMatchObject({ served: false, reason: expect.stringContaining("started with other settings") });
      await waitFor(() => stops.length > 0);
      expect(stops).toEqual(["settings changed"]);
      expect((await runner.run(["--data-dir", data.dir, "list"])).code).toBe(0);
    } finally {
      await endpoint?.close();
      await host.close();
      data.cleanup();
    }
  });
});
