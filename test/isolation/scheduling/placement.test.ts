import { describe, expect, it } from "vitest";
import { DEMOTED_FOR_MS, LONG_CALL_MS, MAX_DEMOTION_DOUBLINGS, Placement, type Slot } from "../../../src/isolation/scheduling/placement.js";

class FakeProcess implements Slot {
  available = true;
  load = 0;
  constructor(readonly index: number) {}
}

function setup(count = 2) {
  const processes = Array.from({ length: count }, (_, i) => new FakeProcess(i));
  const low = new FakeProcess(count);
  let lowStarted = 0;
  const placement = new Placement(processes, () => {
    lowStarted++;
    return low;
  });
  return { processes, low, placement, lowStarted: () => lowStarted };
}

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
    const { processes, low, placement, lowStarted } = setup();
    const home = placement.route("noisy", 0).target;
    placement.route("quiet", 0);
    placement.started("noisy", 1, home, 0);
    placement.started("quiet", 2, home, LONG_CALL_MS - 10);
    expect(placement.hasLongCallOn(home, LONG_CALL_MS)).toBe(true);
    expect(lowStarted()).toBe(0);
    placement.demoteLongCallsOn(home, LONG_CALL_MS);
    expect(lowStarted()).toBe(1); // started at once, to be up by the next call
    expect(placement.route("noisy", LONG_CALL_MS + 1)).toMatchObject({ target: low, demoted: true });
    // Quiet's call was short: it stays home.
    expect(placement.route("quiet", LONG_CALL_MS + 1).target).not.toBe(low);
    placement.finished("noisy", 1, 0);
    expect(placement.route("noisy", LONG_CALL_MS + DEMOTED_FOR_MS + 1)).toMatchObject({ target: home, demoted: false });
    expect(processes).toContain(home);
  });

  it("after a demotion in place: the long call's Anima stays demoted while it runs and for a while after; a short call's Anima does not", () => {
    const { processes, low, placement } = setup();
    (processes[1] as FakeProcess).available = false; // both Animas share the first process
    const home = placement.route("noisy", 0).target;
    expect(placement.route("quiet", 0).target).toBe(home);
    (processes[1] as FakeProcess).available = true;
    placement.started("noisy", 1, home, 0);
    placement.started("quiet", 2, home, LONG_CALL_MS - 10);
    expect([...placement.demoteLongCallsOn(home, LONG_CALL_MS)]).toEqual(["noisy"]);
    placement.movedOff(home, LONG_CALL_MS, new Set(["noisy"]));
    // The moved calls no longer count for the slot, which now holds a fresh process.
    expect(placement.hasLongCallOn(home, 10 * LONG_CALL_MS)).toBe(false);
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
    const { processes, low, placement } = setup();
    (processes[1] as FakeProcess).available = false; // the three Animas share the first process
    const home = placement.route("spinner", 0).target;
    expect(placement.route("quiet", 0).target).toBe(home);
    expect(placement.route("other", 0).target).toBe(home);
    placement.started("spinner", 1, home, 100);
    placement.started("quiet", 2, home, 0); // started first, then slowed: long too by the reading
    // A call may be long only because it waited behind another's: nobody is judged yet.
    expect(placement.demoteLongCallsOn(home, 400).size).toBe(0);
    expect(placement.route("spinner", 401).demoted).toBe(false);
    expect(placement.route("quiet", 401).demoted).toBe(false);
    // The quiet call has ended by the next reading; the spinner's still runs: it is over its share.
    placement.finished("quiet", 2, 450);
    placement.started("other", 3, home, 500);
    expect([...placement.demoteLongCallsOn(home, 650)]).toEqual(["spinner"]);
    expect(placement.route("spinner", 651)).toMatchObject({ target: low, demoted: true });
    expect(placement.route("quiet", 651)).toMatchObject({ target: home, demoted: false });
    // Two long calls again (other's is long now): held, then both judged if both still run.
    expect([...placement.demoteLongCallsOn(home, 800)]).toEqual([]);
    const judged = placement.demoteLongCallsOn(home, 1_050);
    expect([...judged].sort()).toEqual(["other", "spinner"]);
    // Moved off with the process: only the Animas judged are held for their calls.
    placement.movedOff(home, 1_050, new Set(["spinner"]));
    placement.finished("other", 3, 1_100);
    expect(placement.isDemoted("other", 1_050 + DEMOTED_FOR_MS + 1)).toBe(false);
    expect(placement.isDemoted("spinner", 1_050 + DEMOTED_FOR_MS + 1)).toBe(true); // its call still runs
  });

  it("counts a call's time from when it was sent, when it waited for its process to start", () => {
    const { placement } = setup();
    const home = placement.route("quiet", 0).target;
    placement.started("quiet", 1, home, 0);
    placement.sent("quiet", 1, 300); // the process took 300 ms to start
    expect(placement.hasLongCallOn(home, 400)).toBe(false);
    expect(placement.demoteLongCallsOn(home, 400).size).toBe(0);
    expect(placement.hasLongCallOn(home, 300 + LONG_CALL_MS)).toBe(true);
  });

  it("keeps an Anima demoted twice as long each time its long call gets a process demoted in place, up to a cap", () => {
    const { placement } = setup();
    const periods: number[] = [];
    let now = 0;
    for (let time = 1; time <= MAX_DEMOTION_DOUBLINGS + 2; time++) {
      const home = placement.route("noisy", now).target;
      placement.started("noisy", time, home, now);
      now += LONG_CALL_MS;
      placement.movedOff(home, now, placement.demoteLongCallsOn(home, now));
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

  it("counts the time the other calls of a process spent there since it last asked, long calls aside", () => {
    const { placement } = setup();
    const home = placement.route("a", 0).target;
    placement.route("b", 0);
    expect(placement.callTimeOn(home, 1_000).shortMs).toBe(0); // opens the window at 1,000
    placement.started("a", 1, home, 900); // long by 1,250, counted from the window's start
    placement.started("b", 2, home, 1_100);
    placement.finished("b", 2, 1_150); // 50 ms
    placement.started("b", 3, home, 1_200); // in flight: 50 ms so far
    const first = placement.callTimeOn(home, 1_250);
    expect(first.shortMs).toBe(100);
    expect(first.windowMs).toBe(250);
    // Per Anima, long calls included: a's call from the window's start, b's two calls.
    expect(Object.fromEntries(first.byAnima)).toEqual({ a: 250, b: 100 });
    // A new window: only what happened since.
    const second = placement.callTimeOn(home, 1_300);
    expect(second.shortMs).toBe(50);
    expect(Object.fromEntries(second.byAnima)).toEqual({ a: 50, b: 50 });
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
    const { low, placement } = setup();
    const home = placement.route("reader", 0).target;
    const quietHome = placement.route("quiet", 0).target;
    placement.callTimeOn(home, 1_000); // opens the window
    backToBack(placement, "reader", home, 1_000, 1_250);
    const first = placement.callTimeOn(home, 1_250);
    expect(first.byAnima.get("reader")).toBe(240);
    expect(first.hadLongCall).toBe(false);
    // Alone in the pool: nobody to make room for.
    placement.judgeBackToBack(home, first, true, new Set(["reader"]), 1_250);
    expect(placement.route("reader", 1_260).target).toBe(home);
    // Not measured busy: nothing to judge.
    backToBack(placement, "reader", home, 1_250, 1_500);
    placement.judgeBackToBack(home, placement.callTimeOn(home, 1_500), false, new Set(["reader", "quiet"]), 1_500);
    expect(placement.route("reader", 1_510).target).toBe(home);
    backToBack(placement, "reader", home, 1_500, 1_750);
    placement.started("quiet", 9, quietHome, 1_600);
    placement.finished("quiet", 9, 1_601);
    placement.judgeBackToBack(home, placement.callTimeOn(home, 1_750), true, new Set(["reader", "quiet"]), 1_750);
    expect(placement.route("reader", 1_760)).toMatchObject({ target: low, demoted: true });
    expect(placement.route("quiet", 1_760)).toMatchObject({ target: quietHome, demoted: false });
    expect(placement.route("reader", 1_750 + DEMOTED_FOR_MS + 1)).toMatchObject({ target: home, demoted: false });
  });

  it("judges back to back one reading later when another Anima's call in flight there may turn long, and only if none did", () => {
    const { low, placement } = setup(1);
    const home = placement.route("often", 0).target;
    placement.route("other", 0);
    placement.callTimeOn(home, 1_000);
    backToBack(placement, "often", home, 1_000, 1_250);
    placement.started("other", 100, home, 1_200); // in flight at the reading, 50 ms old
    placement.judgeBackToBack(home, placement.callTimeOn(home, 1_250), true, new Set(["often", "other"]), 1_250);
    expect(placement.route("often", 1_260).demoted).toBe(false);
    // It ended short: the judgment stands at the next reading, busy or not.
    placement.finished("other", 100, 1_300);
    placement.judgeBackToBack(home, placement.callTimeOn(home, 1_500), false, new Set(["other"]), 1_500);
    expect(placement.route("often", 1_510)).toMatchObject({ target: low, demoted: true });
    expect(placement.route("other", 1_510).demoted).toBe(false);
  });

  it("judges nobody back to back in a window with a long call there: the others' calls waited behind it", () => {
    const { low, placement } = setup(1);
    const home = placement.route("quiet", 0).target;
    placement.route("spinner", 0);
    placement.callTimeOn(home, 1_000);
    // The quiet Anima's calls, slowed by the spinner's, are in flight almost all the time.
    backToBack(placement, "quiet", home, 1_000, 1_250);
    placement.started("spinner", 100, home, 1_100); // not long yet by 1,250: the judgment waits
    placement.judgeBackToBack(home, placement.callTimeOn(home, 1_250), true, new Set(["quiet", "spinner"]), 1_250);
    expect(placement.route("quiet", 1_260).demoted).toBe(false);
    backToBack(placement, "quiet", home, 1_250, 1_500);
    const second = placement.callTimeOn(home, 1_500);
    expect(second.hadLongCall).toBe(true); // the spinner's call, 400 ms old: the held judgment falls
    placement.judgeBackToBack(home, second, true, new Set(["quiet", "spinner"]), 1_500);
    expect(placement.route("quiet", 1_510)).toMatchObject({ target: home, demoted: false });
    // A long call that ended within a window counts for it.
    placement.finished("spinner", 100, 1_600);
    backToBack(placement, "quiet", home, 1_500, 1_750);
    const third = placement.callTimeOn(home, 1_750);
    expect(third.hadLongCall).toBe(true);
    placement.judgeBackToBack(home, third, true, new Set(["quiet", "spinner"]), 1_750);
    expect(placement.route("quiet", 1_760)).toMatchObject({ target: home, demoted: false });
    // The spinner itself is the long-call rule's to judge (not called here).
    expect(placement.route("spinner", 1_760).target).not.toBe(low);
  });

  it("does not count calls that only come often: below the share of the window, nobody is demoted", () => {
    const { placement } = setup();
    const home = placement.route("often", 0).target;
    placement.route("quiet", 0);
    placement.callTimeOn(home, 0);
    for (let window = 0; window < 3; window++) {
      for (let id = 1; id <= 10; id++) {
        const start = window * 250 + id * 25 - 25;
        placement.started("often", window * 10 + id, home, start);
        placement.finished("often", window * 10 + id, start + 20); // 20 of every 25 ms: 80 %
      }
      const reading = placement.callTimeOn(home, (window + 1) * 250);
      expect(reading.byAnima.get("often")).toBe(200);
      placement.judgeBackToBack(home, reading, true, new Set(["often", "quiet"]), (window + 1) * 250);
    }
    expect(placement.route("often", 760).demoted).toBe(false);
  });

  it("sends calls of a process that is down to one that is up", () => {
    const { processes, placement } = setup();
    const home = placement.route("a", 0).target as FakeProcess;
    home.available = false;
    const route = placement.route("a", 1);
    expect(route.target).not.toBe(home);
    expect(processes).toContain(route.target);
  });
});
