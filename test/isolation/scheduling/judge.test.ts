import { describe, expect, it } from "vitest";
import {
  type CallInFlight,
  type DemotionRule,
  type HeldJudgments,
  NOTHING_HELD,
  type ProcessReading,
  THRESHOLDS,
  demotedAfterInPlaceMs,
  judgeReadings,
} from "../../../src/isolation/scheduling/judge.js";

/**
 * The judge on fake readings, one row per rule of docs/scheduling.md (and its edges). Every reading is
 * at `NOW`, its process's previous one a full window (250 ms) before, unless the row says otherwise.
 */
const NOW = 100_000;
const WINDOW_MS = THRESHOLDS.readEveryMs;

/** A process ready long ago, read a window ago, with no calls: override what the row is about. */
function proc(reading: Partial<ProcessReading> & { cores?: number; treeCores?: number } = {}): ProcessReading {
  const { cores = 0, treeCores = cores, ...rest } = reading;
  return {
    slot: 0,
    lowPriority: false,
    readyAtMs: NOW - 10_000,
    cpu: { sinceMs: NOW - WINDOW_MS, offMainMs: cores * WINDOW_MS, treeMs: treeCores * WINDOW_MS },
    windowStartMs: NOW - WINDOW_MS,
    endedCallMs: [],
    longestEndedCallMs: 0,
    inFlight: [],
    relayed: [],
    ...rest,
  };
}
/** Call `id` of `anima`, running for `ageMs` at the reading. */
const call = (id: number, anima: string, ageMs: number): CallInFlight => ({ id, anima, startedAtMs: NOW - ageMs });
/** Another Anima with a short call on another process: the pool is not the subject's alone. */
const elsewhere = proc({ slot: 1, cpu: undefined, endedCallMs: [{ anima: "quiet", ms: 5 }] });

interface Row {
  rule: string;
  processes: ProcessReading[];
  held?: HeldJudgments;
  lastDemotedInPlaceAtMs?: number;
  demote: Array<[anima: string, rule: DemotionRule]>;
  /** Slots named for demotion in place, in order, with their long calls. */
  inPlace?: Array<{ slot: number; longCallIds: number[] }>;
  heldAfter?: HeldJudgments;
}

const LONG = THRESHOLDS.longCallMs;
const heldLong = (callIds: number[]): HeldJudgments => ({ longCalls: [{ slot: 0, callIds }], backToBack: [] });
const heldBackToBack = (windowEndMs: number): HeldJudgments => ({ longCalls: [], backToBack: [{ slot: 0, windowEndMs, animas: ["reader"] }] });
/** `reader`'s calls in flight `ms` of the window (ended ones), and a short call of `other` elsewhere. */
const backToBack = (ms: number, reading: Partial<ProcessReading> & { cores?: number } = {}) => [
  proc({ cores: 1, endedCallMs: [{ anima: "reader", ms }], ...reading }),
  elsewhere,
];

const ROWS: Row[] = [
  // Long calls.
  {
    rule: "a long call (250 ms) on a busy process: its Anima is demoted, the process demoted in place",
    processes: [proc({ cores: 1, inFlight: [call(1, "spinner", LONG)] })],
    demote: [["spinner", "long call"]],
    inPlace: [{ slot: 0, longCallIds: [1] }],
  },
  { rule: "a call of 249 ms is not long", processes: [proc({ cores: 1, inFlight: [call(1, "spinner", LONG - 1)] })], demote: [] },
  { rule: "a long call on a process that is not busy (it waits): nobody", processes: [proc({ cores: 0.1, inFlight: [call(1, "waiter", 5_000)] })], demote: [] },
  // When a process is judged.
  {
    rule: "judged from 0.5 s after the process was ready",
    processes: [proc({ cores: 1, readyAtMs: NOW - 500, inFlight: [call(1, "spinner", LONG)] })],
    demote: [["spinner", "long call"]],
    inPlace: [{ slot: 0, longCallIds: [1] }],
  },
  {
    rule: "not judged 499 ms after it was ready: its start is no Anima's use",
    processes: [proc({ cores: 1, readyAtMs: NOW - 499, inFlight: [call(1, "spinner", LONG)] })],
    demote: [],
  },
  { rule: "not judged while it starts", processes: [proc({ cores: 1, readyAtMs: undefined, inFlight: [call(1, "spinner", LONG)] })], demote: [] },
  { rule: "not judged without a previous CPU reading", processes: [proc({ cpu: undefined, inFlight: [call(1, "spinner", LONG)] })], demote: [] },
  {
    rule: "not judged when its previous reading is more than two windows old",
    processes: [proc({ cpu: { sinceMs: NOW - 501, offMainMs: 501, treeMs: 501 }, inFlight: [call(1, "spinner", LONG)] })],
    demote: [],
  },
  {
    rule: "judged when its previous reading is two windows old",
    processes: [proc({ cpu: { sinceMs: NOW - 500, offMainMs: 500, treeMs: 500 }, inFlight: [call(1, "spinner", LONG)] })],
    demote: [["spinner", "long call"]],
    inPlace: [{ slot: 0, longCallIds: [1] }],
  },
  // Busy.
  {
    rule: "busy at half a core off the main thread",
    processes: [proc({ cores: 0.5, inFlight: [call(1, "spinner", LONG)] })],
    demote: [["spinner", "long call"]],
    inPlace: [{ slot: 0, longCallIds: [1] }],
  },
  {
    rule: "busy at three quarters of a core in all (main thread relaying)",
    processes: [proc({ cores: 0.1, treeCores: 0.75, inFlight: [call(1, "flood", LONG)] })],
    demote: [["flood", "long call"]],
  },
  { rule: "not busy below both", processes: [proc({ cores: 0.49, treeCores: 0.74, inFlight: [call(1, "spinner", LONG)] })], demote: [] },
  // Long calls of several Animas.
  {
    rule: "long calls of two Animas: nobody now, both calls held for the next reading",
    processes: [proc({ cores: 1, inFlight: [call(1, "spinner", 400), call(2, "slowed", 300)] })],
    demote: [],
    heldAfter: heldLong([1, 2]),
  },
  {
    rule: "a held long call still running at the next busy reading: its Anima is demoted; one that ended is not",
    processes: [proc({ cores: 1, inFlight: [call(1, "spinner", 650), call(3, "other", LONG)] })],
    held: heldLong([1, 2]),
    demote: [["spinner", "long call, a reading later"]],
    inPlace: [{ slot: 0, longCallIds: [1] }],
    heldAfter: heldLong([3]),
  },
  {
    rule: "held long calls wait through a reading that is not busy",
    processes: [proc({ cores: 0.1, inFlight: [call(1, "spinner", 650)] })],
    held: heldLong([1, 2]),
    demote: [],
    heldAfter: heldLong([1, 2]),
  },
  // Back to back.
  {
    rule: "short calls in flight 90 % of a busy window, another Anima calling: demoted",
    processes: backToBack(0.9 * WINDOW_MS),
    demote: [["reader", "back to back"]],
  },
  { rule: "in flight 89 % of the window: nobody", processes: backToBack(0.9 * WINDOW_MS - 1), demote: [] },
  {
    rule: "back to back alone in the pool: nobody to make room for",
    processes: [proc({ cores: 1, endedCallMs: [{ anima: "reader", ms: WINDOW_MS }] })],
    demote: [],
  },
  { rule: "back to back on a process that is not busy: nobody", processes: backToBack(WINDOW_MS, { cores: 0.1 }), demote: [] },
  {
    rule: "back to back in a window where a call was long (ended within it): nobody",
    processes: backToBack(WINDOW_MS, { longestEndedCallMs: LONG }),
    demote: [],
  },
  {
    rule: "back to back beside another Anima's short call in flight there: held for the next reading",
    processes: backToBack(WINDOW_MS - 10, { inFlight: [call(5, "other", 10)] }),
    demote: [],
    heldAfter: heldBackToBack(NOW),
  },
  {
    rule: "a held back-to-back judgment stands at the next reading if no call was long, busy or not",
    processes: [proc({ cores: 0 })],
    held: heldBackToBack(NOW - WINDOW_MS),
    demote: [["reader", "back to back, a reading later"]],
  },
  {
    rule: "a held back-to-back judgment falls if a call was long in the next window",
    processes: [proc({ longestEndedCallMs: 300 })],
    held: heldBackToBack(NOW - WINDOW_MS),
    demote: [],
  },
  {
    rule: "a held back-to-back judgment lapses when the next window does not follow it",
    processes: [proc()],
    held: heldBackToBack(NOW - 2 * WINDOW_MS),
    demote: [],
  },
  // Demotion in place.
  {
    rule: "not in place when the other calls account for the busy isolate threads (1 core, 0.8 of it short calls)",
    processes: [proc({ cores: 1, endedCallMs: [{ anima: "quiet", ms: 200 }], inFlight: [call(1, "spinner", LONG)] })],
    demote: [["spinner", "long call"]],
  },
  {
    rule: "in place when the long calls relayed 90 % of the capability bytes of a process busy in all",
    processes: [
      proc({
        cores: 0.1,
        treeCores: 0.8,
        inFlight: [call(1, "flood", LONG)],
        relayed: [
          { startedAtMs: NOW - LONG, bytes: 90 },
          { startedAtMs: NOW - 10, bytes: 10 },
        ],
      }),
    ],
    demote: [["flood", "long call"]],
    inPlace: [{ slot: 0, longCallIds: [1] }],
  },
  {
    rule: "not in place when they relayed less than 90 %",
    processes: [
      proc({
        cores: 0.1,
        treeCores: 0.8,
        inFlight: [call(1, "flood", LONG)],
        relayed: [
          { startedAtMs: NOW - LONG, bytes: 89 },
          { startedAtMs: NOW - 10, bytes: 11 },
        ],
      }),
    ],
    demote: [["flood", "long call"]],
  },
  {
    rule: "never the low-priority process in place",
    processes: [proc({ cores: 1, lowPriority: true, inFlight: [call(1, "spinner", LONG)] })],
    demote: [["spinner", "long call"]],
  },
  {
    rule: "not in place within 2 s of the last demotion in place",
    processes: [proc({ cores: 1, inFlight: [call(1, "spinner", LONG)] })],
    lastDemotedInPlaceAtMs: NOW - 1_999,
    demote: [["spinner", "long call"]],
  },
  {
    rule: "in place again 2 s after the last",
    processes: [proc({ cores: 1, inFlight: [call(1, "spinner", LONG)] })],
    lastDemotedInPlaceAtMs: NOW - 2_000,
    demote: [["spinner", "long call"]],
    inPlace: [{ slot: 0, longCallIds: [1] }],
  },
  {
    rule: "several processes to demote in place: named in order (the pool demotes the first it can)",
    processes: [proc({ cores: 1, inFlight: [call(1, "a", LONG)] }), proc({ slot: 1, cores: 1, inFlight: [call(2, "b", LONG), call(3, "b", 2 * LONG)] })],
    demote: [
      ["a", "long call"],
      ["b", "long call"],
    ],
    inPlace: [
      { slot: 0, longCallIds: [1] },
      { slot: 1, longCallIds: [2, 3] },
    ],
  },
];

describe("the CPU-demotion judge", () => {
  it.each(ROWS)("$rule", (row) => {
    const decisions = judgeReadings(
      { nowMs: NOW, lastDemotedInPlaceAtMs: row.lastDemotedInPlaceAtMs ?? Number.NEGATIVE_INFINITY, processes: row.processes },
      row.held ?? NOTHING_HELD,
    );
    expect(decisions.demote.map(({ anima, rule }) => [anima, rule])).toEqual(row.demote);
    for (const demotion of decisions.demote) expect(demotion.untilMs).toBe(NOW + THRESHOLDS.demotedForMs);
    expect(decisions.demoteInPlace).toEqual(row.inPlace ?? []);
    expect(decisions.held).toEqual(row.heldAfter ?? NOTHING_HELD);
  });

  it("is pure: the same readings give the same decisions, and nothing it is given changes", () => {
    const readings = {
      nowMs: NOW,
      lastDemotedInPlaceAtMs: Number.NEGATIVE_INFINITY,
      processes: [...backToBack(WINDOW_MS, { inFlight: [call(1, "x", 400), call(2, "y", 300)] })],
    };
    const held = heldLong([7]);
    const before = structuredClone({ readings, held });
    const first = judgeReadings(readings, held);
    expect(judgeReadings(readings, held)).toEqual(first);
    expect({ readings, held }).toEqual(before);
  });

  it.each([
    [1, 10_000],
    [2, 20_000],
    [3, 40_000],
    [7, 640_000],
    [8, 640_000],
  ])("an Anima whose long call got a process demoted in place the %i. time stays demoted %i ms after it ends", (times, ms) => {
    expect(demotedAfterInPlaceMs(times)).toBe(ms);
  });
});
