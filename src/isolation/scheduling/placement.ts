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
 *    a timer) leaves its process idle and demotes nobody. When more than one Anima has a long call
 *    there, one may be long only because it waited behind another's (a quiet Anima's call slowed to
 *    `LONG_CALL_MS` beside a spinning tool): they are judged at the next reading, each over its share if
 *    its long call still runs then. So is an Anima whose calls, however short, were
 *    in flight on a busy process `BACK_TO_BACK_SHARE` of the time since the last reading on average
 *    (`judgeBackToBack`: one call after another, as good as one long call), while another Anima had
 *    calls in the pool: alone it keeps its normal process. A reading in which a call on that process was
 *    long judges nobody back to back: short calls that wait behind a long call stay in flight longer,
 *    and their time then tells nothing of their own use (a quiet Anima calling often beside a spinning
 *    tool would otherwise be demoted with it). For the same reason, when another Anima has a call in
 *    flight there that is not long yet, the judgment waits for the next reading, and stands unless a
 *    call there was long by then.
 *  - A call that was running when its process was demoted in place (`movedOff`; SandboxPool) no longer
 *    counts for that process, whose slot now holds a fresh one. The Anima of a long one judged over its
 *    share stays demoted while it runs and `DEMOTED_FOR_MS` after it ends, doubled for each earlier time
 *    (`MAX_DEMOTION_DOUBLINGS`); the Animas of the others are not demoted for them.
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

/** True for a call that started at `startedAt` and is still running at `now` after `LONG_CALL_MS` or more. */
export function isLongCall(startedAt: number, now: number): boolean {
  return now - startedAt >= LONG_CALL_MS;
}
/**
 * An Anima whose calls were in flight on a busy process this share of a reading's window on average
 * (their wall times summed: concurrent calls count each) is over its share, as with a long call.
 */
export const BACK_TO_BACK_SHARE = 0.9;
/** How long an Anima stays on the low-priority process after its last long call, ms. */
export const DEMOTED_FOR_MS = 10_000;
/**
 * After the call that got its process demoted in place ends, its Anima stays demoted `DEMOTED_FOR_MS`
 * doubled for each earlier such demotion of its, up to this many doublings (10 s, 20 s, … 640 s): one
 * Anima cannot make a process of other Animas restart every few seconds.
 */
export const MAX_DEMOTION_DOUBLINGS = 6;
const MOVE_AFTER_EXTRA_ANIMAS = 8;

interface Tenant<P> {
  home: P | undefined;
  /**
   * Its calls in flight, by request id: where each runs and since when. `movedOff`: its process was
   * demoted in place while it ran, `"long"` when it was one of the long calls that made the process busy.
   */
  inFlight: Map<number, { process: P; startedAt: number; movedOff?: "long" | "short" }>;
  demotedUntil: number;
  /** How many times a long call of its made its process be demoted in place. */
  demotedInPlace: number;
}

/** What `callTimeOn` found of a process's calls over a window. */
export interface CallTime {
  /** When the window began (the previous reading), ms on the caller's clock. */
  since: number;
  windowMs: number;
  /** Wall time of the calls that were not long by the window's end, summed, ms. */
  shortMs: number;
  /** Wall time of each Anima's calls within the window, long ones included, ms. */
  byAnima: Map<string, number>;
  /** A call there was long by the window's end, or was when it ended within the window. */
  hadLongCall: boolean;
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
   * Anima, and whether one of them was long when it ended (see `callTimeOn`).
   */
  private readonly endedCallTime = new Map<P, { since: number; byAnima: Map<string, number>; longEnded: boolean }>();
  /** Per process: long calls of more than one Anima found at the last reading, whose judgment waits for the next. */
  private readonly longCallsHeld = new Map<P, Set<object>>();
  /** Per process: Animas found back to back whose judgment waits for the next reading, and when their window ended. */
  private readonly backToBackHeld = new Map<P, { windowEnd: number; animas: string[] }>();

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

  started(anima: string, id: number, process: P, now: number): void {
    this.tenants.get(anima)?.inFlight.set(id, { process, startedAt: now });
  }

  /**
   * Call `id` of `anima` waited for its process to start and was sent to it now: its time runs from now.
   * A call is what runs in the process; the wait for a fresh one (after a crash or a demotion in place,
   * slower on a loaded machine) is not a call of that Anima's running long.
   */
  sent(anima: string, id: number, now: number): void {
    const call = this.tenants.get(anima)?.inFlight.get(id);
    if (call && !call.movedOff) call.startedAt = now;
  }

  /** True when a call has been running on `process` for `LONG_CALL_MS` or more. */
  hasLongCallOn(process: P, now: number): boolean {
    for (const { call } of this.callsOn(process)) if (isLongCall(call.startedAt, now)) return true;
    return false;
  }

  /**
   * The wall time of the calls on `process` since the last time this was asked for it (calls that ended
   * meanwhile, and the part of those in flight), and starts a new window: it began at `since` and lasted
   * `windowMs`; `shortMs` leaves out its long calls in flight (the most of the process's CPU time over
   * the window that the others can account for); `byAnima` is each Anima's, long calls included;
   * `hadLongCall` says whether a call there was long by the window's end or when it ended within it.
   */
  callTimeOn(process: P, now: number): CallTime {
    const window = this.endedCallTime.get(process);
    const since = window?.since ?? now;
    const byAnima = window?.byAnima ?? new Map<string, number>();
    let shortMs = [...byAnima.values()].reduce((sum, ms) => sum + ms, 0);
    let hadLongCall = window?.longEnded ?? false;
    for (const { anima, call } of this.callsOn(process)) {
      const ms = now - Math.max(call.startedAt, since);
      byAnima.set(anima, (byAnima.get(anima) ?? 0) + ms);
      if (isLongCall(call.startedAt, now)) hadLongCall = true;
      else shortMs += ms;
    }
    this.endedCallTime.set(process, { since: now, byAnima: new Map(), longEnded: false });
    return { since, windowMs: now - since, shortMs, byAnima, hadLongCall };
  }

  /**
   * `process` was read over `window` (`callTimeOn`), and measured `busy` or not. When busy, each Anima
   * whose calls were in flight there `BACK_TO_BACK_SHARE` of it on average is over its share, if an Anima
   * other than itself is in `calling` (Animas with calls anywhere meanwhile); nobody is, in a window with
   * a long call. One that another Anima's call in flight, not long yet, may have slowed is judged at the
   * next reading: over its share unless that window had a long call (see the invariants).
   */
  judgeBackToBack(process: P, window: CallTime, busy: boolean, calling: ReadonlySet<string>, now: number): void {
    const held = this.backToBackHeld.get(process);
    this.backToBackHeld.delete(process);
    if (held !== undefined && held.windowEnd === window.since && !window.hadLongCall) {
      for (const anima of held.animas) this.demoteAnima(anima, now);
    }
    if (!busy || window.windowMs <= 0 || window.hadLongCall) return;
    const found = [...window.byAnima].filter(([anima, ms]) => ms >= BACK_TO_BACK_SHARE * window.windowMs && calling.size > (calling.has(anima) ? 1 : 0));
    const shortCallers = new Set([...this.callsOn(process)].map(({ anima }) => anima)); // none is long (no long call in the window)
    const waiting: string[] = [];
    for (const [anima] of found) {
      if (shortCallers.size > (shortCallers.has(anima) ? 1 : 0)) waiting.push(anima);
      else this.demoteAnima(anima, now);
    }
    if (waiting.length > 0) this.backToBackHeld.set(process, { windowEnd: window.since + window.windowMs, animas: waiting });
  }

  /**
   * `process` was demoted in place: the calls in flight there no longer count for it (see the
   * invariants); `judged` are the Animas `demoteLongCallsOn` found over their share at this reading.
   */
  movedOff(process: P, now: number, judged: ReadonlySet<string>): void {
    for (const [anima, tenant] of this.tenants) {
      let long = false;
      for (const call of tenant.inFlight.values()) {
        if (call.process !== process || call.movedOff) continue;
        call.movedOff = judged.has(anima) && isLongCall(call.startedAt, now) ? "long" : "short";
        long ||= call.movedOff === "long";
      }
      if (long) tenant.demotedInPlace++;
    }
  }

  /** The calls in flight that count for `process` (not those moved off it), with their Animas. */
  private *callsOn(process: P): Generator<{ anima: string; tenant: Tenant<P>; call: { startedAt: number } }> {
    for (const [anima, tenant] of this.tenants) {
      for (const call of tenant.inFlight.values()) if (call.process === process && !call.movedOff) yield { anima, tenant, call };
    }
  }

  private demoteAnima(anima: string, now: number): void {
    const tenant = this.tenants.get(anima);
    if (tenant) this.demote(tenant, now);
  }

  /** `tenant` is over its share: its calls go to the low-priority process (started now, to be up by its next call). */
  private demote(tenant: Tenant<P>, now: number): void {
    tenant.demotedUntil = Math.max(tenant.demotedUntil, now + DEMOTED_FOR_MS);
    this.lowPriority();
  }

  /**
   * `process` was measured busy: the Animas with a long call running there are over their share, and
   * are returned. When more than one Anima has one, they are held for the next reading instead: then
   * each whose long call held still runs there is over its share (see the invariants).
   */
  demoteLongCallsOn(process: P, now: number): Set<string> {
    const held = this.longCallsHeld.get(process);
    this.longCallsHeld.delete(process);
    const long = [...this.callsOn(process)].filter(({ call }) => isLongCall(call.startedAt, now));
    const animas = new Set(long.map(({ anima }) => anima));
    const judged = new Set(animas.size <= 1 ? animas : []);
    for (const { anima, call } of long) if (held?.has(call)) judged.add(anima);
    const waiting = long.filter(({ anima }) => !judged.has(anima)).map(({ call }) => call);
    if (animas.size > 1 && waiting.length > 0) this.longCallsHeld.set(process, new Set(waiting));
    for (const anima of judged) this.demoteAnima(anima, now);
    return judged;
  }

  /** Call `id` of `anima` has ended. */
  finished(anima: string, id: number, now: number): void {
    const tenant = this.tenants.get(anima);
    const call = tenant?.inFlight.get(id);
    if (!tenant || !call) return;
    tenant.inFlight.delete(id);
    if (call.movedOff === "long") {
      const doublings = Math.min(tenant.demotedInPlace - 1, MAX_DEMOTION_DOUBLINGS);
      tenant.demotedUntil = Math.max(tenant.demotedUntil, now + DEMOTED_FOR_MS * 2 ** doublings);
    }
    const window = this.endedCallTime.get(call.process);
    if (window && !call.movedOff) {
      window.byAnima.set(anima, (window.byAnima.get(anima) ?? 0) + now - Math.max(call.startedAt, window.since));
      window.longEnded ||= isLongCall(call.startedAt, now);
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
