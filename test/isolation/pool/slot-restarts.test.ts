import { EventEmitter } from "node:events";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ChildLink } from "../../../src/isolation/pool/child-link.js";
import { CRASH_WINDOW_MS, MAX_CRASHES_IN_WINDOW, RESTART_BACKOFF_MS, RETIRE_KILL_AFTER_MS, SlotRestarts } from "../../../src/isolation/pool/slot-restarts.js";

/**
 * When a slot of a cordon's pool starts the process replacing one it lost, and what becomes of the ones
 * it left (pool/slot-restarts.ts), on the test's clock, with stand-in processes that end when killed.
 */

interface FakeChild {
  link: ChildLink;
  killed: () => boolean;
  exit: () => void;
}

function fakeChild(): FakeChild {
  const process = new EventEmitter();
  let exited = false;
  let killed = false;
  const link = {
    process,
    get exited() {
      return exited;
    },
    kill: () => void (killed = true),
  } as unknown as ChildLink;
  return {
    link,
    killed: () => killed,
    exit: () => {
      exited = true;
      process.emit("exit", null, "SIGKILL");
    },
  };
}

describe("SlotRestarts", () => {
  let starts = 0;
  let atCap = false;
  let reports: string[] = [];
  let restarts: SlotRestarts;

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "hrtime"] });
    starts = 0;
    atCap = false;
    reports = [];
    restarts = new SlotRestarts({ closing: false, atProcessCap: () => atCap, onBackoff: (message) => reports.push(message) }, () => starts++);
  });
  afterEach(() => vi.useRealTimers());

  it(`restarts at once ${MAX_CRASHES_IN_WINDOW} times in the window; past that each restart waits, and the first wait is reported`, () => {
    for (let i = 0; i < MAX_CRASHES_IN_WINDOW; i++) {
      restarts.lost("retired");
      vi.advanceTimersByTime(0);
    }
    expect(starts).toBe(MAX_CRASHES_IN_WINDOW);
    expect(reports).toEqual([]);
    restarts.lost("stopped for a violation");
    vi.advanceTimersByTime(RESTART_BACKOFF_MS - 1);
    expect(starts).toBe(MAX_CRASHES_IN_WINDOW);
    vi.advanceTimersByTime(1);
    expect(starts).toBe(MAX_CRASHES_IN_WINDOW + 1);
    expect(reports).toEqual([
      expect.stringMatching(/lost its process 6 times in 10000 ms \(the last stopped for a violation\); each restart now waits 1000 ms/),
    ]);
    // Still in the window: waits again, reported once.
    restarts.lost("retired");
    vi.advanceTimersByTime(RESTART_BACKOFF_MS);
    expect(starts).toBe(MAX_CRASHES_IN_WINDOW + 2);
    expect(reports).toHaveLength(1);
    // Once the window has passed, a loss restarts at once again.
    vi.advanceTimersByTime(CRASH_WINDOW_MS);
    restarts.lost("retired");
    vi.advanceTimersByTime(0);
    expect(starts).toBe(MAX_CRASHES_IN_WINDOW + 3);
  });

  it("kills a retiring process at once when it has nothing in flight, when its last request ends, or after the grace", () => {
    const idle = fakeChild();
    restarts.retired(idle.link, false);
    expect(idle.killed()).toBe(true);
    const busy = fakeChild();
    restarts.retired(busy.link, true);
    expect(busy.killed()).toBe(false);
    restarts.drained(busy.link);
    expect(busy.killed()).toBe(true);
    const stuck = fakeChild();
    restarts.retired(stuck.link, true);
    vi.advanceTimersByTime(RETIRE_KILL_AFTER_MS - 1);
    expect(stuck.killed()).toBe(false);
    vi.advanceTimersByTime(1);
    expect(stuck.killed()).toBe(true);
  });

  it("at the pool's cap, the replacement waits until the process the slot left has ended", () => {
    atCap = true;
    const retiree = fakeChild();
    restarts.retired(retiree.link, true);
    restarts.lost("retired");
    vi.advanceTimersByTime(RETIRE_KILL_AFTER_MS - 1);
    expect(starts).toBe(0);
    retiree.exit();
    expect(starts).toBe(1);
  });

  it("below the cap, it starts beside one process the slot left, never beside two", () => {
    const first = fakeChild();
    restarts.retired(first.link, true);
    restarts.lost("retired");
    vi.advanceTimersByTime(0);
    expect(starts).toBe(1);
    const second = fakeChild();
    restarts.retired(second.link, true);
    restarts.lost("retired");
    vi.advanceTimersByTime(0);
    expect(starts).toBe(1);
    second.exit();
    expect(starts).toBe(2);
  });

  it("demotes in place only when nothing the slot left is alive, and never waits for a demoted process", () => {
    expect(restarts.mayDemote).toBe(true);
    const demoted = fakeChild();
    restarts.left(demoted.link, true);
    expect(restarts.mayDemote).toBe(false);
    atCap = true;
    const crashed = fakeChild();
    crashed.exit();
    restarts.lost("ended (signal SIGSEGV)");
    vi.advanceTimersByTime(0);
    expect(starts).toBe(1); // the demoted process finishes its calls; the slot does not wait for it
    demoted.exit();
    expect(restarts.mayDemote).toBe(true);
  });
});
