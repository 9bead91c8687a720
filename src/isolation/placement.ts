/**
 * Where each Anima's calls run: which sandbox process, and at what CPU priority. Pure bookkeeping on what
 * the host itself measured (when each call was sent and when it ended); nothing a sandbox process says
 * enters it. Used by `SandboxPool`.
 *
 * Invariants:
 *  - An Anima's calls go to one process at a time (its warm isolates live there). It moves only while it
 *    has no call in flight, and the pool then drops its warm isolates in the process it left.
 *  - New Animas go to the process with the fewest calls in flight, ties to the one serving the fewest
 *    Animas: first calls that come one at a time spread evenly.
 *  - An idle Anima moves when the spread has become uneven: its process serves more than
 *    `MOVE_AFTER_EXTRA_ANIMAS` Animas more than another that is up (after a restart, say). Busy time is
 *    not a reason to move: wall time counts calls that wait on the network as much as spinning ones,
 *    and a move costs the Anima its warm isolates; a busy neighbour is dealt with by demotion instead.
 *  - An Anima is over its share when it has a call running for `LONG_CALL_MS` or more in a process that
 *    the host measured busy (`demoteLongCallsOn`, from /proc): its calls then go to the low-priority
 *    process until `DEMOTED_FOR_MS` after that. A spinning tool competes for the cores at a lower
 *    priority, and quiet Animas' short calls are served first. A long call that waits (on the network,
 *    a timer) leaves its process idle and demotes nobody.
 */

/** What placement needs of a process. */
export interface Slot {
  readonly index: number;
  /** Running or starting. */
  readonly available: boolean;
  /** Requests in flight there now. */
  readonly load: number;
}

/** A call this long makes its Anima "over its share", ms. */
export const LONG_CALL_MS = 250;
/** How long an Anima stays on the low-priority process after its last long call, ms. */
export const DEMOTED_FOR_MS = 10_000;
const MOVE_AFTER_EXTRA_ANIMAS = 8;

interface Tenant<P> {
  home: P | undefined;
  /** Its calls in flight, by request id: where each runs and since when. */
  inFlight: Map<number, { process: P; startedAt: number }>;
  demotedUntil: number;
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
      tenant = { home: undefined, inFlight: new Map(), demotedUntil: 0 };
      this.tenants.set(anima, tenant);
    }
    if (tenant.demotedUntil > now) return { target: this.lowPriority(), demoted: true };
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

  started(anima: string, id: number, process: P, now: number): void {
    this.tenants.get(anima)?.inFlight.set(id, { process, startedAt: now });
  }

  /** True when a call has been running on `process` for `LONG_CALL_MS` or more. */
  hasLongCallOn(process: P, now: number): boolean {
    for (const tenant of this.tenants.values()) {
      for (const call of tenant.inFlight.values()) if (call.process === process && now - call.startedAt >= LONG_CALL_MS) return true;
    }
    return false;
  }

  /** `process` was measured busy: every Anima with a long call running there is over its share. */
  demoteLongCallsOn(process: P, now: number): void {
    let demoted = false;
    for (const tenant of this.tenants.values()) {
      for (const call of tenant.inFlight.values()) {
        if (call.process !== process || now - call.startedAt < LONG_CALL_MS) continue;
        tenant.demotedUntil = now + DEMOTED_FOR_MS;
        demoted = true;
      }
    }
    // Started now, so that it is up by the demoted Anima's next call.
    if (demoted) this.lowPriority();
  }

  /** Call `id` of `anima` has ended. */
  finished(anima: string, id: number): void {
    this.tenants.get(anima)?.inFlight.delete(id);
  }

  /** The process `anima`'s calls go to (not counting a demotion), if it has made any. */
  homeOf(anima: string): P | undefined {
    return this.tenants.get(anima)?.home;
  }

  isDemoted(anima: string, now: number): boolean {
    return (this.tenants.get(anima)?.demotedUntil ?? 0) > now;
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
    return this.processes.some((other) => other !== home && other.available && homeAnimas > this.animasOf(other) + MOVE_AFTER_EXTRA_ANIMAS);
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
