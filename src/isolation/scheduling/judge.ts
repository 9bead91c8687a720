/**
 * The CPU-demotion judge: from one reading of a cordon's sandbox processes (their CPU time, their calls,
 * plain data the pool measured itself) to what the pool must do: which Animas are over their share (their
 * calls go to the low-priority process), which process to demote in place, or nothing. It owns every
 * threshold of scheduling (`THRESHOLDS`); docs/scheduling.md lists the rules, with why.
 *
 * Invariants:
 *  - Pure: no clock, no I/O, no state of its own. What a judgment must remember until the next reading
 *    (`HeldJudgments`) is handed back to the caller, who passes it in again; its inputs are not mutated.
 *  - Nothing a sandbox process says enters a reading: times are the host's, CPU is read from /proc.
 *  - Attribution is by wall time, which a slowed call shares with the call that slows it, so where the
 *    judge cannot tell the two apart it waits (a reading later) rather than demote the wrong Anima.
 */

const READ_EVERY_MS = 250;

/** Every threshold of CPU demotion and placement. */
export const THRESHOLDS = {
  /** How often the pool reads its processes' CPU time while calls come, ms. */
  readEveryMs: READ_EVERY_MS,
  /**
   * How long after the last call, with none in flight, the readings go on, ms: a call that then turns
   * long has a reading from before it, and is judged one reading after it turns long, not two.
   */
  readingsKeptMs: 2_000,
  /** A process whose previous reading is older than this is not judged (a stalled timer measures nothing), ms. */
  maxReadingGapMs: 2 * READ_EVERY_MS,
  /**
   * A process is judged from this long after it said it was ready, ms: its own start (the runner, each
   * Anima's first isolate there, its code compiled) is no Anima's use, and on a loaded machine the first
   * calls there run long with it.
   */
  judgedAfterReadyMs: 2 * READ_EVERY_MS,
  /**
   * A process is busy over a reading when its threads other than the main one (isolate threads: tool code
   * running) used this many cores, or its whole tree `busyTreeCores` (its main thread kept busy relaying
   * a flood of capability calls). A long call that mostly waits on the host's answers uses far less.
   */
  busyOffMainCores: 0.5,
  busyTreeCores: 0.75,
  /** A call running this long on a busy process makes its Anima over its share, ms. */
  longCallMs: 250,
  /**
   * An Anima whose calls were in flight on a busy process this fraction of a reading's window (their
   * wall times summed: concurrent calls count each) is over its share, as with a long call (0–1).
   */
  backToBackInFlightShare: 0.9,
  /** A busy process whose long calls relayed this fraction of its capability bytes is theirs to demote in place (0–1). */
  longCallsRelayedShare: 0.9,
  /** Demotions in place are this far apart at least, ms: each one starts a fresh process. */
  demoteInPlaceEveryMs: 2_000,
  /** How long an Anima over its share stays on the low-priority process after the judgment, ms. */
  demotedForMs: 10_000,
  /**
   * After its call that got a process demoted in place ends, the Anima stays demoted `demotedForMs`
   * doubled for each earlier such demotion of its, up to this many doublings (10 s, 20 s, … 640 s): one
   * Anima cannot make a process of other Animas restart every few seconds.
   */
  maxDemotionDoublings: 6,
  /**
   * A Python interpreter's boot at the start of a request that needs one (a call or a personal tool's
   * load, where the host's record says its process holds no interpreter for it) is not judged as its
   * Anima's use for this long, ms: about a boot from the process's snapshot (≈ 0.5 s measured on a loaded
   * 2-core VM; several times that on a busier machine). Once per process slot and Anima
   * (boot-allowance.ts): requests that need one meanwhile share it.
   */
  pythonBootAllowanceMs: 2_000,
  /** An Anima gets its next boot allowance on a process slot this long after its previous one began, ms (restarts renew nothing). */
  pythonBootAllowanceRenewedAfterMs: 60_000,
  /** An idle Anima moves when its process serves more than this many Animas more than another that is up. */
  moveAfterExtraAnimas: 8,
} as const;

/** A call in flight on a process at the reading (calls moved off it by a demotion in place are not its). */
export interface CallInFlight {
  /** The request id: unique on the host. */
  id: number;
  anima: string;
  startedAtMs: number;
}

/** What the pool measured of one process since its previous reading. */
export interface ProcessReading {
  /** The process's slot: the same across restarts and demotions in place. */
  slot: number;
  lowPriority: boolean;
  /** When its running child said it was ready; undefined while it starts. */
  readyAtMs: number | undefined;
  /** CPU time its tree used since its previous reading at `sinceMs`; undefined without one (first reading, /proc unreadable). */
  cpu: { sinceMs: number; offMainMs: number; treeMs: number } | undefined;
  /** Its call window began here (its previous reading; the reading's time when there was none). */
  windowStartMs: number;
  /** Wall time within the window of the calls that ended in it, per Anima (an Anima at most once). */
  endedCallMs: ReadonlyArray<{ anima: string; ms: number }>;
  /** The longest of those calls, start to end, ms (0: none). */
  longestEndedCallMs: number;
  inFlight: readonly CallInFlight[];
  /** Capability bytes it relayed since its previous reading, per request of its running child (describes too). */
  relayed: ReadonlyArray<{ startedAtMs: number; bytes: number }>;
}

export interface Readings {
  nowMs: number;
  /** When the pool last demoted a process in place; -Infinity if never. */
  lastDemotedInPlaceAtMs: number;
  /** Every process of the pool, the low-priority one too: an Anima that keeps its calls busy there stays there. */
  processes: readonly ProcessReading[];
}

/** Long calls of more than one Anima on a busy process: judged at its next busy reading with a long call. */
export interface HeldLongCalls {
  slot: number;
  callIds: readonly number[];
}

/** Animas in flight back to back beside another Anima's short call: judged at the process's next reading. */
export interface HeldBackToBack {
  slot: number;
  /** The end of the window they were found in: the next reading's window must follow it. */
  windowEndMs: number;
  animas: readonly string[];
}

/** Judgments that wait for the next reading: the caller keeps them and passes them in again. */
export interface HeldJudgments {
  longCalls: readonly HeldLongCalls[];
  backToBack: readonly HeldBackToBack[];
}

export const NOTHING_HELD: HeldJudgments = { longCalls: [], backToBack: [] };

export type DemotionRule = "long call" | "long call, a reading later" | "back to back" | "back to back, a reading later";

export interface Demotion {
  anima: string;
  /** The process where it was found over its share. */
  slot: number;
  rule: DemotionRule;
  /** Its calls go to the low-priority process until then at least. */
  untilMs: number;
}

/** A process whose long calls are what keeps it busy: lowered where it runs, a fresh process takes its slot. */
export interface DemotionInPlace {
  slot: number;
  /** The long calls of the Animas judged over their share there (their Animas stay demoted while these run). */
  longCallIds: number[];
}

export interface Decisions {
  demote: Demotion[];
  /** Best first; the pool demotes the first it can (a process not ready cannot be), and only that one. */
  demoteInPlace: DemotionInPlace[];
  held: HeldJudgments;
}

/** True for a call that started at `startedAtMs` and still runs at `nowMs`, `longCallMs` or more later. */
function isLongCall(startedAtMs: number, nowMs: number): boolean {
  return nowMs - startedAtMs >= THRESHOLDS.longCallMs;
}

/** How long an Anima stays demoted after its call that got a process demoted in place ends (its `timesDemotedInPlace`-th, from 1), ms. */
export function demotedAfterInPlaceMs(timesDemotedInPlace: number): number {
  return THRESHOLDS.demotedForMs * 2 ** Math.min(Math.max(0, timesDemotedInPlace - 1), THRESHOLDS.maxDemotionDoublings);
}

/** The one judge of CPU demotion. Processes are judged in the order given. */
export function judgeReadings(readings: Readings, held: HeldJudgments): Decisions {
  const now = readings.nowMs;
  const untilMs = now + THRESHOLDS.demotedForMs;
  const demotions: Demotion[] = [];
  const demoteInPlace: DemotionInPlace[] = [];
  const longHeld: HeldLongCalls[] = [];
  const backToBackHeld: HeldBackToBack[] = [];
  const demote = (anima: string, slot: number, rule: DemotionRule) => demotions.push({ anima, slot, rule, untilMs });
  // Animas with calls anywhere in the pool over the windows: one alone has nobody to make room for.
  const calling = new Set(readings.processes.flatMap((p) => [...p.endedCallMs.map(({ anima }) => anima), ...p.inFlight.map(({ anima }) => anima)]));

  for (const process of readings.processes) {
    const heldLong = held.longCalls.find((h) => h.slot === process.slot);
    const heldBackToBack = held.backToBack.find((h) => h.slot === process.slot);
    const cpu = process.cpu;
    const judged =
      cpu !== undefined &&
      now - cpu.sinceMs <= THRESHOLDS.maxReadingGapMs &&
      process.readyAtMs !== undefined &&
      now - process.readyAtMs >= THRESHOLDS.judgedAfterReadyMs;
    if (!judged) {
      // Not judged now: what was held stays held (a held back-to-back judgment lapses at its next reading,
      // whose window no longer follows it).
      if (heldLong) longHeld.push(heldLong);
      if (heldBackToBack) backToBackHeld.push(heldBackToBack);
      continue;
    }
    const cores = (ms: number) => ms / (now - cpu.sinceMs);
    const offMainCores = cores(cpu.offMainMs);
    const treeCores = cores(cpu.treeMs);
    const busy = offMainCores >= THRESHOLDS.busyOffMainCores || treeCores >= THRESHOLDS.busyTreeCores;
    const window = callWindow(process, now);

    // Back to back. A held judgment stands if no call was long in the window that followed it.
    if (heldBackToBack && heldBackToBack.windowEndMs === process.windowStartMs && !window.hadLongCall) {
      for (const anima of heldBackToBack.animas) demote(anima, process.slot, "back to back, a reading later");
    }
    if (busy && window.windowMs > 0 && !window.hadLongCall) {
      const found = [...window.byAnima].filter(
        ([anima, ms]) => ms >= THRESHOLDS.backToBackInFlightShare * window.windowMs && calling.size > (calling.has(anima) ? 1 : 0),
      );
      // No call in flight there is long (the window has none), but another Anima's may still turn long,
      // and would then have slowed these: their judgment waits for the next reading.
      const shortCallers = new Set(process.inFlight.map(({ anima }) => anima));
      const waiting: string[] = [];
      for (const [anima] of found) {
        if (shortCallers.size > (shortCallers.has(anima) ? 1 : 0)) waiting.push(anima);
        else demote(anima, process.slot, "back to back");
      }
      if (waiting.length > 0) backToBackHeld.push({ slot: process.slot, windowEndMs: process.windowStartMs + window.windowMs, animas: waiting });
    }

    // Long calls.
    const long = process.inFlight.filter(({ startedAtMs }) => isLongCall(startedAtMs, now));
    if (!busy || long.length === 0) {
      if (heldLong) longHeld.push(heldLong);
      continue;
    }
    const longAnimas = new Set(long.map(({ anima }) => anima));
    // One Anima's long calls: it is over its share. Several Animas': one may be long only because it
    // waited behind another's; each is judged at the next such reading, if that very call still runs.
    const judgedAnimas = new Set(longAnimas.size <= 1 ? longAnimas : []);
    for (const anima of judgedAnimas) demote(anima, process.slot, "long call");
    for (const { anima, id } of long) {
      if (judgedAnimas.has(anima) || !heldLong?.callIds.includes(id)) continue;
      judgedAnimas.add(anima);
      demote(anima, process.slot, "long call, a reading later");
    }
    const waiting = long.filter(({ anima }) => !judgedAnimas.has(anima)).map(({ id }) => id);
    if (longAnimas.size > 1 && waiting.length > 0) longHeld.push({ slot: process.slot, callIds: waiting });

    // In place, only when the long calls are what keeps the process busy: its isolate threads busy beyond
    // what the other calls could account for (each uses at most a core while it runs), or its capability
    // traffic almost all theirs.
    if (judgedAnimas.size === 0 || process.lowPriority || now - readings.lastDemotedInPlaceAtMs < THRESHOLDS.demoteInPlaceEveryMs) continue;
    const spinning = offMainCores - cores(window.shortMs) >= THRESHOLDS.busyOffMainCores;
    const relayedAll = process.relayed.reduce((sum, { bytes }) => sum + bytes, 0);
    const relayedLong = process.relayed.reduce((sum, { startedAtMs, bytes }) => sum + (isLongCall(startedAtMs, now) ? bytes : 0), 0);
    const relaying = treeCores >= THRESHOLDS.busyTreeCores && relayedLong > 0 && relayedLong >= THRESHOLDS.longCallsRelayedShare * relayedAll;
    if (spinning || relaying) {
      demoteInPlace.push({ slot: process.slot, longCallIds: long.filter(({ anima }) => judgedAnimas.has(anima)).map(({ id }) => id) });
    }
  }
  return { demote: demotions, demoteInPlace, held: { longCalls: longHeld, backToBack: backToBackHeld } };
}

/** The calls' wall time over a process's window. */
interface WindowTime {
  windowMs: number;
  /** Of the calls that were not long at the reading (ended calls all count): the most of the process's CPU the others can account for. */
  shortMs: number;
  /** Each Anima's, long calls included. */
  byAnima: Map<string, number>;
  /** A call was long at the reading, or when it ended within the window. */
  hadLongCall: boolean;
}

function callWindow(process: ProcessReading, now: number): WindowTime {
  const byAnima = new Map(process.endedCallMs.map(({ anima, ms }) => [anima, ms]));
  let shortMs = process.endedCallMs.reduce((sum, { ms }) => sum + ms, 0);
  let hadLongCall = process.longestEndedCallMs >= THRESHOLDS.longCallMs;
  for (const call of process.inFlight) {
    // A call's start may lie ahead (placement.ts `started`: a grace the host gave it): nothing yet.
    const ms = Math.max(0, now - Math.max(call.startedAtMs, process.windowStartMs));
    byAnima.set(call.anima, (byAnima.get(call.anima) ?? 0) + ms);
    if (isLongCall(call.startedAtMs, now)) hadLongCall = true;
    else shortMs += ms;
  }
  return { windowMs: now - process.windowStartMs, shortMs, byAnima, hadLongCall };
}
