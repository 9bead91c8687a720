import { hostname } from "node:os";
import { setTimeout as delay } from "node:timers/promises";
import { rmSync } from "node:fs";
import { idleTimeoutMs as idleTimeoutMsOf } from "../config.js";
import { PROJECT_ROOT } from "../project-root.js";
import { controlHost, launcherOf, startDaemon } from "./client.js";
import { endpointPaths, readBuildInfo } from "../endpoint/paths.js";
import type { InvocationRunner } from "../endpoint/invocation.js";
import type { EndpointStatus } from "../endpoint/protocol.js";
import { Endpoint } from "../endpoint/server.js";
import type { Environment } from "../environment.js";
import { ToolHostError } from "../errors.js";
import type { HostFactory, ToolHost } from "../host-api.js";
import { scanArgs } from "./options.js";
import type { Output } from "./output.js";
import { counted } from "../terminal-text.js";

export const DAEMON_USAGE = `Usage: animaworks-tool daemon start|stop|status|run [--idle-timeout S] [--json]
A daemon is a host that runs in the background for one data dir, so that each animaworks-tool call is
served by it instead of starting a host of its own. A call starts one when none runs (unless
ANIMAWORKS_NO_DAEMON=1 or --no-daemon); it exits after S seconds without a call.
  start               start one unless a host already serves CLI calls here; waits until it answers
  stop                ask the daemon to stop (calls in flight finish first)
  status              which host serves CLI calls for this data dir, if any
  run                 run the daemon in this process (what start runs in the background)
  --idle-timeout S    seconds without a call before it exits (default: $ANIMAWORKS_DAEMON_IDLE_SECONDS,
                      else daemon_idle_seconds in config.json, else 900)`;

export interface DaemonCliContext {
  /** The invocation's host: its config gives the data dir and the options a daemon is started with. */
  host: ToolHost;
  json: boolean;
  out: Output;
  env: Environment;
  /** Makes `daemon run`'s own host (the composition root's `hostFromConfig`, handed down by the CLI's entry). */
  hostFactory: HostFactory;
  /** Runs the daemon's clients' invocations (the CLI's `main`, handed down by it). */
  runInvocation: InvocationRunner;
}

const START_WAIT_MS = 30_000;
const STOP_WAIT_MS = 10_000;
const POLL_MS = 50;

export async function runDaemonCommand(argv: string[], ctx: DaemonCliContext): Promise<number> {
  const [sub, ...rest] = argv;
  let idleTimeoutMs = ctx.host.config.daemon.idleTimeoutMs;
  for (const token of scanArgs(rest, { "--idle-timeout": "value" })) {
    if (token.kind !== "option" || token.value === undefined) {
      throw new ToolHostError("InvalidArguments", `unexpected argument "${rest[token.index]}"`, DAEMON_USAGE.split("\n")[0]);
    }
    idleTimeoutMs = idleTimeoutMsOf(token.value, "--idle-timeout");
  }
  const paths = endpointPaths(ctx.host.config.dataDir, hostname());
  const build = readBuildInfo(PROJECT_ROOT);
  switch (sub) {
    case "run":
      return run(ctx, idleTimeoutMs);
    case "status": {
      const reply = await controlHost(paths, "status", build);
      const status = reply?.type === "status" ? reply.status : undefined;
      if (ctx.json) ctx.out.stdout(JSON.stringify({ status: "ok", running: status !== undefined, ...(status ? { host: status } : {}) }));
      else
        ctx.out.stdout(
          status
            ? statusText(status)
            : `no host serves CLI calls for ${ctx.host.config.dataDir}; calls run in-process (and start a daemon unless ANIMAWORKS_NO_DAEMON=1)`,
        );
      return 0;
    }
    case "start": {
      const running = await controlHost(paths, "status", build);
      if (running?.type === "status") return report(ctx, "already running", running.status);
      const { config } = ctx.host;
      const args = [
        ...(config.osSandbox !== "auto" ? ["--os-sandbox", config.osSandbox] : []),
        ...(config.jobsUrl ? ["--jobs-url", config.jobsUrl] : []),
        "--idle-timeout",
        String(idleTimeoutMs / 1000),
      ];
      await startDaemon({ dataDir: config.dataDir, paths, args }, { ...build, env: ctx.env, cwd: "/", hostname: hostname() }, launcherOf(PROJECT_ROOT));
      const deadline = Date.now() + START_WAIT_MS;
      while (Date.now() < deadline) {
        const reply = await controlHost(paths, "status", build);
        if (reply?.type === "status") return report(ctx, "started", reply.status);
        await delay(POLL_MS);
      }
      throw new ToolHostError("ExecutionError", `the daemon did not answer within ${START_WAIT_MS / 1000} s`, `see its log: ${paths.log}`);
    }
    case "stop": {
      const reply = await controlHost(paths, "stop", build);
      if (reply === undefined) {
        ctx.out.stdout(ctx.json ? JSON.stringify({ status: "ok", stopped: false }) : `no daemon runs for ${ctx.host.config.dataDir}`);
        return 0;
      }
      if (reply.type === "error") throw new ToolHostError("InvalidArguments", reply.message);
      if (reply.type !== "stopping") throw new ToolHostError("ExecutionError", `the host answered the stop request with ${reply.type}`);
      const deadline = Date.now() + STOP_WAIT_MS;
      let gone = false;
      while (!gone && Date.now() < deadline) {
        gone = (await controlHost(paths, "status", build)) === undefined;
        if (!gone) await delay(POLL_MS);
      }
      if (ctx.json) ctx.out.stdout(JSON.stringify({ status: "ok", stopped: true, finished: gone }));
      else ctx.out.stdout(gone ? "daemon stopped" : "daemon stopping: it no longer takes calls and exits when the calls in flight have finished");
      return 0;
    }
    default:
      throw new ToolHostError(
        "InvalidArguments",
        sub === undefined ? "daemon needs a command" : `unknown daemon command "${sub}"`,
        "commands: start, stop, status, run",
      );
  }
}

function report(ctx: DaemonCliContext, what: string, status: EndpointStatus): number {
  ctx.out.stdout(
    ctx.json ? JSON.stringify({ status: "ok", [what === "started" ? "started" : "running"]: true, host: status }) : `${what}: ${statusText(status)}`,
  );
  return 0;
}

function statusText(status: EndpointStatus): string {
  const idle = status.idleTimeoutMs !== undefined ? `; exits after ${status.idleTimeoutMs / 1000} s without a call` : "";
  return `${status.kind} pid ${status.pid} serves CLI calls for ${status.dataDir} since ${status.startedAt} (build ${status.build}): ${counted(status.calls, "call")}, ${status.active} running${idle}`;
}

/** `daemon run`: the daemon itself, in this process, until it is idle, stopped, outdated or signalled. */
async function run(ctx: DaemonCliContext, idleTimeoutMs: number): Promise<number> {
  const { config } = ctx.host;
  const paths = endpointPaths(config.dataDir, hostname());
  const log = (message: string): void => ctx.out.stderr(`${new Date().toISOString()} animaworks-tool daemon: ${message}`);
  // The invocation's own configuration (flags, environment, config.json), with processes and a watcher.
  const host = ctx.hostFactory({ ...config, isolation: "process", watch: true });
  let stop: (reason: string) => void = () => {};
  const stopped = new Promise<string>((resolve) => (stop = resolve));
  const onSignal = (): void => stop("signal");
  let endpoint: Endpoint | undefined;
  try {
    endpoint = await Endpoint.open({ host, kind: "daemon", runInvocation: ctx.runInvocation, idleTimeoutMs, onStopRequest: (reason) => stop(reason), log });
    if (!endpoint) {
      log(`another host serves CLI calls for ${config.dataDir} already; exiting`);
      return 0;
    }
    rmSync(paths.starting, { force: true });
    log(`pid ${process.pid} serves CLI calls for ${config.dataDir}; exits after ${idleTimeoutMs / 1000} s without a call`);
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    const open = endpoint;
    const timer = setInterval(
      () => {
        if (open.idleForMs() >= idleTimeoutMs) stop("idle");
        else if (!open.stillOurs()) stop("its socket was removed or replaced");
      },
      Math.min(5_000, Math.max(50, idleTimeoutMs / 4)),
    );
    const reason = await stopped;
    clearInterval(timer);
    log(`stopping (${reason})`);
    await endpoint.stopAccepting();
    await endpoint.close();
    return 0;
  } finally {
    rmSync(paths.starting, { force: true });
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await host.close();
  }
}
