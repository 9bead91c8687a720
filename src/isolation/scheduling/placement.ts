import { type CallInFlight, THRESHOLDS, demotedAfterInPlaceMs } from "./judge.js";

/**
 * Where each Anima's calls run: which sandbox process, and at what CPU priority. Pure bookkeeping on what
 * the host itself measured (when each call was sent and when it ended); nothing a sandbox process says
 * enters it. It measures each process's call window (`callWindowOn`) for the judge (judge.ts), and
 * carries out the judge's decisions (`demote`, `movedOff`). Used by `CordonPool`.
 *
 * Invariants:
 *  - An Anima's calls go to one process at a time (its warm isolates live there). It moves only while it
 *    has no call in flight, and the pool then drops its warm isolates in the process it left.
 *  - New Animas go to the process with the fewest calls in flight, ties to the one serving the fewest
 *    Animas: first calls that come one at a time spread evenly.
 *  - An idle Anima moves when the spread has become uneven: its process serves more than
 *    `THRESHOLDS.moveAfterExtraAnimas` Animas more than another that is up (after a restart, say). Busy
 *    time is not a reason to move: wall time counts calls that wait on the network as much as spinning
 *    ones, and a move costs the Anima its warm isolates; a busy neighbour is dealt with by demotion.
 *  - A demoted Anima's calls go to the low-priority process until the judge's `untilMs`.
 *  - A call that was running when its process was demoted in place (`movedOff`) no longer counts for that
 *    process, whose slot now holds a fresh one. The Anima of a long one the judge named stays demoted
 *    while it runs and `demotedAfterInPlaceMs` after it ends (longer each time); the Animas of the
 *    others are not demoted for them.
 */

/** What placement needs of a process. */
export interface Slot {
  readonly index: number;
  /** Running or starting. */
  readonly available: boolean;
  /** Requests in flight there now. */
  readonly load: number;
}

interface Tenant<P> {
  home: P | undefined;
  /**
   * Its calls in flight, by request id: where each runs and since when. `movedOff`: its process was
   * demoted in place while it ran, `"long"` when it was one of the long calls that made the process busy.
   */
  inFlight: Map<number, { process: P; startedAt: number; graceMs: number; movedOff?: "long" | "short" }>;
  demotedUntil: number;
  /** How many times a long call of its made its process be demoted in place. */
  demotedInPlace: number;
}

/** A process's calls over the window since its previous reading, as the judge reads them (`ProcessReading`). */
export interface CallWindow {
  windowStartMs: number;
  endedCallMs: Array<{ anima: string; ms: number }>;
  longestEndedCallMs: number;
  inFlight: CallInFlight[];
}

export interface Route<P> {
  target: P;
  /** The process the Anima left (its warm isolates there should go). */
  left?: P;
  /** True when the call goes to the low-priority process. */
  demoted: boolean;
}

export class Placement<P extends Slot> {
  private readonly tenants = new Map<string, Tenant<P>>();
  private readonly animaCount = new Map<P, number>();
  /**
   * Per process: wall time of the calls that ended there since `since`, counted from `since` on, per
   * Anima, and the longest of them, start to end (see `callWindowOn`).
   */
  private readonly endedCallTime = new Map<P, { since: number; byAnima: Map<string, number>; longestMs: number }>();

  constructor(
    private readonly processes: readonly P[],
    /** The low-priority process (started on first use). */
    private readonly lowPriority: () => P,
  ) {
    for (const process of processes) this.animaCount.set(process, 0);
  }

  /** Where the next call of `anima` goes. Call `started` with its id right after. */
  route(anima: string, now: number): Route<P> {
    let tenant = this.tenants.get(anima);
    if (!tenant) {
      tenant = { home: undefined, inFlight: new Map(), demotedUntil: 0, demotedInPlace: 0 };
      this.tenants.set(anima, tenant);
    }
    if (this.demoted(tenant, now)) return { target: this.lowPriority(), demoted: true };
    const home = tenant.home;
    // A process that crashed or retired fails only what was in flight there: while it restarts, its
    // Animas' calls go to a process that is up (their warm isolates are lost with it anyway).
    const homeDown = home !== undefined && !home.available && this.processes.some((p) => p.available);
    if (home && !homeDown && (tenant.inFlight.size > 0 || !this.shouldMove(home))) return { target: home, demoted: false };
    const target = this.leastBusy(home);
    if (target === home) return { target, demoted: false };
    this.setHome(tenant, target);
    return home ? { target, left: home, demoted: false } : { target, demoted: false };
  }

  /**
   * Call `id` of `anima` went to `process` now. `graceMs`: time at its start that is not the Anima's use
   * (its boot allowance, for a Python interpreter that must start first: boot-allowance.ts): its time
   * runs from then.
   */
  started(anima: string, id: number, process: P, now: number, graceMs = 0): void {
    this.tenants.get(anima)?.inFlight.set(id, { process, startedAt: now + graceMs, graceMs });
  }

  /**
   * Call `id` of `anima` waited for its process to start and was sent to it now: its time runs from now.
   * A call is what runs in the process; the wait for a fresh one (after a crash or a demotion in place,
   * slower on a loaded machine) is not a call of that Anima's running long.
   */
  sent(anima: string, id: number, now: number): void {
    const call = this.tenants.get(anima)?.inFlight.get(id);
    if (call && !call.movedOff) call.startedAt = now + call.graceMs;
  }

  /**
   * The calls on `process` since the last time this was asked for it (those that ended meanwhile, and
   * those in flight), and starts a new window. Before the first time there is no window: it begins now.
   */
  callWindowOn(process: P, now: number): CallWindow {
    const window = this.endedCallTime.get(process);
    this.endedCallTime.set(process, { since: now, byAnima: new Map(), longestMs: 0 });
    return {
      windowStartMs: window?.since ?? now,
      endedCallMs: [...(window?.byAnima ?? [])].map(([anima, ms]) => ({ anima, ms })),
      longestEndedCallMs: window?.longestMs ?? 0,
      inFlight: [...this.callsOn(process)].map(({ anima, id, call }) => ({ id, anima, startedAtMs: call.startedAt })),
    };
  }

  /** The judge found `anima` over its share: its calls go to the low-priority process (started now, to be up by its next call) until `untilMs`. */
  demote(anima: string, untilMs: number): void {
    const tenant = this.tenants.get(anima);
    if (!tenant) return;
    tenant.demotedUntil = Math.max(tenant.demotedUntil, untilMs);
    this.lowPriority();
  }

  /**
   * `process` was demoted in place: the calls in flight there no longer count for it (see the
   * invariants); `longCallIds` are the long calls the judge named (`DemotionInPlace`).
   */
  movedOff(process: P, longCallIds: ReadonlySet<number>): void {
    for (const tenant of this.tenants.values()) {
      let long = false;
      for (const [id, call] of tenant.inFlight) {
        if (call.process !== process || call.movedOff) continue;
        call.movedOff = longCallIds.has(id) ? "long" : "short";
        long ||= call.movedOff === "long";
      }
      if (long) tenant.demotedInPlace++;
    }
  }

  /** The calls in flight that count for `process` (not those moved off it), with their Animas. */
  private *callsOn(process: P): Generator<{ anima: string; id: number; call: { startedAt: number } }> {
    for (const [anima, tenant] of this.tenants) {
      for (const [id, call] of tenant.inFlight) if (call.process === process && !call.movedOff) yield { anima, id, call };
    }
  }

  /** Call `id` of `anima` has ended. */
  finished(anima: string, id: number, now: number): void {
    const tenant = this.tenants.get(anima);
    const call = tenant?.inFlight.get(id);
    if (!tenant || !call) return;
    tenant.inFlight.delete(id);
    if (call.movedOff === "long") tenant.demotedUntil = Math.max(tenant.demotedUntil, now + demotedAfterInPlaceMs(tenant.demotedInPlace));
    const window = this.endedCallTime.get(call.process);
    if (window && !call.movedOff) {
      window.byAnima.set(anima, (window.byAnima.get(anima) ?? 0) + Math.max(0, now - Math.max(call.startedAt, window.since)));
      window.longestMs = Math.max(window.longestMs, now - call.startedAt);
    }
  }

  /** The process `anima`'s calls go to (not counting a demotion), if it has made any. */
  homeOf(anima: string): P | undefined {
    return this.tenants.get(anima)?.home;
  }

  isDemoted(anima: string, now: number): boolean {
    const tenant = this.tenants.get(anima);
    return tenant !== undefined && this.demoted(tenant, now);
  }

  private demoted(tenant: Tenant<P>, now: number): boolean {
    if (tenant.demotedUntil > now) return true;
    for (const call of tenant.inFlight.values()) if (call.movedOff === "long") return true;
    return false;
  }

  /** Animas whose calls go to each process (not counting demotions). */
  animasOf(process: P): number {
    return this.animaCount.get(process) ?? 0;
  }

  private setHome(tenant: Tenant<P>, target: P): void {
    if (tenant.home) this.animaCount.set(tenant.home, (this.animaCount.get(tenant.home) ?? 1) - 1);
    tenant.home = target;
    this.animaCount.set(target, (this.animaCount.get(target) ?? 0) + 1);
  }

  private shouldMove(home: P): boolean {
    const homeAnimas = this.animasOf(home);
    return this.processes.some((other) => other !== home && other.available && homeAnimas > this.animasOf(other) + THRESHOLDS.moveAfterExtraAnimas);
  }

  /** The process that is up with the fewest calls in flight; ties to the one serving the fewest Animas. */
  private leastBusy(current: P | undefined): P {
    const up = this.processes.filter((p) => p.available);
    const candidates = up.length > 0 ? up : [...this.processes];
    // The Anima itself does not count where it is now (it is moving away).
    const animas = (p: P) => this.animasOf(p) - (p === current ? 1 : 0);
    let best = candidates[0] as P;
    for (const candidate of candidates) {
      if (candidate.load < best.load || (candidate.load === best.load && animas(candidate) < animas(best))) best = candidate;
    }
    return best;
  }
}
