import type { ChildProcess } from "node:child_process";
import type { Socket } from "node:net";
import { FramedSocket } from "../wire/framed-socket.js";
import { CHANNEL_FD, MAX_FRAME_FROM_SANDBOX_BYTES } from "../wire/frames.js";
import { PartAssembler } from "../wire/parts.js";
import type { ToSandbox } from "../wire/messages.js";
import { type SandboxChildSpec, spawnSandboxChild } from "./child-spawn.js";
import { forwardStderr } from "./child-stderr.js";
import { bulkPipeOf } from "../wire/bulk-channel.js";
import { type ResourceLimits, type ResourceWatchdog, pythonInterpretersMb } from "../os/resource-watchdog.js";
import { killProcessTree } from "../os/process-lifetime.js";
import { monotonicMs } from "../../clock.js";
import { MessageBudget } from "./message-budget.js";

/** The host's watch on what a process holds outside its isolates (os/resource-watchdog.ts). */
export interface ProcessGuard {
  readonly watchdog: ResourceWatchdog;
  readonly limits: ResourceLimits;
  /** The process runs under bubblewrap with the seccomp program, which refuses it new processes. */
  readonly childrenFixedUnderSeccomp: boolean;
}

/**
 * The host's link to one running sandbox process: the process, its framed channel (wire/frames.ts),
 * the parts of large strings it is sending (wire/parts.ts) and what it may still cost the host.
 *
 * Invariants:
 *  - Every byte the process writes on its channel is decoded by the host itself, one frame of at most
 *    `MAX_FRAME_FROM_SANDBOX_BYTES` at a time; a framing error is reported once (`onBroken`) and nothing
 *    more of that process is read.
 *  - A process may send `THROTTLE_MESSAGES_PER_WINDOW` messages per `THROTTLE_WINDOW_MS`; past that its
 *    channel is not read until the window ends (its writes block: it is throttled), and a process
 *    throttled `FLOOD_WINDOWS` windows in a row is reported as flooding (`onBroken`).
 *  - Capability requests, which cost the host far more than other messages (a file operation, an audit
 *    record), are taken at `CAPABILITY_MESSAGES_PER_SECOND` on average (a burst of
 *    `CAPABILITY_MESSAGES_BURST` at once): past that the channel is not read until the budget allows the
 *    next (message-budget.ts). An honest tool in a tight loop reaches this too, so it only slows the
 *    process down, never retires it; what a flood costs the host per second is bounded either way.
 *  - The host leaves at most `MAX_UNREAD_BYTES` unread on the channel: a process that stops reading
 *    is reported rather than buffered for.
 *  - With a guard, the host's /proc watchdog reports a process over its memory, task or open-file
 *    limit (`onBroken`) within its period: the caller kills it.
 */

/** Messages a sandbox process may send per window before the host stops reading it until the window ends. */
export const THROTTLE_MESSAGES_PER_WINDOW = 50_000;
export const THROTTLE_WINDOW_MS = 1_000;
/** Windows in a row in which a process was throttled before it counts as flooding the host. */
export const FLOOD_WINDOWS = 5;
/**
 * Capability requests per second the host takes from one process, on average. An honest tool keeping 64
 * requests in flight reached ≈ 6,000 fs.stat a second here and ≈ 27,000 of the cheapest (job.progress);
 * a compromised process sent 45,000 refused ones a second, each an audit record, and held every other
 * Anima's calls for hundreds of ms. Each request is a capability run (or refused) and an audit record on
 * the host's event loop: this bounds one process's share of it. Real tools make a few dozen per call.
 */
export const CAPABILITY_MESSAGES_PER_SECOND = 2_000;
/** Capability requests taken at once after a quiet spell (a call that lists a folder and stats each entry). */
export const CAPABILITY_MESSAGES_BURST = 2_000;
/** Bytes the host's writes may wait unread by the process, bytes. */
export const MAX_UNREAD_BYTES = 64 * 1024 * 1024;

export interface ChildLinkHandlers {
  onMessage(link: ChildLink, raw: unknown): void;
  /** The process broke its channel (framing, flooding, not reading): it must be killed. */
  onBroken(link: ChildLink, reason: string): void;
}

export class ChildLink {
  readonly process: ChildProcess;
  readonly channel: FramedSocket;
  /** The parts of the message it is sending; they count against no cordon until its owner charges them to one (`PartAssembler.chargeTo`). */
  readonly parts = new PartAssembler();
  /** The host found the process stopped from outside (SIGSTOP) when it killed it: its calls are not the tool's fault. */
  stoppedFromOutside = false;
  private brokenReported = false;
  private windowStart = 0;
  private messagesInWindow = 0;
  private throttledWindows = 0;
  private resumeTimer: NodeJS.Timeout | undefined;
  /** When reading the channel resumes (monotonic ms; 0: it is read). */
  private resumeAtMs = 0;
  private readonly capabilityBudget = new MessageBudget(CAPABILITY_MESSAGES_PER_SECOND, CAPABILITY_MESSAGES_BURST, monotonicMs());

  private handlers: ChildLinkHandlers;
  private readonly pythonInterpreters: SandboxChildSpec["pythonInterpreters"];

  /**
   * Starts the process. `onStderr` gets its stderr a line at a time (child-stderr.ts); a spawn failure or
   * a broken bulk pipe is left to the process's 'exit', which its owner handles.
   */
  constructor(
    spec: SandboxChildSpec,
    handlers: ChildLinkHandlers,
    onStderr: (message: string) => void,
    private readonly guard?: ProcessGuard,
  ) {
    this.handlers = handlers;
    this.pythonInterpreters = spec.pythonInterpreters;
    this.process = spawnSandboxChild(spec);
    forwardStderr(this.process.stderr, this.process.pid, onStderr);
    bulkPipeOf(this.process)?.on("error", () => {
      // the process went away: its 'exit' follows
    });
    this.process.on("error", () => {
      // 'exit' follows
    });
    if (guard && this.process.pid !== undefined) {
      const unwatch = guard.watchdog.watch(
        this.process.pid,
        guard.limits,
        (what) => this.reportBroken(`went over a limit the host keeps outside its isolates (${what})`),
        {
          childrenFixedUnderSeccomp: guard.childrenFixedUnderSeccomp,
        },
      );
      this.process.once("exit", unwatch);
    }
    const socket = (this.process.stdio as unknown[])[CHANNEL_FD] as Socket;
    this.channel = new FramedSocket(socket, {
      maxFrameBytes: MAX_FRAME_FROM_SANDBOX_BYTES,
      maxUnreadBytes: MAX_UNREAD_BYTES,
      onMessage: (raw) => {
        this.count(socket);
        if (isCapabilityRequest(raw)) {
          const waitMs = this.capabilityBudget.take(monotonicMs());
          if (waitMs > 0) this.holdReading(socket, waitMs);
        }
        this.handlers.onMessage(this, raw);
      },
      onBroken: (reason) => this.reportBroken(reason),
    });
    this.process.once("exit", () => clearTimeout(this.resumeTimer));
  }

  /**
   * The host sends this process a Python tool: its memory limit makes room for the interpreters it was
   * told to keep between calls (`pythonInterpretersMb`). Decided here, on what the host sent and the
   * settings it started the process with, never on what the process says it holds.
   */
  allowPythonInterpreters(): void {
    const pid = this.process.pid;
    const roomBytes = pythonInterpretersMb(this.pythonInterpreters) * 2 ** 20;
    if (this.guard && pid !== undefined) this.guard.watchdog.raiseMemory(pid, this.guard.limits.memoryBytes + roomBytes);
  }

  /** Hands the process's messages to a new owner (a spare adopted by a cordon's slot). */
  rebind(handlers: ChildLinkHandlers): void {
    this.handlers = handlers;
  }

  /** The process broke the protocol or a bound the host keeps: its owner kills it (`ChildLinkHandlers.onBroken`). */
  reportBroken(reason: string): void {
    // Once: the first breach kills the process; what it still holds (answers waiting, readings) may trip later.
    if (this.brokenReported) return;
    this.brokenReported = true;
    this.handlers.onBroken(this, reason);
  }

  get pid(): number | undefined {
    return this.process.pid;
  }

  /** True while messages can be written to the process. */
  get connected(): boolean {
    return this.channel.open && this.process.exitCode === null && this.process.signalCode === null;
  }

  send(message: ToSandbox): void {
    this.channel.send([message]);
  }

  /**
   * Kills the process and every process of its tree (process-lifetime.ts): bwrap's init too, which
   * outlives a killed bwrap when that bwrap was still starting. Only while the host has not reaped it
   * (afterwards its pid may be another process's).
   */
  kill(): void {
    this.channel.close();
    const pid = this.process.pid;
    if (pid !== undefined && this.process.exitCode === null && this.process.signalCode === null) killProcessTree(pid);
  }

  /** True once the host has seen the process end (or it never started). */
  get exited(): boolean {
    return this.process.pid === undefined || this.process.exitCode !== null || this.process.signalCode !== null;
  }

  /** Counts a message against the process's window, and stops reading it for the rest of a full one. */
  private count(socket: Socket): void {
    const now = Date.now();
    if (now - this.windowStart >= THROTTLE_WINDOW_MS) {
      // Throttled windows count only when they follow each other.
      if (this.messagesInWindow <= THROTTLE_MESSAGES_PER_WINDOW || now - this.windowStart >= 2 * THROTTLE_WINDOW_MS) this.throttledWindows = 0;
      this.windowStart = now;
      this.messagesInWindow = 0;
    }
    if (++this.messagesInWindow !== THROTTLE_MESSAGES_PER_WINDOW + 1) return;
    if (++this.throttledWindows >= FLOOD_WINDOWS) {
      this.reportBroken(`sent more than ${THROTTLE_MESSAGES_PER_WINDOW} messages a second for ${FLOOD_WINDOWS} seconds (flooding the host)`);
      return;
    }
    this.holdReading(socket, this.windowStart + THROTTLE_WINDOW_MS - now);
  }

  /** Stops reading the channel for `ms` (or longer, when it is held longer already). */
  private holdReading(socket: Socket, ms: number): void {
    const resumeAtMs = monotonicMs() + ms;
    if (resumeAtMs <= this.resumeAtMs) return;
    this.resumeAtMs = resumeAtMs;
    socket.pause();
    clearTimeout(this.resumeTimer);
    this.resumeTimer = setTimeout(() => {
      this.resumeAtMs = 0;
      socket.resume();
    }, ms).unref();
  }
}

/** A message that says it is a capability request (decoded and checked later, by its owner). */
function isCapabilityRequest(raw: unknown): boolean {
  return typeof raw === "object" && raw !== null && (raw as { type?: unknown }).type === "capability";
}
