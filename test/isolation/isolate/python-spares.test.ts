import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  DESCRIBED_KEPT_MS,
  PythonSpares,
  SPARE_CHURN_FORGOTTEN_MS,
  SPARE_INTERPRETER_DELAY_MS,
  SPARE_INTERPRETER_MAX_DELAY_MS,
} from "../../../src/isolation/isolate/python-spares.js";
import type { PooledIsolate } from "../../../src/isolation/isolate/pooled-isolate.js";

/**
 * The interpreters a runner keeps ready beside its warm pool (python-spares.ts), with a stand-in for the
 * boot: a spare starts only after a Python isolate was made, later than that, one per memory limit; a
 * described isolate goes only to the first call of its own bundle at its own limit, within its time; a
 * failed boot leaves no spare and the next Python isolate tries again; close disposes everything.
 */
interface FakeInterpreter {
  key: string;
  healthy: boolean;
  disposed: boolean;
  disposeByHost(): void;
}
const interpreter = (label: string): FakeInterpreter => ({
  key: label,
  healthy: true,
  disposed: false,
  disposeByHost() {
    this.disposed = true;
    this.healthy = false;
  },
});
const asPooled = (fake: FakeInterpreter) => fake as unknown as PooledIsolate;

let boots: Array<{ limitMb: number; resolve: (value: FakeInterpreter) => void; reject: (error: Error) => void }>;
let spares: PythonSpares;
beforeEach(() => {
  vi.useFakeTimers();
  boots = [];
  spares = new PythonSpares((limitMb) => new Promise((resolve, reject) => boots.push({ limitMb, resolve: (value) => resolve(asPooled(value)), reject })));
});
afterEach(() => {
  spares.close();
  vi.useRealTimers();
});

async function bootFinishes(index: number, fake: FakeInterpreter): Promise<void> {
  boots[index]!.resolve(fake);
  await vi.advanceTimersByTimeAsync(0);
}

describe("spare interpreters", () => {
  it("start only after a Python isolate was made, and later than that", async () => {
    expect(spares.take(128)).toBeUndefined();
    spares.refill(128);
    await vi.advanceTimersByTimeAsync(SPARE_INTERPRETER_DELAY_MS - 1);
    expect(boots).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(boots.map((boot) => boot.limitMb)).toEqual([128]);
    const spare = interpreter("spare");
    await bootFinishes(0, spare);
    expect(spares.held).toBe(1);
    expect(spares.take(128)).toBe(spare);
    expect(spares.take(128)).toBeUndefined();
  });

  it("are one per memory limit, however often they are asked for", async () => {
    spares.refill(128);
    spares.refill(128);
    await vi.advanceTimersByTimeAsync(SPARE_INTERPRETER_DELAY_MS);
    spares.refill(128); // booting
    await bootFinishes(0, interpreter("a"));
    spares.refill(128); // ready
    spares.refill(256);
    await vi.advanceTimersByTimeAsync(SPARE_INTERPRETER_DELAY_MS);
    expect(boots.map((boot) => boot.limitMb)).toEqual([128, 256]);
    expect(spares.take(256)).toBeUndefined(); // still booting
  });

  it("after a failed boot: none is kept, and the next Python isolate starts one again", async () => {
    spares.refill(128);
    await vi.advanceTimersByTimeAsync(SPARE_INTERPRETER_DELAY_MS);
    boots[0]!.reject(new Error("the Python runtime did not start"));
    await vi.advanceTimersByTimeAsync(0);
    expect(spares.take(128)).toBeUndefined();
    spares.refill(128);
    await vi.advanceTimersByTimeAsync(SPARE_INTERPRETER_DELAY_MS);
    expect(boots).toHaveLength(2);
  });

  it("one that died while it waited is not handed out", async () => {
    spares.refill(128);
    await vi.advanceTimersByTimeAsync(SPARE_INTERPRETER_DELAY_MS);
    const spare = interpreter("spare");
    await bootFinishes(0, spare);
    spare.healthy = false;
    expect(spares.take(128)).toBeUndefined();
  });
});

describe("spares thrown away soon after they were taken", () => {
  /**
   * One call as the runner makes it: its Python isolate made (the spare taken, else booted in the call),
   * a spare refilled; `retired`: the call's interpreter is thrown away at its end. The wait from the
   * refill to the next spare's boot, ms.
   */
  async function callThenSpareBoots(retired: boolean): Promise<number> {
    const taken = spares.take(128);
    if (retired) taken?.disposeByHost();
    spares.refill(128);
    const before = boots.length;
    let waitedMs = 0;
    while (boots.length === before) {
      await vi.advanceTimersByTimeAsync(SPARE_INTERPRETER_DELAY_MS / 2);
      waitedMs += SPARE_INTERPRETER_DELAY_MS / 2;
    }
    await bootFinishes(boots.length - 1, interpreter(`spare-${boots.length}`));
    return waitedMs;
  }

  it("spare_churn: each spare a call takes and gets retired at once puts the next spare's boot off twice as long, up to a bound", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "hrtime"] });
    const waits: number[] = [];
    for (let call = 0; call < 9; call++) waits.push(await callThenSpareBoots(true));
    // The first call found no spare (it booted its own): nothing churned yet.
    const d = SPARE_INTERPRETER_DELAY_MS;
    expect(waits).toEqual([d, 2 * d, 4 * d, 8 * d, 16 * d, 32 * d, 64 * d, SPARE_INTERPRETER_MAX_DELAY_MS, SPARE_INTERPRETER_MAX_DELAY_MS]);
    // Only a long while without a churned spare brings the delay back.
    await vi.advanceTimersByTimeAsync(SPARE_CHURN_FORGOTTEN_MS);
    expect(await callThenSpareBoots(false)).toBe(d);
  });

  it("spares whose calls keep their interpreters (warm) are refilled at the usual delay", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "hrtime"] });
    for (let call = 0; call < 5; call++) expect(await callThenSpareBoots(false)).toBe(SPARE_INTERPRETER_DELAY_MS);
  });
});

describe("a described tool's isolate", () => {
  it("goes to the first call of that bundle at that memory limit, once", () => {
    const described = interpreter("describe");
    spares.keepDescribed("hash-a", 128, asPooled(described));
    expect(spares.held).toBe(1);
    expect(spares.adoptDescribed("hash-b", 128)).toBeUndefined();
    expect(spares.adoptDescribed("hash-a", 256)).toBeUndefined();
    expect(spares.adoptDescribed("hash-a", 128)).toBe(described);
    expect(spares.adoptDescribed("hash-a", 128)).toBeUndefined();
    expect(described.disposed).toBe(false);
  });

  it("is disposed when no call takes it in time, or when another is described", async () => {
    const first = interpreter("first");
    spares.keepDescribed("hash-a", 128, asPooled(first));
    const second = interpreter("second");
    spares.keepDescribed("hash-b", 128, asPooled(second));
    expect(first.disposed).toBe(true);
    await vi.advanceTimersByTimeAsync(DESCRIBED_KEPT_MS);
    expect(second.disposed).toBe(true);
    expect(spares.adoptDescribed("hash-b", 128)).toBeUndefined();
    expect(spares.held).toBe(0);
  });
});

describe("close", () => {
  it("disposes what is held, starts nothing more, and disposes a boot that finishes after it", async () => {
    spares.refill(128);
    await vi.advanceTimersByTimeAsync(SPARE_INTERPRETER_DELAY_MS);
    const ready = interpreter("ready");
    await bootFinishes(0, ready);
    spares.refill(256);
    await vi.advanceTimersByTimeAsync(SPARE_INTERPRETER_DELAY_MS);
    const described = interpreter("described");
    spares.keepDescribed("hash-a", 128, asPooled(described));
    spares.refill(512); // waiting for its delay
    spares.close();
    expect([ready.disposed, described.disposed]).toEqual([true, true]);
    const late = interpreter("late");
    await bootFinishes(1, late);
    expect(late.disposed).toBe(true);
    await vi.advanceTimersByTimeAsync(SPARE_INTERPRETER_DELAY_MS);
    expect(boots).toHaveLength(2);
    const afterClose = interpreter("after");
    spares.keepDescribed("hash-b", 128, asPooled(afterClose));
    expect(afterClose.disposed).toBe(true);
  });
});

describe("without a spare (spare_python_interpreter false)", () => {
  it("never boots one, yet a described isolate still goes to its tool's first call", async () => {
    spares.close();
    spares = new PythonSpares(
      (limitMb) => new Promise((resolve, reject) => boots.push({ limitMb, resolve: (value) => resolve(asPooled(value)), reject })),
      false,
    );
    spares.refill(128);
    await vi.advanceTimersByTimeAsync(SPARE_INTERPRETER_DELAY_MS * 10);
    expect(boots).toHaveLength(0);
    expect(spares.take(128)).toBeUndefined();
    const described = interpreter("described");
    spares.keepDescribed("hash-a", 128, asPooled(described));
    expect(spares.adoptDescribed("hash-a", 128)).toBe(described);
  });
});
