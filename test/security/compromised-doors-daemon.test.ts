import { hostname } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { controlHost, runThroughHost } from "../../src/cli/client.js";
import { runDaemonCommand } from "../../src/cli/daemon.js";
import { main } from "../../src/cli/main.js";
import { endpointPaths, readBuildInfo } from "../../src/endpoint/paths.js";
import { EXIT_CODES, type ErrorType } from "../../src/errors.js";
import type { LogRecord } from "../../src/host-options.js";
import { type ToolHost, createHost, hostFromConfig } from "../../src/host.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, waitFor, within } from "../helpers/data-dir.js";
import { ATTACKS, type Door, type DoorAnswer, attackThroughDoor, doorsDataDir, doorsHostOptions } from "./compromised-doors.js";

/**
 * A compromised sandbox process behind the daemon that serves shell calls: the daemon is started in this
 * process by the function `animaworks-tool daemon run` runs (runDaemonCommand, with the CLI's `main` for
 * its clients), its host made with the compromised stand-in entry (HostOptions.sandboxEntryScript, the
 * test seam); calls go through the thin client over the daemon's socket, as `animaworks-tool … -j` sends
 * them. eve's process attacks; alice's calls, served by her own process through the same daemon, go on.
 */

const BUILD = readBuildInfo(PROJECT_ROOT);

interface RunningDaemon extends Door {
  data: TempDataDir;
  stop(): Promise<void>;
}

async function startDaemon(): Promise<RunningDaemon> {
  const data = doorsDataDir();
  const logs: LogRecord[] = [];
  const daemonLog: string[] = [];
  // What the CLI makes for `daemon run` (an in-process host of the invocation's settings), with the seam.
  const invocationHost = createHost({ ...doorsHostOptions(data, logs), isolation: "in-process" });
  let served: ToolHost | undefined;
  const running = runDaemonCommand(["run", "--idle-timeout", "600"], {
    host: invocationHost,
    json: false,
    out: { stdout: () => {}, stderr: (text) => void daemonLog.push(text) },
    env: {},
    // hostFromConfig, as the CLI hands it; kept to read the daemon's own host (its audit log, its sandbox processes).
    hostFactory: (config) => (served = hostFromConfig(config)),
    runInvocation: main,
  });
  const paths = endpointPaths(data.dir, hostname());
  const stop = async (): Promise<void> => {
    data.write("animas/alice/release.txt", "released at the end"); // a held call of alice's ends
    await controlHost(paths, "stop", BUILD);
    await within(60_000, "the daemon's stop", running);
    await invocationHost.close();
    data.cleanup();
  };
  try {
    await within(
      60_000,
      "the daemon's start",
      Promise.race([
        waitFor(async () => (await controlHost(paths, "status", BUILD))?.type === "status", 60_000, 50),
        running.then((code) => Promise.reject(new Error(`the daemon ended with ${code}: ${daemonLog.join("\n")}`))),
      ]),
    );
  } catch (error) {
    await stop().catch(() => {});
    throw error;
  }
  const host = served as ToolHost;
  return {
    data,
    host,
    stop,
    async call(anima, schema, args = {}) {
      const [tool, action] = schema.split(/_(.*)/s) as [string, string];
      const flags = Object.entries(args).flatMap(([name, value]) => [`--${name}`, String(value)]);
      const out = { 1: "", 2: "" };
      const outcome = await runThroughHost(
        ["--data-dir", data.dir, "--anima", anima, tool, action, ...flags, "-j"],
        { write: (fd, text) => void (out[fd] += text), readStdin: async () => "", isTerminal: () => false },
        { ...BUILD, env: {}, cwd: data.dir, hostname: hostname() },
      );
      // Served by the daemon, never by a CLI in this process.
      expect(outcome).toMatchObject({ served: true });
      const code = outcome.served ? outcome.code : -1;
      const envelope = JSON.parse(out[1]) as { status: string; output?: unknown; error_type?: ErrorType };
      const answer: DoorAnswer = { transcript: `${out[1]}${out[2]}`, ...(envelope.status === "ok" ? { output: envelope.output } : { error: envelope }) };
      // The exit code goes with the envelope (SandboxCrashed: 1).
      expect(code).toBe(envelope.error_type ? EXIT_CODES[envelope.error_type] : 0);
      return answer;
    },
  };
}

describe("a compromised sandbox process behind the CLI's daemon", () => {
  let daemon: RunningDaemon | undefined;
  afterEach(async () => {
    await daemon?.stop();
    daemon = undefined;
  }, 90_000);

  it.each(ATTACKS.map((attack) => [attack.name, attack] as const))(
    "%s: eve's `-j` call fails as SandboxCrashed, alice's calls through the same daemon are answered, the audit log names eve's cordon",
    async (_name, attack) => {
      daemon = await startDaemon();
      await attackThroughDoor(daemon, daemon.data, attack);
    },
    240_000,
  );
});
