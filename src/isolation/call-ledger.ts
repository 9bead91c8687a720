import { setMaxListeners } from "node:events";
import type { ErrorInfo } from "../errors.js";
import type { AnswerMeter, BudgetShortfall, CallContext, CallLabel, CapabilityReply, ToolLogLine } from "./wire/messages.js";
import { MAX_CAPABILITIES_IN_FLIGHT } from "../contract/isolate.js";

/**
 * The host's own account of one call: what its tool asked for and what the host answered. Code in an
 * isolate is an adversary, so every limit that protects the host or another Anima is kept here, on
 * values the host measured, never on counters the sandbox reports (the prelude keeps the same limits
 * only to fail early and cheaply).
 *
 * Invariants:
 *  - Capability calls in flight are counted per call and per Anima; beyond the limit a request is
 *    refused with a `SandboxViolation` at once (never queued: a flood must not pile up on the host).
 *  - Bytes in flight (the request's text plus the largest answer it can get) are reserved per call, per
 *    Anima and per host before the capability runs; beyond a budget the request waits, first come first
 *    served, until earlier ones finish or the call ends. A single request never needs more than one
 *    call's budget (`MAX_CAPABILITY_ARGS_CHARS` + the largest answer).
 *  - An answer whose size is learnt only as it arrives (a fetched body) is charged live, through the
 *    `AnswerMeter` each run hands its capability, on the same three budgets: before the host holds the
 *    bytes, never waiting (an answer that does not fit fails), and until the run ends, which in a sandbox
 *    pool is once its process has taken the answer (capability-relay.ts). So the bytes a call, an Anima
 *    and the host hold for answers are at most their budgets, however many fetches run at once.
 *  - Log lines are counted and cut here; the notice that ends a flood is the host's own.
 *  - Only denials this ledger saw the host issue to this call may leave the call as `SandboxViolation`
 *    or `PermissionDenied` (`judge`); anything else a tool throws under those names is its own error.
 *  - When the call ends (`end`), its signal aborts: work it started (a fetch, a queued file operation)
 *    stops, and requests still waiting for budget are answered with an error at once.
 */

/**
 * Capability calls in flight that a sandbox process's own ledger allows (child/main.ts starts its runner
 * with them, whatever the host's settings): per call (the prelude keeps the same, `MAX_CAPABILITIES_IN_FLIGHT`)
 * and per Anima, counted in that process. A request counts there until its answer has arrived, and at the
 * host until the answer has been handed to the kernel, so the host never sees an honest process with more
 * outstanding than these: a request past them is a protocol violation (pool/capability-relay.ts).
 */
export const SANDBOX_PROCESS_IN_FLIGHT = { perCall: MAX_CAPABILITIES_IN_FLIGHT, perAnima: 256 } as const;

/** Defaults of `CapabilityLimits`, with their units. */
export const DEFAULT_CAPABILITY_LIMITS: CapabilityLimits = {
  maxInFlightPerCall: SANDBOX_PROCESS_IN_FLIGHT.perCall,
  maxInFlightPerAnima: SANDBOX_PROCESS_IN_FLIGHT.perAnima,
  maxBytesInFlightPerCall: 32 * 1024 * 1024,
  maxBytesInFlightPerAnima: 32 * 1024 * 1024,
  maxBytesInFlightPerHost: 256 * 1024 * 1024,
};

export interface CapabilityLimits {
  /** Capability calls one call may have in flight; more are refused. Default: 64. */
  maxInFlightPerCall: number;
  /** Capability calls one Anima's calls may have in flight together; more are refused. Default: 256. */
  maxInFlightPerAnima: number;
  /** Bytes one call may have in flight (requests and reserved answers); more wait. Default: 32 MiB. */
  maxBytesInFlightPerCall: number;
  /** Bytes one Anima's calls may have in flight together; more wait. Default: 32 MiB. */
  maxBytesInFlightPerAnima: number;
  /** Bytes all calls of this host may have in flight together; more wait. Default: 256 MiB. */
  maxBytesInFlightPerHost: number;
}

/** Longest JSON argument text a capability call may carry (a 10 MiB write in base64, and then some). */
export const MAX_CAPABILITY_ARGS_CHARS = 16 * 1024 * 1024;

/**
 * Answer bytes reserved before a capability runs. A read fills its answer (up to 10 MiB, 4/3 of that as
 * base64) at disk speed, so it reserves the most it can return. A fetch fills its body at network
 * speed and is cut at 10 MiB; reserving that much would allow only two fetches in flight per call, so its
 * body is charged live as it arrives (`AnswerMeter`, capabilities/fetch.ts), and it reserves only what it
 * holds besides: the response headers (at most 16 KiB) and the answer object, escaped into the frame that
 * carries it (up to 6 bytes a character). A listing is bounded by the entry quota; the rest answer a few fields.
 */
function answerReserveBytes(name: string): number {
  if (name === "fs.readFile") return 14 * 1024 * 1024;
  if (name === "fetch") return 128 * 1024;
  if (name === "fs.readdir") return 1024 * 1024;
  return 4 * 1024;
}

export const LOG_LIMIT_NOTICE = "log limit reached for this call; further lines are dropped";

/** The most bytes a budget (or any of a kind: every Anima's) has had in flight at once. */
interface PeakRecord {
  bytes: number;
}

/** Bytes in flight against one limit; requests beyond it wait in order of arrival. */
class ByteBudget {
  used = 0;
  private readonly waiting: Array<{ bytes: number; wake: () => void }> = [];

  constructor(
    readonly limit: number,
    private readonly peak: PeakRecord = { bytes: 0 },
  ) {}

  /** Resolves once `bytes` are reserved; rejects if `signal` aborts first. `bytes` ≤ `limit`. */
  acquire(bytes: number, signal: AbortSignal): Promise<void> {
    if (this.waiting.length === 0 && this.used + bytes <= this.limit) {
      this.add(bytes);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        bytes,
        wake: () => {
          signal.removeEventListener("abort", onAbort);
          this.add(bytes);
          resolve();
        },
      };
      const onAbort = () => {
        const index = this.waiting.indexOf(waiter);
        if (index >= 0) this.waiting.splice(index, 1);
        reject(signal.reason);
        this.drain();
      };
      if (signal.aborted) return reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  /** True if `bytes` fit now; never waits. */
  fits(bytes: number): boolean {
    return this.used + bytes <= this.limit;
  }

  /**
   * Counts `bytes` as taken; the caller made sure they fit. A live answer (`LiveAnswer`) takes its bytes
   * so, ahead of requests waiting: it is work already under way, and waiting for room it cannot get
   * while others hold theirs would only stall them all.
   */
  add(bytes: number): void {
    this.used += bytes;
    if (this.used > this.peak.bytes) this.peak.bytes = this.used;
  }

  release(bytes: number): void {
    this.used -= bytes;
    this.drain();
  }

  private drain(): void {
    while (this.waiting.length > 0 && this.used + (this.waiting[0] as { bytes: number }).bytes <= this.limit) {
      (this.waiting.shift() as { wake: () => void }).wake();
    }
  }
}

/** The capability byte budgets as the host counts them, bytes (`CapabilityBudget.report`). */
export interface CapabilityBytesReport {
  /** In flight host-wide now: reserved for requests, and held by live answers. */
  inFlightBytes: number;
  /** Held by live answers now (`AnswerMeter`; part of `inFlightBytes`). */
  answerBytes: number;
  /** The most in flight host-wide at once. */
  peakHostBytes: number;
  /** The most any one Anima had in flight at once. */
  peakAnimaBytes: number;
  /** The most live answers held at once, host-wide. */
  peakAnswerBytes: number;
}

/** What all calls of one host (or one sandbox process) share: per-Anima and host-wide counts. */
export class CapabilityBudget {
  readonly limits: CapabilityLimits;
  readonly hostBytes: ByteBudget;
  private readonly animas = new Map<string, { inFlight: number; bytes: ByteBudget; calls: number }>();
  private readonly hostPeak: PeakRecord = { bytes: 0 };
  private readonly animaPeak: PeakRecord = { bytes: 0 };
  /** Bytes live answers hold now (`AnswerMeter`), and the most they held at once. */
  private readonly answers = { heldBytes: 0, peakBytes: 0 };

  constructor(limits: Partial<CapabilityLimits> = {}) {
    this.limits = { ...DEFAULT_CAPABILITY_LIMITS, ...limits };
    this.hostBytes = new ByteBudget(this.limits.maxBytesInFlightPerHost, this.hostPeak);
  }

  /** Bytes reserved host-wide right now (for reports and tests). */
  get bytesInFlight(): number {
    return this.hostBytes.used;
  }

  /** The counts now and their high-water marks since the host started (for reports and tests). */
  report(): CapabilityBytesReport {
    return {
      inFlightBytes: this.hostBytes.used,
      answerBytes: this.answers.heldBytes,
      peakHostBytes: this.hostPeak.bytes,
      peakAnimaBytes: this.animaPeak.bytes,
      peakAnswerBytes: this.answers.peakBytes,
    };
  }

  /** Counts `deltaBytes` more (or fewer) bytes held by live answers (`AnswerMeter`). */
  noteAnswerBytes(deltaBytes: number): void {
    this.answers.heldBytes += deltaBytes;
    if (this.answers.heldBytes > this.answers.peakBytes) this.answers.peakBytes = this.answers.heldBytes;
  }

  /** The per-Anima account, kept while the Anima has a call open. */
  enter(anima: string): { inFlight: number; bytes: ByteBudget } {
    let account = this.animas.get(anima);
    if (!account) this.animas.set(anima, (account = { inFlight: 0, bytes: new ByteBudget(this.limits.maxBytesInFlightPerAnima, this.animaPeak), calls: 0 }));
    account.calls++;
    return account;
  }

  leave(anima: string): void {
    const account = this.animas.get(anima);
    if (account) account.calls--;
    this.tidy(anima);
  }

  /** Forgets an Anima with no open call and nothing in flight (its requests may outlive its calls briefly). */
  tidy(anima: string): void {
    const account = this.animas.get(anima);
    if (account && account.calls === 0 && account.inFlight === 0 && account.bytes.used === 0) this.animas.delete(anima);
  }
}

/**
 * The live charge of one run's answer (`AnswerMeter`). Invariant: it holds exactly `heldBytes` on each of
 * its budgets, or nothing once closed; a closed meter charges nothing more (an answer still growing after
 * its run ended would be held uncounted, so it fails instead).
 */
class LiveAnswer implements AnswerMeter {
  private heldBytes = 0;
  private closed = false;

  constructor(
    readonly scopes: ReadonlyArray<readonly [BudgetShortfall["scope"], ByteBudget]>,
    private readonly budget: CapabilityBudget,
  ) {}

  hold(heldBytes: number): BudgetShortfall | undefined {
    const target = Math.max(0, Math.ceil(heldBytes));
    const more = target - this.heldBytes;
    if (more > 0) {
      if (this.closed) return { scope: "call", limitBytes: this.budget.limits.maxBytesInFlightPerCall };
      for (const [scope, budget] of this.scopes) if (!budget.fits(more)) return { scope, limitBytes: budget.limit };
      for (const [, budget] of this.scopes) budget.add(more);
    } else if (more < 0) {
      for (const [, budget] of this.scopes) budget.release(-more);
    }
    this.heldBytes = target;
    this.budget.noteAnswerBytes(more);
    return undefined;
  }

  close(): void {
    this.hold(0);
    this.closed = true;
  }
}

export interface LedgerLimits {
  maxLogLines: number;
  maxLogLineChars: number;
}

/**
 * `C`: what the ledger knows of its call, which its log lines and refusals carry back: the host's record
 * of it on the host (sandbox pool), the label alone where isolates run (isolate/isolate-runner.ts).
 */
export class CallLedger<C extends CallLabel = CallContext> {
  /**
   * Made on the call's first capability request: most calls make none, and an AbortController, its
   * listener limit and the abort's Error cost a warm call ≈ 20 µs.
   */
  private controller: AbortController | undefined;
  private readonly account: { inFlight: number; bytes: ByteBudget };
  private readonly callBytes: ByteBudget;
  private inFlight = 0;
  private logLines = 0;
  private ended = false;
  private endReason = "";
  /** `type\0message` of every error the host issued to this call → that error as the host issued it. */
  private readonly denials = new Map<string, ErrorInfo>();

  constructor(
    readonly context: C,
    private readonly limits: LedgerLimits,
    private readonly budget: CapabilityBudget,
    /** Told of each refusal the ledger itself makes (a limit a correct prelude would have kept). */
    private readonly onRefusal?: (context: C, name: string, error: ErrorInfo) => void,
  ) {
    this.account = budget.enter(context.anima);
    this.callBytes = new ByteBudget(budget.limits.maxBytesInFlightPerCall);
  }

  /** Aborts when the call ends, with the reason given to `end`. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      // Every request waiting for budget, and every answer waiting for its process to take it
      // (capability-relay.ts), listens on the signal; each is bounded by maxInFlightPerCall.
      setMaxListeners(2 * this.budget.limits.maxInFlightPerCall + 16, this.controller.signal);
      if (this.ended) this.controller.abort(new Error(`the call ended (${this.endReason})`));
    }
    return this.controller.signal;
  }

  /**
   * Runs one capability request of this call within the limits; never rejects. What `invoke` charges to
   * its meter is released when it settles: it must not settle before its answer has left the host.
   */
  async run(name: string, argsJson: string, invoke: (signal: AbortSignal, meter: AnswerMeter) => Promise<CapabilityReply>): Promise<CapabilityReply> {
    if (this.ended) return { ok: false, error: { type: "ExecutionError", fault: "tool", message: `${name}: the call had already ended` } };
    if (argsJson.length > MAX_CAPABILITY_ARGS_CHARS)
      return { ok: false, error: { type: "InvalidArguments", fault: "tool", message: `${name}: the arguments are too large` } };
    const { maxInFlightPerCall, maxInFlightPerAnima } = this.budget.limits;
    if (this.inFlight >= maxInFlightPerCall) return this.refuse(name, `too many capability calls in flight (limit ${maxInFlightPerCall} per call)`);
    if (this.account.inFlight >= maxInFlightPerAnima)
      return this.refuse(name, `too many capability calls in flight for this Anima (limit ${maxInFlightPerAnima})`);
    this.inFlight++;
    this.account.inFlight++;
    const bytes = argsJson.length + answerReserveBytes(name);
    const held: ByteBudget[] = [];
    const scopes: LiveAnswer["scopes"] = [
      ["call", this.callBytes],
      ["anima", this.account.bytes],
      ["host", this.budget.hostBytes],
    ];
    const answer = new LiveAnswer(scopes, this.budget);
    try {
      for (const [, budget] of scopes) {
        await budget.acquire(bytes, this.signal);
        held.push(budget);
      }
      const reply = await invoke(this.signal, answer);
      if (!reply.ok) this.denials.set(`${reply.error.type}\0${reply.error.message}`, reply.error);
      return reply;
    } catch {
      return { ok: false, error: { type: "ExecutionError", fault: "tool", message: `${name}: the call ended before the host could answer` } };
    } finally {
      answer.close();
      for (const budget of held) budget.release(bytes);
      this.inFlight--;
      this.account.inFlight--;
      if (this.ended) this.budget.tidy(this.context.anima);
    }
  }

  /** The lines to forward for one tool log line (none once the limit was reached, then one notice). */
  log(level: ToolLogLine["level"], message: string): Array<ToolLogLine<C>> {
    if (this.ended || this.logLines > this.limits.maxLogLines) return [];
    this.logLines++;
    if (this.logLines > this.limits.maxLogLines) return [{ level: "warn", message: LOG_LIMIT_NOTICE, context: this.context }];
    const max = this.limits.maxLogLineChars;
    return [{ level, message: message.length > max ? `${message.slice(0, max)}… [cut]` : message, context: this.context }];
  }

  /**
   * The call's failure as the host attributes it: a `SandboxViolation` or `PermissionDenied` the host
   * did not issue to this very call is the tool's own error, whatever the sandbox claims.
   */
  judge(error: ErrorInfo): ErrorInfo {
    const key = `${error.type}\0${error.message}`;
    const issued = this.denials.get(key);
    if (issued) {
      // An error the host issued and the tool let through keeps the host's own hint and fault (never what the sandbox sent).
      return issued;
    }
    if (error.type !== "SandboxViolation" && error.type !== "PermissionDenied") return error;
    return { type: "ExecutionError", fault: "tool", message: `the tool threw an error named ${error.type} that the host did not issue: ${error.message}` };
  }

  /** Ends the call: its signal aborts, later requests and log lines are refused. Idempotent. */
  end(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.endReason = reason;
    this.controller?.abort(new Error(`the call ended (${reason})`));
    this.budget.leave(this.context.anima);
  }

  private refuse(name: string, message: string): CapabilityReply {
    const error: ErrorInfo = { type: "SandboxViolation", fault: "tool", message: `${name}: ${message}` };
    this.denials.set(`${error.type}\0${error.message}`, error);
    try {
      this.onRefusal?.(this.context, name, error);
    } catch {
      // a broken report sink must not fail the call
    }
    return { ok: false, error };
  }
}
