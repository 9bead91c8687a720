import { describe, expect, it } from "vitest";
import { type Decisions, type HeldJudgments, NOTHING_HELD, THRESHOLDS, judgeReadings } from "../../../src/isolation/scheduling/judge.js";
import { Placement, type Slot } from "../../../src/isolation/scheduling/placement.js";

const { longCallMs: LONG_CALL_MS, demotedForMs: DEMOTED_FOR_MS, maxDemotionDoublings: MAX_DEMOTION_DOUBLINGS } = THRESHOLDS;

class FakeProcess implements Slot {
  available = true;
  load = 0;
  constructor(readonly index: number) {}
}

/**
 * Placement with the judge, as CordonPool drives them: `judge(process, now, busy)` reads every process
 * (their call windows; only `process` has a CPU reading: a whole core over the last 250 ms, or nothing),
 * judges, and carries out the Anima demotions. Demotions in place are the test's to carry out
 * (`placement.movedOff`).
 */
function setup(count = 2) {
  const processes = Array.from({ length: count }, (_, i) => new FakeProcess(i));
  const low = new FakeProcess(count);
  let lowStarted = 0;
  const placement = new Placement(processes, () => {
    lowStarted++;
    return low;
  });
  let held: HeldJudgments = NOTHING_HELD;
  const judge = (process: FakeProcess, now: number, busy: boolean): Decisions => {
    const readings = [...processes, low].map((p) => ({
      slot: p.index,
      lowPriority: p === low,
      readyAtMs: -10_000,
      cpu: p === process ? { sinceMs: now - 250, offMainMs: busy ? 250 : 0, treeMs: busy ? 250 : 0 } : undefined,
      ...placement.callWindowOn(p, now),
      relayed: [],
    }));
    const decisions = judgeReadings({ nowMs: now, lastDemotedInPlaceAtMs: Number.NEGATIVE_INFINITY, processes: readings }, held);
    held = decisions.held;
    for (const { anima, untilMs } of decisions.demote) placement.demote(anima, untilMs);
    return decisions;
  };
  return { processes, low, placement, judge, lowStarted: () => lowStarted };
}
const demoted = (decisions: Decisions) => decisions.demote.map(({ anima }) => anima).sort();

describe("Placement", () => {
  it("spreads first calls that come one at a time evenly, and keeps each Anima where it is", () => {
    const { processes, placement } = setup();
    for (let i = 0; i < 10; i++) placement.route(`a${i}`, 0);
    expect(processes.map((p) => placement.animasOf(p))).toEqual([5, 5]);
    const home = placement.route("a3", 1).target;
    expect(placement.route("a3", 2).target).toBe(home);
  });

  it("sends a new Anima to the process with the fewest calls in flight", () => {
    const { processes, placement } = setup();
    (processes[0] as FakeProcess).load = 3;
    expect(placement.route("new", 0).target).toBe(processes[1]);
  });

  it("moves an idle Anima off a process that serves many more Animas, and says where it left", () => {
    const { processes, placement } = setup();
    const [first, second] = processes as [FakeProcess, FakeProcess];
    second.available = false; // everyone lands on the first while the second is down
    for (let i = 0; i < 20; i++) placement.route(`a${i}`, 0);
    second.available = true;
    const moved = placement.route("a0", 1);
    expect(moved).toMatchObject({ target: second, left: first });
    expect([placement.animasOf(first), placement.animasOf(second)]).toEqual([19, 1]);
  });

  it("never moves an Anima with a call in flight", () => {
    const { processes, placement } = setup();
    const [, second] = processes as [FakeProcess, FakeProcess];
    second.available = false;
    for (let i = 0; i < 20; i++) placement.route(`a${i}`, 0);
    placement.started("a0", 1, processes[0] as FakeProcess, 0);
    second.available = true;
    expect(placement.route("a0", 1).target).toBe(processes[0]);
  });

  it("sends the calls of an Anima whose long call kept its process busy to the low-priority process, for a while", () => {
    const { processes, low, placement, judge, lowStarted } = setup();
    const home = placement.route("noisy", 0).target;
    placement.route("quiet", 0);
    placement.started("noisy", 1, home, 0);
    placement.started("quiet", 2, home, LONG_CALL_MS - 10);
    expect(lowStarted()).toBe(0);
    expect(demoted(judge(home, LONG_CALL_MS, true))).toEqual(["noisy"]);
    expect(lowStarted()).toBe(1); // started at once, to be up by the next call
    expect(placement.route("noisy", LONG_CALL_MS + 1)).toMatchObject({ target: low, demoted: true });
    // Quiet's call was short: it stays home.
    expect(placement.route("quiet", LONG_CALL_MS + 1).target).not.toBe(low);
    placement.finished("noisy", 1, 0);
    expect(placement.route("noisy", LONG_CALL_MS + DEMOTED_FOR_MS + 1)).toMatchObject({ target: home, demoted: false });
    expect(processes).toContain(home);
  });

  it("does not judge a call over its share for the grace it was given (a Python tool's interpreter starting), only after", () => {
    const { placement, judge } = setup();
    const home = placement.route("python", 0).target;
    placement.started("python", 1, home, 0, 5_000);
    // Long by the clock, on a busy process: within its grace it is no one's use yet.
    expect(demoted(judge(home, LONG_CALL_MS * 4, true))).toEqual([]);
    expect(placement.route("python", LONG_CALL_MS * 4 + 1)).toMatchObject({ target: home, demoted: false });
    expect(demoted(judge(home, 5_000 + LONG_CALL_MS, true))).toEqual(["python"]);
  });

  it("after a demotion in place: the long call's Anima stays demoted while it runs and for a while after; a short call's Anima does not", () => {
    const { processes, low, placement, judge } = setup();
    (processes[1] as FakeProcess).available = false; // both Animas share the first process
    const home = placement.route("noisy", 0).target;
    expect(placement.route("quiet", 0).target).toBe(home);
    (processes[1] as FakeProcess).available = true;
    placement.started("noisy", 1, home, 0);
    placement.started("quiet", 2, home, LONG_CALL_MS - 10);
    const decisions = judge(home, LONG_CALL_MS, true);
    expect(demoted(decisions)).toEqual(["noisy"]);
    expect(decisions.demoteInPlace).toEqual([{ slot: home.index, longCallIds: [1] }]);
    placement.movedOff(home, new Set([1]));
    // The moved calls no longer count for the slot, which now holds a fresh process.
    expect(placement.callWindowOn(home, 10 * LONG_CALL_MS).inFlight).toEqual([]);
    placement.finished("quiet", 2, LONG_CALL_MS + 5);
    expect(placement.route("quiet", LONG_CALL_MS + 6)).toMatchObject({ target: home, demoted: false });
    // Still running long after the demotion would have run out: still demoted.
    const later = LONG_CALL_MS + DEMOTED_FOR_MS + 1_000;
    expect(placement.isDemoted("noisy", later)).toBe(true);
    expect(placement.route("noisy", later)).toMatchObject({ target: low, demoted: true });
    placement.finished("noisy", 1, later);
    expect(placement.isDemoted("noisy", later + DEMOTED_FOR_MS - 1)).toBe(true);
    expect(placement.route("noisy", later + DEMOTED_FOR_MS + 1)).toMatchObject({ target: home, demoted: false });
  });

  it("when several Animas have long calls there, judges at the next reading those whose long call still runs", () => {
    const { processes, low, placement, judge } = setup();
    (processes[1] as FakeProcess).available = false; // the three Animas share the first process
    const home = placement.route("spinner", 0).target;
    expect(placement.route("quiet", 0).target).toBe(home);
    expect(placement.route("other", 0).target).toBe(home);
    placement.started("spinner", 1, home, 100);
    placement.started("quiet", 2, home, 0); // started first, then slowed: long too by the reading
    // A call may be long only because it waited behind another's: nobody is judged yet.
    expect(demoted(judge(home, 400, true))).toEqual([]);
    expect(placement.route("spinner", 401).demoted).toBe(false);
    expect(placement.route("quiet", 401).demoted).toBe(false);
    // The quiet call has ended by the next reading; the spinner's still runs: it is over its share.
    placement.finished("quiet", 2, 450);
    placement.started("other", 3, home, 500);
    expect(demoted(judge(home, 650, true))).toEqual(["spinner"]);
    expect(placement.route("spinner", 651)).toMatchObject({ target: low, demoted: true });
    expect(placement.route("quiet", 651)).toMatchObject({ target: home, demoted: false });
    // Two long calls again (other's is long now): held, then both judged if both still run.
    expect(demoted(judge(home, 800, true))).toEqual([]);
    expect(demoted(judge(home, 1_050, true))).toEqual(["other", "spinner"]);
    // Moved off with the process: only the Anima of the long call named stays demoted for it.
    placement.movedOff(home, new Set([1]));
    placement.finished("other", 3, 1_100);
    expect(placement.isDemoted("other", 1_050 + DEMOTED_FOR_MS + 1)).toBe(false);
    expect(placement.isDemoted("spinner", 1_050 + DEMOTED_FOR_MS + 1)).toBe(true); // its call still runs
  });

  it("counts a call's time from when it was sent, when it waited for its process to start", () => {
    const { placement, judge } = setup();
    const home = placement.route("quiet", 0).target;
    placement.started("quiet", 1, home, 0);
    placement.sent("quiet", 1, 300); // the process took 300 ms to start
    expect(placement.callWindowOn(home, 350).inFlight).toEqual([{ id: 1, anima: "quiet", startedAtMs: 300 }]);
    expect(demoted(judge(home, 400, true))).toEqual([]);
    expect(demoted(judge(home, 300 + LONG_CALL_MS, true))).toEqual(["quiet"]);
  });

  it("keeps an Anima demoted twice as long each time its long call gets a process demoted in place, up to a cap", () => {
    const { placement, judge } = setup();
    const periods: number[] = [];
    let now = 0;
    for (let time = 1; time <= MAX_DEMOTION_DOUBLINGS + 2; time++) {
      const home = placement.route("noisy", now).target;
      placement.started("noisy", time, home, now);
      now += LONG_CALL_MS;
      placement.movedOff(home, new Set(judge(home, now, true).demoteInPlace[0]?.longCallIds));
      now += 1_000;
      placement.finished("noisy", time, now);
      const ended = now;
      while (placement.isDemoted("noisy", now)) now += 1_000;
      periods.push(now - ended);
    }
    expect(periods.slice(0, 3)).toEqual([DEMOTED_FOR_MS, 2 * DEMOTED_FOR_MS, 4 * DEMOTED_FOR_MS]);
    expect(periods.at(-1)).toBe(DEMOTED_FOR_MS * 2 ** MAX_DEMOTION_DOUBLINGS);
    expect(periods.at(-2)).toBe(DEMOTED_FOR_MS * 2 ** MAX_DEMOTION_DOUBLINGS);
  });

  it("reads the calls of a process since it last asked: those that ended there, and those in flight", () => {
    const { placement } = setup();
    const home = placement.route("a", 0).target;
    placement.route("b", 0);
    // Opens the window at 1,000.
    expect(placement.callWindowOn(home, 1_000)).toEqual({ windowStartMs: 1_000, endedCallMs: [], longestEndedCallMs: 0, inFlight: [] });
    placement.started("a", 1, home, 900);
    placement.started("b", 2, home, 1_100);
    placement.finished("b", 2, 1_150); // 50 ms
    placement.started("b", 3, home, 1_200);
    placement.started("b", 4, home, 700);
    placement.finished("b", 4, 1_050); // 350 ms long, 50 of them in the window
    expect(placement.callWindowOn(home, 1_250)).toEqual({
      windowStartMs: 1_000,
      endedCallMs: [{ anima: "b", ms: 100 }],
      longestEndedCallMs: 350,
      inFlight: [
        { id: 1, anima: "a", startedAtMs: 900 },
        { id: 3, anima: "b", startedAtMs: 1_200 },
      ],
    });
    // A new window: only what happened since.
    placement.finished("b", 3, 1_275);
    expect(placement.callWindowOn(home, 1_300)).toEqual({
      windowStartMs: 1_250,
      endedCallMs: [{ anima: "b", ms: 25 }],
      longestEndedCallMs: 75,
      inFlight: [{ id: 1, anima: "a", startedAtMs: 900 }],
    });
  });

  /** `anima`'s calls on `process` back to back over [from, to): 24 ms each, 1 ms apart (96 % of the time). */
  function backToBack(placement: Placement<FakeProcess>, anima: string, process: FakeProcess, from: number, to: number): void {
    for (let start = from; start + 24 <= to; start += 25) {
      const id = nextId++;
      placement.started(anima, id, process, start);
      placement.finished(anima, id, start + 24);
    }
  }
  let nextId = 1;

  it("demotes an Anima whose short calls kept a busy process occupied back to back, while another Anima has calls", () => {
    const { low, placement, judge } = setup();
    const home = placement.route("reader", 0).target;
    const quietHome = placement.route("quiet", 0).target;
    judge(home, 1_000, true); // opens the windows
    backToBack(placement, "reader", home, 1_000, 1_250);
    // Alone in the pool: nobody to make room for.
    expect(demoted(judge(home, 1_250, true))).toEqual([]);
    expect(placement.route("reader", 1_260).target).toBe(home);
    // Not measured busy: nothing to judge.
    backToBack(placement, "reader", home, 1_250, 1_500);
    placement.started("quiet", 8, quietHome, 1_400);
    placement.finished("quiet", 8, 1_401);
    expect(demoted(judge(home, 1_500, false))).toEqual([]);
    expect(placement.route("reader", 1_510).target).toBe(home);
    backToBack(placement, "reader", home, 1_500, 1_750);
    placement.started("quiet", 9, quietHome, 1_600);
    placement.finished("quiet", 9, 1_601);
    expect(judge(home, 1_750, true).demote).toMatchObject([{ anima: "reader", rule: "back to back" }]);
    expect(placement.route("reader", 1_760)).toMatchObject({ target: low, demoted: true });
    expect(placement.route("quiet", 1_760)).toMatchObject({ target: quietHome, demoted: false });
    expect(placement.route("reader", 1_750 + DEMOTED_FOR_MS + 1)).toMatchObject({ target: home, demoted: false });
  });

  it("judges back to back one reading later when another Anima's call in flight there may turn long, and only if none did", () => {
    const { low, placement, judge } = setup(1);
    const home = placement.route("often", 0).target;
    placement.route("other", 0);
    judge(home, 1_000, true);
    backToBack(placement, "often", home, 1_000, 1_250);
    placement.started("other", 100, home, 1_200); // in flight at the reading, 50 ms old
    expect(demoted(judge(home, 1_250, true))).toEqual([]);
    expect(placement.route("often", 1_260).demoted).toBe(false);
    // It ended short: the judgment stands at the next reading, busy or not.
    placement.finished("other", 100, 1_300);
    expect(judge(home, 1_500, false).demote).toMatchObject([{ anima: "often", rule: "back to back, a reading later" }]);
    expect(placement.route("often", 1_510)).toMatchObject({ target: low, demoted: true });
    expect(placement.route("other", 1_510).demoted).toBe(false);
  });

  it("judges nobody back to back in a window with a long call there: the others' calls waited behind it", () => {
    const { low, placement, judge } = setup(1);
    const home = placement.route("quiet", 0).target;
    placement.route("spinner", 0);
    judge(home, 1_000, true);
    // The quiet Anima's calls, slowed by the spinner's, are in flight almost all the time.
    backToBack(placement, "quiet", home, 1_000, 1_250);
    placement.started("spinner", 100, home, 1_100); // not long yet by 1,250: the judgment waits
    expect(demoted(judge(home, 1_250, true))).toEqual([]);
    expect(placement.route("quiet", 1_260).demoted).toBe(false);
    // The spinner's call is 400 ms old: the held judgment falls; the spinner is the long-call rule's.
    backToBack(placement, "quiet", home, 1_250, 1_500);
    expect(judge(home, 1_500, true).demote).toMatchObject([{ anima: "spinner", rule: "long call" }]);
    expect(placement.route("quiet", 1_510)).toMatchObject({ target: home, demoted: false });
    // A long call that ended within a window counts for it.
    placement.finished("spinner", 100, 1_600);
    backToBack(placement, "quiet", home, 1_500, 1_750);
    expect(demoted(judge(home, 1_750, true))).toEqual([]);
    expect(placement.route("quiet", 1_760)).toMatchObject({ target: home, demoted: false });
    expect(placement.route("spinner", 1_760).target).toBe(low);
  });

  it("does not count calls that only come often: below the share of the window, nobody is demoted", () => {
    const { placement, judge } = setup();
    const home = placement.route("often", 0).target;
    const quietHome = placement.route("quiet", 0).target;
    judge(home, 0, true);
    for (let window = 0; window < 3; window++) {
      for (let id = 1; id <= 10; id++) {
        const start = window * 250 + id * 25 - 25;
        placement.started("often", window * 10 + id, home, start);
        placement.finished("often", window * 10 + id, start + 20); // 20 of every 25 ms: 80 %
      }
      placement.started("quiet", 1_000 + window, quietHome, window * 250 + 100);
      placement.finished("quiet", 1_000 + window, window * 250 + 101);
      expect(demoted(judge(home, (window + 1) * 250, true))).toEqual([]);
    }
    expect(placement.route("often", 760).demoted).toBe(false);
  });

  it("sends calls of a process that is down to one that is up", () => {
    const { processes, placement } = setup();
    const home = placement.route("a", 0).target;
    home.available = false;
    const route = placement.route("a", 1);
    expect(route.target).not.toBe(home);
    expect(processes).toContain(route.target);
  });
});
