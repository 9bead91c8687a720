import { type StdioOptions, spawn } from "node:child_process";
import { closeSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hostname } from "node:os";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { runThroughHost } from "../../src/cli/client.js";
import { readBuildInfo } from "../../src/endpoint/paths.js";
import { Endpoint } from "../../src/endpoint/server.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";

// What the launcher tells the host about its terminals on a served call: exactly whether stdout and
// stderr are terminals (a job's wait draws its bar only on one), found without loading node:tty when
// they are not character devices (pipes, files: how an Anima's runtime runs the CLI).

const BIN = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");
const ENV: NodeJS.ProcessEnv = { ...process.env };
delete ENV["ANIMAWORKS_NO_DAEMON"];

/** Runs a command to its end without blocking this process's event loop (the endpoint serving it runs here). */
function run(command: string, args: string[], stdio: StdioOptions = "pipe"): Promise<{ status: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio, env: ENV });
    let stdout = "";
    child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, stdout }));
  });
}

describe("the launcher's terminal flags on a served call", () => {
  let data: TempDataDir;
  let host: ToolHost;
  let endpoint: Endpoint;
  const seen: (boolean | undefined)[] = [];
  beforeAll(async () => {
    data = makeDataDir();
    host = createHost({ dataDir: data.dir, watch: false, onLog: () => {} });
    // An endpoint that only records what each call says of its stderr.
    const opened = await Endpoint.open({
      host,
      kind: "serve",
      runInvocation: async (_argv, out, ctx) => {
        seen.push(ctx.stderrIsTerminal);
        out.stdout("served\n");
        return 0;
      },
    });
    if (!opened) throw new Error("no endpoint");
    endpoint = opened;
  });
  afterAll(async () => {
    await endpoint.close({ graceMs: 1_000 });
    await host.close();
    data.cleanup();
  });

  const call = ["--data-dir", "", "--anima", "alice", "echo", "say"];
  const argsFor = (): string[] => call.map((arg) => (arg === "" ? data.dir : arg));

  it("says no terminal for pipes, without loading node:tty", async () => {
    const listFile = join(data.dir, "modules.txt");
    const preload = join(data.dir, "list-modules.cjs");
    writeFileSync(preload, `process.on("exit", () => require("node:fs").writeFileSync(${JSON.stringify(listFile)}, process.moduleLoadList.join("\\n")));\n`);
    const served = await run(process.execPath, ["--require", preload, BIN, ...argsFor()]);
    expect(served.stdout).toBe("served\n");
    expect(served.status).toBe(0);
    expect(seen.at(-1)).toBe(false);
    expect(readFileSync(listFile, "utf8").split("\n")).not.toContain("NativeModule tty");
  });

  it("says no terminal for /dev/null, a character device that is not one", async () => {
    const devNull = openSync("/dev/null", "w");
    try {
      expect((await run(process.execPath, [BIN, ...argsFor()], ["ignore", "pipe", devNull])).stdout).toBe("served\n");
    } finally {
      closeSync(devNull);
    }
    expect(seen.at(-1)).toBe(false);
  });

  it("says terminal when stderr is one (a pseudo-terminal made by script(1))", async () => {
    const command = [process.execPath, BIN, ...argsFor()].map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(" ");
    expect((await run("script", ["-qec", command, "/dev/null"], ["ignore", "pipe", "pipe"])).stdout).toContain("served");
    expect(seen.at(-1)).toBe(true);
  });

  it("closes the connection after the answer when the caller lives on (the launcher exits first)", async () => {
    const out: string[] = [];
    const outcome = await runThroughHost(
      argsFor(),
      { write: (_fd, text) => void out.push(text), readStdin: async () => "", isTerminal: () => false },
      { ...readBuildInfo(PROJECT_ROOT), env: {}, cwd: "/", hostname: hostname() },
    );
    expect(outcome).toEqual({ served: true, code: 0 });
    expect(out.join("")).toBe("served\n");
    await waitFor(() => endpoint.openConnections === 0, 10_000);
  });
});
