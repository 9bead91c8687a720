import { closeSync, existsSync, openSync, rmSync, statSync, writeSync } from "node:fs";
import type { Socket } from "node:net";
import { join } from "node:path";
import { type GlobalOptions, LOCAL_COMMANDS, emptyOptions, resolveIdentity, takeGlobalOptions } from "./invocation.js";
import { MAX_ARGUMENTS_BYTES } from "../endpoint/invocation.js";
import { printError } from "./output.js";
import { claimDaemonNotice, daemonIdleSeconds, daemonNotice } from "./daemon-notice.js";
import { readRegularFileSync } from "../regular-file.js";
import { type Environment, noDaemonIn } from "../environment.js";
import { type EndpointPaths, endpointPaths, isPrivateDir, makePrivateDir, socketAddress } from "../endpoint/paths.js";
import {
  type BuildInfo,
  type ClientMessage,
  FrameDecoder,
  type HostMessage,
  PROTOCOL_VERSION,
  ProtocolError,
  chunks,
  decodeHostMessage,
  encodeFrame,
} from "../endpoint/protocol.js";

/**
 * The thin CLI client: runs an `animaworks-tool` invocation on the long-running host of its data dir,
 * through the host's socket, and reports whether it did. It loads no host code (no isolated-vm, esbuild,
 * ajv): bin/animaworks-tool.cjs runs it on Node's start-up snapshot and falls back to the in-process CLI
 * when no host serves the call. Identity is the CLI's: the host resolves `--anima` and
 * `$ANIMAWORKS_ANIMA_DIR` from what is sent, with the CLI's own code.
 */

export interface ClientIo {
  /** Writes text as is to fd 1 or 2 (the host sends whole lines, a long one in several pieces). */
  write(fd: 1 | 2, text: string): void;
  /** All of stdin, read when the host asks for it (`--args-file -`). */
  readStdin(): Promise<string>;
  /** Whether fd 1 or 2 is a terminal (asked only when a host answers). */
  isTerminal(fd: 1 | 2): boolean;
}

export interface ClientSetup extends BuildInfo {
  env: Environment;
  cwd: string;
  /** Machine name in the socket's file name. */
  hostname: string;
}

/** What became of the invocation: run by a host (with its exit code), or to be run by the caller. */
export type ClientOutcome =
  { served: true; code: number } | { served: false; reason: string; /** Set when a daemon should be started for the next calls. */ daemon?: DaemonStart };

export interface DaemonStart {
  dataDir: string;
  paths: EndpointPaths;
  /** `--os-sandbox`/`--jobs-url` of this invocation, so that the daemon serves calls like it. */
  args: string[];
  /** How long the daemon will wait without a call, s, for the notice that it was started. Default: 900. */
  idleSeconds?: number;
}

const CONNECT_TIMEOUT_MS = 2_000;

/**
 * Never throws: whatever goes wrong before the call is sent (an odd data dir, a socket that cannot be
 * reached) leaves the call to the CLI in this process, which reports it as an error with an exit code.
 */
export async function runThroughHost(argv: readonly string[], io: ClientIo, setup: ClientSetup): Promise<ClientOutcome> {
  try {
    return await tryHost(argv, io, setup);
  } catch (error) {
    return { served: false, reason: `no host could be asked (${error instanceof Error ? error.message : String(error)})` };
  }
}

async function tryHost(argv: readonly string[], io: ClientIo, setup: ClientSetup): Promise<ClientOutcome> {
  let options: GlobalOptions;
  let dataDir: string;
  try {
    const leading = emptyOptions();
    const rest = takeGlobalOptions(argv, leading, true);
    options = emptyOptions();
    takeGlobalOptions(argv, options, false);
    if (options.noDaemon || noDaemonIn(setup.env)) return { served: false, reason: "daemon use is turned off" };
    if (rest[0] !== undefined && LOCAL_COMMANDS.has(rest[0])) return { served: false, reason: `"${rest[0]}" runs in the calling process` };
    dataDir = resolveIdentity(options, setup.env, setup.cwd, setup.install).dataDir;
  } catch {
    return { served: false, reason: "the command line is for the CLI itself to report on" };
  }
  // A data dir that does not exist (or is not a directory) gets no daemon, and no folders made for one:
  // the CLI reports it.
  if (!isDirectory(dataDir)) return { served: false, reason: `the data dir ${dataDir} is not a directory` };
  const paths = endpointPaths(dataDir, setup.hostname);
  // Asked only when no host serves the call (config.json is not read on the served path).
  const daemon = (): { daemon?: DaemonStart } => {
    const settings = daemonSettings(dataDir);
    if (!settings.wanted) return {};
    const idleSeconds = daemonIdleSeconds(setup.env["ANIMAWORKS_DAEMON_IDLE_SECONDS"], settings.idleSeconds);
    return { daemon: { dataDir, paths, args: daemonArgs(options), idleSeconds } };
  };
  if (!isPrivateDir(paths.dir)) return { served: false, reason: "no host endpoint in this data dir", ...daemon() };
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(setup.env)) if (value !== undefined) env[name] = value;
  const call = encodeFrame({
    type: "call",
    protocol: PROTOCOL_VERSION,
    build: setup.build,
    install: setup.install,
    argv: [...argv],
    cwd: setup.cwd,
    env,
    stdoutIsTerminal: io.isTerminal(1),
    stderrIsTerminal: io.isTerminal(2),
  });
  const socket = await connectTo(paths.socket, call);
  if (!socket) return { served: false, reason: "no host answers", ...daemon() };
  return converse(socket, io, options.json, daemon);
}

/**
 * `wanted` is false when the operator turned automatic daemons off (`"daemon": false` in the
 * `animaworks_tool` section of config.json); `idleSeconds` is that section's `daemon_idle_seconds`, as
 * written. Read without the host's validation (the thin client loads no ajv); a file that cannot be read
 * or parsed leaves both to their defaults, and the in-process call that follows reports what is wrong.
 */
function daemonSettings(dataDir: string): { wanted: boolean; idleSeconds?: unknown } {
  try {
    // Read as a command-line file is (no FIFO, no device, bounded): the client must never hang here.
    const text = readRegularFileSync(join(dataDir, "config.json"), MAX_CONFIG_BYTES).toString("utf8");
    const config = JSON.parse(text) as { animaworks_tool?: { daemon?: unknown; daemon_idle_seconds?: unknown } } | null;
    return { wanted: config?.animaworks_tool?.daemon !== false, idleSeconds: config?.animaworks_tool?.daemon_idle_seconds };
  } catch {
    return { wanted: true };
  }
}

/** Largest config.json the client reads for its `daemon` setting; a larger one is left to the CLI to report. */
const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

function isDirectory(path: string): boolean {
  try {
    return statSync(path, { throwIfNoEntry: false })?.isDirectory() === true;
  } catch {
    return false; // ENOTDIR (a path through a file), EACCES…
  }
}

function daemonArgs(options: GlobalOptions): string[] {
  return [
    ...(options.osSandbox !== undefined ? ["--os-sandbox", options.osSandbox] : []),
    ...(options.jobsUrl !== undefined ? ["--jobs-url", options.jobsUrl] : []),
  ];
}

/**
 * Connects to `socket`; `first` (the request) is written at once and sent as soon as the connection is
 * made, which saves the client an event-loop turn. Undefined when nothing accepts: then nothing was sent.
 */
function connectTo(socket: string, first: Buffer): Promise<Socket | undefined> {
  return new Promise((resolve) => {
    let address: string;
    try {
      address = socketAddress(socket);
    } catch {
      return resolve(undefined);
    }
    // node:net (with Node's stream modules) is loaded only when there is a socket to talk to.
    const client = process.getBuiltinModule("node:net").connect(address);
    client.write(first);
    const timer = setTimeout(() => {
      client.destroy();
      resolve(undefined);
    }, CONNECT_TIMEOUT_MS);
    client.once("connect", () => {
      clearTimeout(timer);
      resolve(client);
    });
    client.once("error", () => {
      clearTimeout(timer);
      resolve(undefined);
    });
  });
}

function converse(socket: Socket, io: ClientIo, json: boolean, daemon: () => { daemon?: DaemonStart }): Promise<ClientOutcome> {
  const send = (message: ClientMessage): void => void socket.write(encodeFrame(message));
  return new Promise((resolve) => {
    const decoder = new FrameDecoder();
    let settled = false;
    const finish = (outcome: ClientOutcome): void => {
      if (settled) return;
      settled = true;
      resolve(outcome);
      // The launcher exits on the answer, before this turn ends: tearing the socket's stream down first
      // cost each served call ≈ 0.4 ms. A caller that lives on has it closed on the next turn.
      setImmediate(() => socket.destroy());
    };
    // Past this point the call may have run: a failure is reported, never retried in-process.
    const failed = (message: string): void => {
      if (settled) return;
      finish({
        served: true,
        code: printError(
          lineOutput(io),
          { type: "SandboxCrashed", fault: "host", message, hint: "run the command again (the next call starts a new host, or runs in-process)" },
          json,
        ),
      });
    };
    socket.on("data", (chunk: Buffer) => {
      let messages: HostMessage[];
      try {
        messages = decoder.push(chunk).map(decodeHostMessage);
      } catch (error) {
        return failed(`the running animaworks-tool host sent a malformed reply (${error instanceof ProtocolError ? error.message : String(error)})`);
      }
      for (const message of messages) {
        if (settled) return;
        switch (message.type) {
          case "stdout":
            io.write(1, message.text);
            break;
          case "stderr":
            io.write(2, message.text);
            break;
          case "stdin-request":
            void io.readStdin().then(
              (text) => {
                // The host takes at most MAX_ARGUMENTS_BYTES and refuses the rest: one character past
                // that is enough for it to say so, and spares the socket the remainder.
                const bounded = text.length > MAX_ARGUMENTS_BYTES ? text.slice(0, MAX_ARGUMENTS_BYTES + 1) : text;
                for (const data of chunks(bounded)) send({ type: "stdin", data });
                send({ type: "stdin-end" });
              },
              () => send({ type: "stdin-end" }),
            );
            break;
          case "exit":
            return finish({ served: true, code: message.code });
          case "refused":
            return finish({ served: false, reason: message.message, ...(message.restarting ? daemon() : {}) });
          case "error":
            return failed(`the running animaworks-tool host could not run the call: ${message.message}`);
          default:
            return failed(`the running animaworks-tool host sent an unexpected ${message.type} reply`);
        }
      }
    });
    socket.on("error", () => undefined);
    socket.on("close", () => failed("the running animaworks-tool host ended before the call finished (it may have run in part)"));
  });
}

function lineOutput(io: ClientIo): { stdout(text: string): void; stderr(text: string): void } {
  const line = (text: string): string => (text.endsWith("\n") ? text : `${text}\n`);
  return { stdout: (text) => io.write(1, line(text)), stderr: (text) => io.write(2, line(text)) };
}

/**
 * What a daemon does not inherit of the environment of the call that starts it: it serves every Anima,
 * not that caller. The caller's identity; and Node's own switches, which would change the daemon for
 * everyone: NODE_OPTIONS (an `--inspect` from a developer's shell opens a debugger port on the shared
 * host; `--require` runs code in it) and NODE_TLS_REJECT_UNAUTHORIZED (the fetch capability verifies
 * certificates regardless: capabilities/net-request.ts).
 */
const NOT_FOR_DAEMONS = new Set(["ANIMAWORKS_ANIMA_DIR", "ANIMAWORKS_CLI_FALLBACK", "NODE_OPTIONS", "NODE_TLS_REJECT_UNAUTHORIZED"]);

/** A daemon being started by one client counts for this long; concurrent first calls start no other. */
const STARTING_GRACE_MS = 30_000;
/** The daemon's log is started afresh when it has grown past this, bytes. */
const MAX_DAEMON_LOG_BYTES = 1024 * 1024;

/**
 * Starts a daemon for the data dir in the background (`animaworks-tool daemon run`), unless another
 * client started one within the last 30 s. Best effort: a failure leaves calls running in-process.
 * `notify` (the caller's stderr) hears that a daemon now runs and how to stop it, the first time one is
 * started for this data dir (daemon-notice.ts); without it (`daemon start`, whose caller asked for one)
 * the notice is only marked as given.
 */
export async function startDaemon(start: DaemonStart, setup: ClientSetup, launcher: string, notify?: (text: string) => void): Promise<boolean> {
  try {
    makePrivateDir(start.paths.dir);
    if (!claimStart(start.paths.starting)) return false;
    // A daemon removes the marker once it listens: a claim made after that must see it answering.
    if (await answers(start.paths.socket)) {
      rmSync(start.paths.starting, { force: true });
      return false;
    }
    const tooBig = (statSync(start.paths.log, { throwIfNoEntry: false })?.size ?? 0) > MAX_DAEMON_LOG_BYTES;
    const log = openSync(start.paths.log, tooBig ? "w" : "a", 0o600);
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries(setup.env)) if (value !== undefined && !NOT_FOR_DAEMONS.has(name)) env[name] = value;
    const child = process
      .getBuiltinModule("node:child_process")
      .spawn(process.execPath, ["--no-node-snapshot", launcher, "daemon", "run", "--data-dir", start.dataDir, ...start.args], {
        detached: true,
        stdio: ["ignore", log, log],
        env,
        cwd: "/",
      });
    child.unref();
    closeSync(log);
    if (claimDaemonNotice(start.paths)) notify?.(daemonNotice(child.pid, start.dataDir, start.idleSeconds ?? daemonIdleSeconds(undefined, undefined)));
    return true;
  } catch {
    return false;
  }
}

/** True when something accepts connections on `socket`. */
async function answers(socket: string): Promise<boolean> {
  if (!existsSync(socket)) return false;
  const connection = await connectTo(socket, Buffer.alloc(0));
  connection?.destroy();
  return connection !== undefined;
}

/** Claims the right to start the daemon: an O_EXCL marker file, or one left by a start long past. */
function claimStart(marker: string): boolean {
  try {
    const fd = openSync(marker, "wx", 0o600);
    writeSync(fd, String(process.pid));
    closeSync(fd);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") return false;
  }
  const ageMs = Date.now() - (statSync(marker, { throwIfNoEntry: false })?.mtimeMs ?? 0);
  if (ageMs < STARTING_GRACE_MS) return false;
  const fd = openSync(marker, "w", 0o600);
  writeSync(fd, String(process.pid));
  closeSync(fd);
  return true;
}

/** The launcher of an install (what a client starts a daemon with). */
export function launcherOf(install: string): string {
  return join(install, "bin", "animaworks-tool.cjs");
}

/**
 * Sends a `status` or `stop` request to the host serving `paths`; undefined when none answers. A host
 * of another protocol version answers with `refused`.
 */
export async function controlHost(paths: EndpointPaths, type: "status" | "stop", build: BuildInfo): Promise<HostMessage | undefined> {
  if (!isPrivateDir(paths.dir)) return undefined;
  const socket = await connectTo(paths.socket, encodeFrame({ type, protocol: PROTOCOL_VERSION, ...build }));
  if (!socket) return undefined;
  return new Promise((resolve) => {
    const decoder = new FrameDecoder();
    const timer = setTimeout(() => finish(undefined), 10_000);
    const finish = (reply: HostMessage | undefined): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(reply);
    };
    socket.on("data", (chunk: Buffer) => {
      try {
        const [first] = decoder.push(chunk).map(decodeHostMessage);
        if (first) finish(first);
      } catch (error) {
        finish({ type: "error", message: error instanceof Error ? error.message : String(error) });
      }
    });
    socket.on("error", () => finish(undefined));
    socket.on("close", () => finish(undefined));
  });
}
export { readBuildInfo } from "../endpoint/paths.js";
