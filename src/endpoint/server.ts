import { chmodSync, lstatSync, renameSync, rmSync } from "node:fs";
import { type Server, type Socket, createServer } from "node:net";
import { hostname as machineName } from "node:os";
import { monotonicMs } from "../clock.js";
import { settingDifference } from "../config.js";
import { PROJECT_ROOT } from "../project-root.js";
import type { ToolHost } from "../host-api.js";
import { Declined, type InvocationHostOptions, type InvocationOutput, type InvocationRunner, MAX_ARGUMENTS_BYTES } from "./invocation.js";
import { StdinReader } from "./stdin-reader.js";
import { DEFAULT_OUTPUT_LIMITS, type OutputLimits, ReplyWriter, sendText } from "./reply-writer.js";
import { BudgetedFrameReader, ConnectionBudget, type ConnectionLimits, DEFAULT_CONNECTION_LIMITS, FrameBudgetError } from "./connection-budget.js";
import { FolderFreshness, InvocationHost } from "./invocation-host.js";
import { withLock } from "../file-lock.js";
import { answers } from "./socket-probe.js";
import { type EndpointPaths, endpointPaths, makePrivateDir, readBuildInfo, releaseSocketAddress, socketAddress } from "./paths.js";
import {
  type BuildInfo,
  type CallMessage,
  type ClientMessage,
  type EndpointStatus,
  type HostMessage,
  PROTOCOL_VERSION,
  ProtocolError,
  decodeClientMessage,
  encodeFrame,
  quote,
} from "./protocol.js";

export interface EndpointOptions {
  /** The long-running host whose tools, calls and jobs the CLI clients use. */
  host: ToolHost;
  /** Runs each client's invocation: the CLI's `main` (the endpoint never imports the CLI). */
  runInvocation: InvocationRunner;
  /** `daemon` (started by a CLI call or `daemon start`; may be told to stop) or `serve`. */
  kind: "daemon" | "serve";
  /** This side's build. Default: the install's `dist/cli/build-id`. */
  build?: BuildInfo;
  /** Machine name in the socket's file name. Default: os.hostname(). */
  hostname?: string;
  /** Reported by `daemon status`, ms. Default: none. */
  idleTimeoutMs?: number;
  /** Calls served at once; a client beyond it runs its call itself. Default: 256. */
  maxActiveCalls?: number;
  /** A connection must send its first message within this, ms. Default: 10,000. */
  firstMessageTimeoutMs?: number;
  /** Connections open at once, unfinished frames held across them, time for a begun frame (connection-budget.ts). */
  connectionLimits?: Partial<ConnectionLimits>;
  /** Reply bytes queued for clients that do not read, and how long one may read nothing (reply-writer.ts). */
  outputLimits?: Partial<OutputLimits>;
  /** Stdin a client may send for one call (`--args-file -`), bytes. Default: `MAX_ARGUMENTS_BYTES` (64 MiB). */
  maxStdinBytes?: number;
  /** All of a call's stdin must arrive within this of the host's request, ms (stdin-reader.ts). Default: 120,000. */
  stdinTimeoutMs?: number;
  /** A `daemon` is asked to stop (`daemon stop`, or a client of this install built since it started). */
  onStopRequest?: (reason: "requested" | "outdated" | "settings changed") => void;
  /** Operator-facing lines (refusals, protocol errors). Default: none. */
  log?: (message: string) => void;
}

/**
 * A long-running host's local endpoint: a Unix socket in the data dir through which the `animaworks-tool`
 * CLI runs its invocations on this host (protocol.ts). Each invocation runs the CLI's own `main` with the
 * client's argv, working directory, environment and terminal facts, on a view of this host
 * (InvocationHost), so its output, exit code and log lines are those of the same command run in-process.
 *
 * Security invariants:
 * - Only the data dir's owner can connect: the socket is in a 0700 directory of that user (paths.ts).
 * - A connection gains nothing the CLI does not already grant its user: the Anima is chosen exactly as on
 *   the command line (`--anima`, `$ANIMAWORKS_ANIMA_DIR`), checked by the same code.
 * - Every message is decoded field by field; a bad frame ends that connection only.
 * - What connections hold is bounded (connection-budget.ts): their number, the bytes of their unfinished
 *   frames, the time a begun frame may take; and a connection whose reply is complete (`status`,
 *   `stopping`, a refusal, a call's `exit`) is read no further and closed once the reply is written.
 */
export class Endpoint {
  readonly paths: EndpointPaths;
  private readonly build: BuildInfo;
  private readonly freshness: FolderFreshness;
  private readonly startedAt = new Date().toISOString();
  private readonly connections = new Set<Socket>();
  private readonly budget: ConnectionBudget;
  private readonly outputLimits: OutputLimits;
  private server: Server | undefined;
  private socketInode: bigint | undefined;
  private callsServed = 0;
  private active = 0;
  private lastActivityMs = monotonicMs();
  private idleWaiters: Array<() => void> = [];
  private serverClosed: Promise<void> | undefined;

  private constructor(private readonly options: EndpointOptions) {
    this.paths = endpointPaths(options.host.config.dataDir, options.hostname ?? machineName());
    this.build = options.build ?? readBuildInfo(PROJECT_ROOT);
    this.freshness = new FolderFreshness(options.host);
    this.budget = new ConnectionBudget({ ...DEFAULT_CONNECTION_LIMITS, ...options.connectionLimits });
    this.outputLimits = { ...DEFAULT_OUTPUT_LIMITS, ...options.outputLimits };
  }

  /**
   * Listens on the data dir's socket, replacing a stale one. Undefined when another live host on this
   * machine serves it already (one endpoint per data dir and machine).
   */
  static async open(options: EndpointOptions): Promise<Endpoint | undefined> {
    const endpoint = new Endpoint(options);
    return (await endpoint.listen()) ? endpoint : undefined;
  }

  /** Calls running now. */
  get activeCalls(): number {
    return this.active;
  }

  /** Connections open now. */
  get openConnections(): number {
    return this.connections.size;
  }

  /** Bytes of unfinished frames held across connections now (at most the limit and one read chunk). */
  get heldFrameBytes(): number {
    return this.budget.pendingFrameBytes;
  }

  /** Reply bytes queued across connections now, not yet taken by their clients. */
  get queuedReplyBytes(): number {
    let bytes = 0;
    for (const socket of this.connections) bytes += socket.writableLength;
    return bytes;
  }

  /** Milliseconds since the last call started or ended (0 while one runs). */
  idleForMs(): number {
    return this.active > 0 ? 0 : monotonicMs() - this.lastActivityMs;
  }

  /** False once the socket file is gone or is another host's (removed or replaced by hand or in a race). */
  stillOurs(): boolean {
    const stats = lstatSync(this.paths.socket, { bigint: true, throwIfNoEntry: false });
    return this.server !== undefined && stats !== undefined && stats.ino === this.socketInode;
  }

  /** Stops taking connections and removes the socket (if it is still ours); calls in flight go on. */
  async stopAccepting(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    // Remove the socket file first, and only if it is still ours, so that a new host can bind at once.
    // (Node would remove the path it bound on close: that is the temporary name, renamed away at bind.)
    const stats = lstatSync(this.paths.socket, { bigint: true, throwIfNoEntry: false });
    if (stats && stats.ino === this.socketInode) rmSync(this.paths.socket, { force: true });
    // Settles once the connections still open have ended too.
    this.serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
    releaseSocketAddress(this.paths.socket);
  }

  /**
   * Stops taking connections and lets the calls in flight finish for up to `graceMs` (default 10,000);
   * then ends their connections, which stops what they run (a `jobs wait` would otherwise hold a host
   * that was told to stop for as long as its job runs). Their clients get the "host ended" error.
   */
  async close(options: { graceMs?: number } = {}): Promise<void> {
    await this.stopAccepting();
    await this.untilIdle(options.graceMs ?? 10_000);
    for (const socket of this.connections) socket.destroy();
    await this.untilIdle(5_000);
    await this.serverClosed;
  }

  private async untilIdle(timeoutMs: number): Promise<void> {
    if (this.active === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => this.idleWaiters.push(resolve)),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
  }

  private async listen(): Promise<boolean> {
    makePrivateDir(this.paths.dir);
    return withLock(this.paths.lock, async () => {
      if (await answers(this.paths.socket)) return false;
      // Bound under a temporary name, made owner-only, then renamed over the real one (replacing a stale
      // file atomically). Node removes the name it bound when the server closes: the temporary one,
      // gone by then, never the real path, which may be another host's by that time.
      const temporary = `${this.paths.socket}.${process.pid}.tmp`;
      rmSync(temporary, { force: true });
      const server = createServer((socket) => this.accept(socket));
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(socketAddress(temporary), () => resolve());
      });
      server.on("error", (error) => this.options.log?.(`endpoint: ${error.message}`));
      chmodSync(temporary, 0o600);
      renameSync(temporary, this.paths.socket);
      this.socketInode = lstatSync(this.paths.socket, { bigint: true }).ino;
      this.server = server;
      return true;
    });
  }

  private accept(socket: Socket): void {
    if (!this.budget.admit()) {
      const message = `the running host has ${this.budget.limits.maxConnections} connections open`;
      this.options.log?.(`endpoint: refused a connection: ${message}`);
      socket.on("error", () => undefined);
      socket.end(encodeFrame({ type: "refused", reason: "busy", message }), () => socket.destroy());
      return;
    }
    this.connections.add(socket);
    const abort = new AbortController();
    let stdin: StdinReader | undefined;
    let started = false;
    const writer = new ReplyWriter(
      socket,
      this.outputLimits,
      () => this.queuedReplyBytes,
      (message, error) => {
        this.log(`endpoint: closed a connection: its ${message.type} reply could not be framed: ${error.message}`);
        end();
        abort.abort();
      },
      () => {
        this.log(`endpoint: cut a connection: its client read none of its reply for ${this.outputLimits.stallTimeoutMs} ms`);
        abort.abort();
        socket.destroy();
      },
    );
    const send = (message: HostMessage): void => writer.send(message);
    // The reply is complete: nothing more is read, and the connection closes once the reply is written.
    const end = (): void => {
      reader.stop();
      clearTimeout(timer);
      if (!socket.writableEnded) socket.end(() => socket.destroy());
    };
    const fail = (message: string): void => {
      this.log(`endpoint: closed a connection: ${message}`);
      send({ type: "error", message });
      end();
      abort.abort();
      setTimeout(() => socket.destroy(), 1_000).unref();
    };
    const reader = new BudgetedFrameReader(this.budget, (timeoutMs) => fail(`a frame did not arrive whole within ${timeoutMs} ms`));
    const timer = setTimeout(() => fail(`no request within ${this.firstMessageTimeoutMs()} ms`), this.firstMessageTimeoutMs());
    timer.unref();
    socket.on("error", () => abort.abort());
    socket.on("close", () => {
      clearTimeout(timer);
      reader.stop();
      abort.abort();
      stdin?.fail();
      this.connections.delete(socket);
      this.budget.leave();
    });
    socket.on("data", (chunk: Buffer) => {
      let messages: ClientMessage[];
      try {
        messages = reader.push(chunk).map(decodeClientMessage);
      } catch (error) {
        if (!(error instanceof ProtocolError)) throw error;
        if (!(error instanceof FrameBudgetError)) return fail(`bad frame: ${error.message}`);
        if (started) return fail(error.message);
        // Nothing ran yet: the client runs its call itself.
        this.log(`endpoint: refused a connection: ${error.message}`);
        send({ type: "refused", reason: "busy", message: error.message });
        return end();
      }
      for (const message of messages) {
        if (!started) {
          started = true;
          clearTimeout(timer);
          if (message.type === "stdin" || message.type === "stdin-end")
            return fail(`a connection must start with a call, status or stop request, not ${message.type}`);
          if (message.type === "call") stdin = this.serveCall(message, writer, end, abort.signal);
          else this.control(message.type, message.protocol, send, end);
        } else if ((message.type === "stdin" || message.type === "stdin-end") && stdin?.expecting()) {
          const problem = stdin.take(message);
          if (problem) return fail(problem);
        } else return fail(`unexpected ${message.type} message`);
      }
    });
  }

  private control(type: "status" | "stop", protocol: number, send: (message: HostMessage) => void, end: () => void): void {
    if (protocol !== PROTOCOL_VERSION) {
      send({ type: "refused", reason: "version", message: `the running host speaks protocol ${PROTOCOL_VERSION}, not ${protocol}` });
    } else if (type === "status") {
      send({ type: "status", status: this.status() });
    } else if (this.options.kind !== "daemon") {
      send({
        type: "error",
        message: `CLI calls are served by "animaworks-tool serve" (pid ${process.pid}), not a daemon; stop that process instead (Ctrl-C or SIGTERM)`,
      });
    } else {
      send({ type: "stopping" });
      this.options.onStopRequest?.("requested");
    }
    end();
  }

  private status(): EndpointStatus {
    return {
      ...this.build,
      pid: process.pid,
      kind: this.options.kind,
      dataDir: this.options.host.config.dataDir,
      startedAt: this.startedAt,
      calls: this.callsServed,
      active: this.active,
      ...(this.options.idleTimeoutMs !== undefined ? { idleTimeoutMs: this.options.idleTimeoutMs } : {}),
    };
  }

  /** Runs one invocation for a client; returns the reader its stdin messages go to. */
  private serveCall(message: CallMessage, writer: ReplyWriter, end: () => void, signal: AbortSignal): StdinReader {
    const send = (reply: HostMessage): void => writer.send(reply);
    const stdin = new StdinReader(send, this.options.maxStdinBytes ?? MAX_ARGUMENTS_BYTES, this.options.stdinTimeoutMs ?? 120_000);
    const refuse = (reason: "version" | "busy", text: string, restarting = false): StdinReader => {
      send({ type: "refused", reason, message: text, ...(restarting ? { restarting } : {}) });
      end();
      return stdin;
    };
    if (message.protocol !== PROTOCOL_VERSION) return refuse("version", `the running host speaks protocol ${PROTOCOL_VERSION}, not ${message.protocol}`);
    if (message.build !== this.build.build || message.install !== this.build.install) {
      // A client of this very install that was built since this daemon started: this daemon is outdated.
      const outdated = message.install === this.build.install && this.options.kind === "daemon";
      if (outdated) {
        // The socket goes before the client hears "restarting", so the daemon it starts can take it.
        void this.stopAccepting();
        this.options.onStopRequest?.("outdated");
      }
      return refuse(
        "version",
        `the running host (pid ${process.pid}) is build ${this.build.build} of ${this.build.install}, the client build ${quote(message.build)} of ${quote(message.install)}`,
        outdated,
      );
    }
    if (this.active >= (this.options.maxActiveCalls ?? 256)) return refuse("busy", `the running host has ${this.active} calls in flight`);
    this.active++;
    this.callsServed++;
    const out: InvocationOutput = {
      stdout: (text) => sendText(send, "stdout", text),
      stderr: (text) => sendText(send, "stderr", text),
      drained: () => writer.drained(),
    };
    void this.options
      .runInvocation(message.argv, out, {
        env: message.env,
        cwd: message.cwd,
        stderrIsTerminal: message.stderrIsTerminal,
        readStdin: () => stdin.read(),
        signal,
        hostFor: (options) => this.hostFor(options),
      })
      .then(
        (code) => send({ type: "exit", code }),
        (error: unknown) => {
          if (error instanceof Declined) send({ type: "refused", reason: error.reason, message: error.message });
          else send({ type: "error", message: `the host failed to run the call: ${error instanceof Error ? error.message : String(error)}` });
        },
      )
      .finally(() => {
        end();
        this.active--;
        this.lastActivityMs = monotonicMs();
        if (this.active === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
      });
    return stdin;
  }

  /** This host, for an invocation that asks for exactly what it is; else `Declined` (the client runs it). */
  private hostFor(options: InvocationHostOptions): ToolHost {
    const config = this.options.host.config;
    if (options.config.dataDir === config.dataDir && options.config.operator.fingerprint !== config.operator.fingerprint) {
      // The operator changed config.json since this host started: a daemon makes way for one that reads it.
      if (this.options.kind === "daemon") {
        void this.stopAccepting();
        this.options.onStopRequest?.("settings changed");
      }
      throw new Declined("config", `the running host (pid ${process.pid}) started with other settings in ${config.operator.file}`);
    }
    const mismatch = settingDifference(options.config, config);
    if (mismatch) throw new Declined("config", `the running host cannot run this call as asked: ${mismatch}`);
    return new InvocationHost(this.options.host, options.config, this.freshness);
  }

  /** An operator-facing line, at most LOG_LINE_CHARS characters: what a client sent is quoted in it, and cut. */
  private log(line: string): void {
    this.options.log?.(line.length > LOG_LINE_CHARS ? `${line.slice(0, LOG_LINE_CHARS)}… (${line.length - LOG_LINE_CHARS} more characters)` : line);
  }

  private firstMessageTimeoutMs(): number {
    return this.options.firstMessageTimeoutMs ?? 10_000;
  }
}

/** Longest log line the endpoint writes, in characters (more is cut and counted). */
const LOG_LINE_CHARS = 1_000;
