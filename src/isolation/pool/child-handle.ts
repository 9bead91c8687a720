import type { ErrorInfo } from "../../errors.js";
import { MAX_CAPABILITY_ARGS_CHARS } from "../call-ledger.js";
import { ChildLink } from "./child-link.js";
import { ChildOutbox } from "./child-outbox.js";
import { type Pending, type ProcessOwner, crashedError, placedAnima, failureFor, spawnSpec, unansweredFailure } from "./process-owner.js";
import { relayCapability } from "./capability-relay.js";
import { DemotedChildren } from "./demoted-children.js";
import { decodeFromSandbox } from "../wire/decode.js";
import { type CallOutcome, type DescribeOutcome, type FromSandbox, type ToSandbox, type WarmPoolStats, labelled } from "../wire/messages.js";
import { monotonicMs } from "../../clock.js";
import { WarmPoolStatsRequests } from "./warm-pool-stats.js";
import { isPythonBundle } from "../wire/tool-bundle.js";
import { heldPartsShortage } from "../wire/parts.js";
import { checkedResponse } from "./response-check.js";
import { SlotRestarts } from "./slot-restarts.js";
import { InterpretersSent } from "./interpreters-sent.js";

/**
 * One supervised sandbox process slot of a cordon, as its pool (cordon-pool.ts) drives it: start (or
 * adopt a spare) and restart, the requests in flight on it, and the checks on everything its process
 * sends (see the pool's invariants).
 */
export class SandboxProcess {
  child: ChildLink | undefined;
  readonly pending = new Map<number, Pending>();
  private ready = false;
  /** When the running child said it was ready, monotonic ms (undefined while it starts). */
  readyAt: number | undefined;
  private readonly stats = new WarmPoolStatsRequests();
  private backlog: ToSandbox[] = [];
  /** When this slot's next process starts after it lost one, and what becomes of those it left. */
  private readonly restarts: SlotRestarts;
  /** Earlier children of this slot demoted in place, finishing their calls (see `demoteRunning`). */
  private readonly demoted: DemotedChildren;
  private replacingDemoted = false;

  constructor(
    readonly index: number,
    private readonly pool: ProcessOwner,
    /** Nice value the process runs at (0: normal; see SandboxPool's low-priority process). */
    readonly nice = 0,
    /** When given, the first process starts once it settles (the processes of an evicted cordon have ended). */
    startAfter?: Promise<unknown>,
  ) {
    this.demoted = new DemotedChildren(pool.rescheduler);
    this.restarts = new SlotRestarts(
      {
        get closing() {
          return pool.closing;
        },
        atProcessCap: () => pool.atProcessCap(),
        onBackoff: (message) => this.report(`sandbox process slot ${index} ${message}`),
      },
      () => this.start(),
    );
    this.startOnceSettled(startAfter);
  }

  /** Drops `anima`'s warm isolates in this process (its calls now go elsewhere). */
  forgetAnima(anima: string): void {
    this.interpreters.forgetAnima(anima);
    if (this.ready && this.child?.connected) this.outbox.enqueue(this.child, { type: "forget", anima });
  }

  /** The warm pool figures this process reports, or undefined when it does not answer in time. */
  warmPoolStats(): Promise<WarmPoolStats | undefined> {
    const child = this.child;
    if (!this.ready || !child?.connected) return Promise.resolve(undefined);
    return this.stats.request((statsId) => this.outbox.enqueue(child, { type: "stats", statsId }));
  }

  get load(): number {
    return this.pending.size;
  }

  /** Running or starting; false between a loss and its replacement's start, or a demotion's (calls go where one is up). */
  get available(): boolean {
    return this.child !== undefined && !this.replacingDemoted;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /**
   * Demotes the running child in place: it finishes its calls in flight at low priority and then ends
   * (demoted-children.ts), and a fresh child at this slot's priority takes the calls that come next.
   * False when there is no running child to demote, this slot is the low-priority one already, or a
   * process it left earlier is still alive (see SlotRestarts).
   */
  demoteRunning(): boolean {
    const child = this.child;
    if (!child || !this.ready || this.nice > 0 || !this.restarts.mayDemote) return false;
    // The demoted one lives on beside its replacement: room for that, asked while this slot still counts it.
    const room = this.pool.closing ? undefined : this.pool.roomForOne();
    this.child = undefined;
    this.ready = false;
    this.demoted.add(child, this.hasCallsOn(child));
    this.restarts.left(child, true);
    this.replacingDemoted = true;
    if (!this.pool.closing) this.startOnceSettled(room);
    return true;
  }

  /** Checks the demoted children's scheduling again (see DemotedChildren.recheck). */
  recheckDemoted(): void {
    this.demoted.recheck();
  }

  private hasCallsOn(child: ChildLink): boolean {
    for (const pending of this.pending.values()) if (pending.child === child) return true;
    return false;
  }

  /** Bundle hashes this incarnation of the child has been sent (it caches their code). */
  private sentBundles = new Set<string>();
  /** What this incarnation was sent of Python tools: whether a request finds an interpreter there (set by `start`). */
  interpreters!: InterpretersSent;

  send(message: ToSandbox): void {
    if (this.ready && this.child?.connected) {
      if (message.type === "request") {
        this.bind(message.id, this.child);
        // A bundle's code crosses to a process once; later requests name it by hash only.
        const bundle = message.request.bundle;
        if (this.sentBundles.has(bundle.hash)) message = { ...message, request: { ...message.request, bundle: { ...bundle, code: "" } } };
        else {
          this.sentBundles.add(bundle.hash);
          if (isPythonBundle(bundle.code)) this.child.allowPythonInterpreters();
        }
      }
      this.outbox.enqueue(this.child, message);
    } else this.backlog.push(message);
  }

  /** Messages sent in one event-loop iteration leave in one IPC write (child-outbox.ts). */
  private readonly outbox = new ChildOutbox();

  private bind(id: number, child: ChildLink): void {
    const pending = this.pending.get(id);
    if (pending) pending.child = child;
  }

  /** A new process's state: nothing sent yet. */
  private freshState(): void {
    this.ready = false;
    this.readyAt = undefined;
    this.sentBundles = new Set();
    this.interpreters = new InterpretersSent(this.pool.pythonInterpreters.spare);
  }

  /** Starts this slot's next process now, or once `settled` settles (what ends to make room for it has ended). */
  private startOnceSettled(settled: Promise<unknown> | undefined): void {
    if (!settled) return this.start();
    this.freshState(); // requests placed on the slot while it waits are known as of the process to come
    const start = () => this.start(true);
    void settled.then(start, start);
  }

  /** `known`: what was sent while the start waited (startAfter) stands; a restart begins anew. */
  private start(known = false): void {
    if (this.pool.closing) return; // nothing starts once the pool closes: the close would not see it
    if (!known) this.freshState();
    const handlers = {
      onMessage: (link: ChildLink, raw: unknown) => this.onMessage(link, raw),
      onBroken: (link: ChildLink, reason: string) => this.violation(link, reason),
    };
    // A blank spare has run nothing: it becomes this slot's, for good (one still starting says ready to the slot).
    const spare = this.pool.takeSpare(this.nice);
    const child = spare?.link ?? new ChildLink(spawnSpec(this.pool, this.nice), handlers, (message) => this.pool.onStderr(message), this.pool.guard);
    // Before its first request: whatever it holds of large strings counts against its cordon's budget,
    // shared by every process of the cordon (normal, low-priority, demoted and retiring ones alike).
    child.parts.chargeTo(this.pool.heldParts.cordon, this.pool.heldParts.host);
    this.child = child;
    this.pool.live.add(child);
    child.process.on("exit", (code, signal) => this.onExit(child, code, signal));
    if (spare) {
      spare.link.rebind(handlers);
      if (spare.ready) this.becameReady();
    }
  }

  private onMessage(child: ChildLink, raw: unknown): void {
    const message = decodeFromSandbox(raw);
    if (!message) return this.violation(child, "sent a message that is not part of the protocol");
    this.handle(child, message);
  }

  private handle(child: ChildLink, message: FromSandbox): void {
    if (message.type === "ready") {
      // Once per child: a second one would restart the wait before its process is judged (readyAt).
      if (this.ready || child !== this.child) return this.violation(child, "said it was ready twice");
      this.becameReady();
    } else if (message.type === "needBundle") {
      // The child dropped that bundle from its cache: send the request again, code included, to the very
      // child it was sent to (a retired or demoted one too), never to another.
      // Once per request: each resend copies the bundle's code, so a second one is refused.
      const pending = this.inFlightOf(child, message.id);
      if (!pending) return;
      if (pending.bundleResent) return this.violation(child, `asked for request ${message.id}'s bundle a second time`);
      pending.bundleResent = true;
      if (child.connected) child.send({ type: "request", id: message.id, request: labelled(pending.request) });
    } else if (message.type === "warmPool") {
      const { statsId, type: _type, ...stats } = message;
      if (child === this.child) this.stats.answer(statsId, stats);
    } else if (message.type === "retiring") {
      this.retire(child);
    } else if (message.type === "part") {
      const pending = this.inFlightOf(child, message.id);
      if (!pending) return;
      if (pending.request.op !== "call") return this.violation(child, "sent a part of a string outside a call");
      // One count whatever the parts are for (a result's text, a capability's arguments): the larger limit.
      const maxChars = Math.max(MAX_CAPABILITY_ARGS_CHARS, pending.request.maxResultBytes);
      const open = child.parts.openId;
      const added = child.parts.add(message.id, message.text, maxChars);
      if (added === "held") return;
      if (added === "interleaved") return this.violation(child, `sent a part of request ${message.id} while request ${open}'s parts waited for their message`);
      if (added === "over-request") return this.violation(child, `sent parts of request ${message.id} over their limit`);
      // A shortage, which this process alone may not have caused: the call fails, and the process is told to stop it.
      if (child.connected) this.outbox.enqueue(child, { type: "abort", id: message.id });
      return this.settle(message.id, pending, failureFor(pending, heldPartsShortage(added)));
    } else if (message.type === "response") {
      const pending = this.inFlightOf(child, message.id);
      if (!pending) return;
      const checked = checkedResponse(child, pending, message);
      if ("violation" in checked) return this.violation(child, checked.violation);
      this.settle(message.id, pending, checked.outcome);
    } else if (message.type === "capability") {
      const pending = this.inFlightOf(child, message.id);
      if (pending && (!pending.ledger || pending.request.op !== "call")) return this.violation(child, "asked for a capability outside a call");
      if (message.parted) {
        const argsJson = child.parts.take(message.id);
        if (argsJson === undefined && pending) return this.violation(child, "sent parted arguments without their parts");
        message = { ...message, argsJson: argsJson ?? "" };
      }
      const breach = relayCapability(child, pending, message, this.pool.invokeCapability);
      if (breach) return this.violation(child, breach);
    } else if (message.type === "log") {
      const ledger = this.inFlightOf(child, message.id)?.ledger;
      for (const line of ledger?.log(message.level, message.message) ?? []) {
        try {
          this.pool.onLog(line);
        } catch {
          // a broken log sink must not take the host down
        }
      }
    }
  }

  /** `child` is ready: the requests that waited for it are sent. */
  private becameReady(): void {
    this.ready = true;
    this.readyAt = monotonicMs();
    this.replacingDemoted = false;
    const backlog = this.backlog;
    this.backlog = [];
    for (const queued of backlog) {
      // A request that waited for its process to start has its hard stop from now: a slow start (a
      // loaded machine, a one-shot describer) is not the tool's time.
      const pending = queued.type === "request" ? this.pending.get(queued.id) : undefined;
      if (pending && queued.type === "request") {
        clearTimeout(pending.timer);
        pending.killAt = monotonicMs() + pending.hardStopMs;
        pending.timer = setTimeout(() => this.killUnanswered(queued.id, "deadline"), pending.hardStopMs);
      }
      this.send(queued);
      const anima = queued.type === "request" ? placedAnima(queued.request) : undefined;
      if (queued.type === "request" && anima !== undefined) this.pool.sentAfterStart(anima, queued.id);
    }
  }

  /** The request `id` in flight on `child`, or undefined for one that has ended (an answer racing its
   * deadline). An id the host never sent to this very child is a violation (reported; the child goes). */
  private inFlightOf(child: ChildLink, id: number): Pending | undefined {
    const pending = this.pending.get(id);
    if (pending && pending.child === child) return pending;
    if (pending || !this.pool.wasSentTo(id, this.index)) this.violation(child, `named request ${id}, which the host never sent to it`);
    return undefined;
  }

  /** Ends request `id` with `outcome` (a call's failure as the host attributes it). */
  private settle(id: number, pending: Pending, outcome: CallOutcome | DescribeOutcome): void {
    this.pending.delete(id);
    pending.child?.parts.drop(id);
    clearTimeout(pending.timer);
    if (pending.child && pending.child !== this.child && !this.hasCallsOn(pending.child)) {
      this.demoted.drained(pending.child);
      this.restarts.drained(pending.child);
    }
    const anima = placedAnima(pending.request);
    if (anima !== undefined) this.pool.ended(anima, id);
    const ledger = pending.ledger;
    if (ledger) {
      ledger.end(outcome.ok ? "returned" : outcome.error.type);
      if (!outcome.ok) outcome = { ...outcome, error: ledger.judge(outcome.error) };
    }
    pending.resolve(outcome);
  }

  /** A protocol violation: reported, and the process is killed at once (it may be compromised). */
  private violation(child: ChildLink, what: string): void {
    this.report(`sandbox process ${child.pid ?? "?"} ${what}; it was stopped and replaced`);
    this.retire(child, "stopped for a violation");
    child.kill();
  }

  /** Tells the pool's security trail `what` of this slot's cordon. */
  private report(what: string): void {
    try {
      this.pool.onViolation(`${what} (cordon ${this.pool.cordon})`, this.pool.cordon);
    } catch {
      // reporting must not stop what follows
    }
  }

  /**
   * Stops sending to `child`, which leaves the slot (killed once it has no request in flight), and starts
   * its replacement as SlotRestarts allows; `how` it went, for the report of a slot that keeps losing its processes.
   */
  private retire(child: ChildLink, how = "retired"): void {
    if (child !== this.child) return;
    this.child = undefined;
    this.ready = false;
    this.restarts.retired(child, this.hasCallsOn(child));
    this.restarts.lost(how);
  }

  private onExit(child: ChildLink, code: number | null, signal: NodeJS.Signals | null): void {
    this.failAll(crashedError(child.stoppedFromOutside, signal ? `signal ${signal}` : `exit code ${code}`), child);
    if (child !== this.child) return; // a child that left the slot: its replacement is due already
    this.child = undefined;
    this.ready = false;
    // Requests queued for the restart are kept: they were never sent to the dead process.
    this.restarts.lost(`ended (${signal ? `signal ${signal}` : `exit code ${code}`})`);
  }

  /** Fails the pending requests sent to `child` (all, when no child is named). */
  failAll(error: ErrorInfo, child?: ChildLink): void {
    for (const [id, pending] of this.pending) {
      if (child && pending.child !== child) continue;
      this.settle(id, pending, failureFor(pending, error));
    }
  }

  /**
   * Asks the child to stop request `id`, and kills it if it has not answered `killAfterMs` later (unless
   * the request's own hard stop comes sooner); one still waiting for a (re)start is answered here at once.
   */
  abort(id: number, killAfterMs: number): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    if (pending.child) {
      if (pending.child.connected) this.outbox.enqueue(pending.child, { type: "abort", id });
      const killAt = monotonicMs() + killAfterMs;
      if (killAt < pending.killAt) {
        clearTimeout(pending.timer);
        pending.killAt = killAt;
        pending.timer = setTimeout(() => this.killUnanswered(id, "stopped"), killAfterMs);
      }
      return;
    }
    this.backlog = this.backlog.filter((m) => !(m.type === "request" && m.id === id));
    this.settle(
      id,
      pending,
      failureFor(pending, { type: "ExecutionError", fault: "caller", message: "the call was stopped by its caller before it finished" }),
    );
  }

  /**
   * The last-resort hard stop: kills the process because it did not answer request `id` in time after its
   * deadline (that request fails as a timeout) or after its caller stopped it (it fails as stopped).
   */
  killUnanswered(id: number, after: "deadline" | "stopped"): void {
    const late = this.pending.get(id);
    if (!late) return;
    const { error, stopped } = unansweredFailure(late, after);
    if (stopped === "outside" && late.child) late.child.stoppedFromOutside = true;
    if (stopped === "itself")
      this.report(
        `sandbox process ${late.child?.pid ?? "?"} was found stopped (SIGSTOP) at a call's hard stop, as it can stop itself; the call failed as the tool's, and the process was stopped and replaced`,
      );
    this.settle(id, late, failureFor(late, error));
    // Kill the process that has the request; if it was still queued for a restart, just unqueue it.
    if (late.child) late.child.kill();
    else this.backlog = this.backlog.filter((m) => !(m.type === "request" && m.id === id));
  }

  /** Ends the process: asked to shut down, killed after `graceMs` (0: at once). */
  async stop(graceMs = 2_000): Promise<void> {
    const ended = [this.restarts.stop(graceMs), this.demoted.stop()];
    const child = this.child;
    if (!child) return void (await Promise.all(ended));
    const exited = new Promise<void>((resolve) => child.process.once("exit", () => resolve()));
    if (child.connected) child.send({ type: "shutdown" });
    const timer = setTimeout(() => child.kill(), graceMs);
    await Promise.all([exited, ...ended]);
    clearTimeout(timer);
  }
}
