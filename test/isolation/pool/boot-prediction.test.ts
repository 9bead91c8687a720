import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { InterpretersSent } from "../../../src/isolation/pool/interpreters-sent.js";
import { PythonSpares } from "../../../src/isolation/isolate/python-spares.js";
import type { PooledIsolate } from "../../../src/isolation/isolate/pooled-isolate.js";
import type { CallOutcome, SandboxRequest } from "../../../src/isolation/wire/messages.js";
import { PYTHON_BUNDLE_MARKER } from "../../../src/isolation/wire/tool-bundle.js";
import { monotonicMs } from "../../../src/clock.js";

/**
 * The host's prediction (InterpretersSent, used by cordon-pool.ts) against the process's spares
 * (PythonSpares, driven as isolate-runner.ts createIsolate drives it, with a warm pool of one isolate per
 * tool): whenever the process boots an interpreter inside a request, the host must have said "boot",
 * or that request's Anima pays the boot with no allowance and may be demoted. Other Animas' describes
 * and churning tools must not change that.
 */
const code = `${PYTHON_BUNDLE_MARKER}print(1)`;
const req = (op: "call" | "describe", anima: string, hash: string, memoryLimitMb = 64) =>
  ({ op, bundle: { hash, code }, memoryLimitMb, timeoutMs: 1_000, owner: anima, context: { anima } }) as unknown as SandboxRequest;
const ok = { ok: true, value: { kind: "none" }, durationMs: 1 } as unknown as CallOutcome;

interface Fake {
  healthy: boolean;
  disposedAtMs?: number;
  key: string;
  disposeByHost(): void;
}
const fake = (): Fake => ({
  key: "",
  healthy: true,
  disposeByHost() {
    this.healthy = false;
    this.disposedAtMs = monotonicMs();
  },
});

let spares: PythonSpares;
let warm: Map<string, Fake>;
let host: InterpretersSent;
let wrongNoBoot: string[];
beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "hrtime"] });
  spares = new PythonSpares(() => Promise.resolve(fake() as unknown as PooledIsolate));
  warm = new Map();
  host = new InterpretersSent(true);
  wrongNoBoot = [];
});
afterEach(() => {
  spares.close();
  vi.useRealTimers();
});

/** createIsolate's use of the spares: whether it booted an interpreter inside the request. */
function makeIsolate(op: "call" | "describe", hash: string, limit: number): { pooled: Fake; booted: boolean } {
  if (op === "call") {
    const described = spares.adoptDescribed(hash, limit) as unknown as Fake | undefined;
    if (described) {
      spares.refill(limit);
      return { pooled: described, booted: false };
    }
  }
  const spare = spares.take(limit) as unknown as Fake | undefined;
  if (op === "call" || spare) spares.refill(limit);
  return { pooled: spare ?? fake(), booted: !spare };
}

/**
 * One request from send to end, both sides: `recycle`, the tool has its interpreter thrown away at its
 * end (the host is not told: the call ends ok). Records a request the process booted in while the host said not.
 */
async function request(op: "call" | "describe", anima: string, hash: string, options: { limit?: number; recycle?: boolean; runsMs?: number } = {}) {
  const limit = options.limit ?? 64;
  const noted = host.sent(req(op, anima, hash, limit), monotonicMs());
  const key = `${anima}\0${hash}\0${limit}`;
  const idle = op === "call" ? warm.get(key) : undefined;
  warm.delete(key);
  const { pooled, booted } = idle?.healthy ? { pooled: idle, booted: false } : makeIsolate(op, hash, limit);
  if (booted && !noted.needsBoot) wrongNoBoot.push(`${op} ${anima}/${hash} at ${monotonicMs()}`);
  await vi.advanceTimersByTimeAsync(options.runsMs ?? 50);
  if (op === "describe") spares.keepDescribed(hash, limit, pooled as unknown as PooledIsolate);
  else if (options.recycle) pooled.disposeByHost();
  else warm.set(key, pooled);
  noted.ended(ok, monotonicMs());
}

const wait = (ms: number) => vi.advanceTimersByTimeAsync(ms);

describe("the host's boot prediction against the process's spares", () => {
  it("boot_prediction: another Anima's describe takes the spare; the next first call is predicted to boot, or finds a spare", async () => {
    await request("call", "bob", "a");
    await wait(2_000); // spare ready
    await request("describe", "mallory", "x");
    await wait(5_000);
    await request("call", "bob", "b");
    await wait(1_000);
    await request("call", "carol", "c");
    expect(wrongNoBoot).toEqual([]);
  });

  it("boot_prediction: another Anima's churning tool puts the spare off up to 32 s; others' first calls are predicted to boot", async () => {
    await request("call", "mallory", "churn");
    for (let i = 0; i < 6; i++) {
      await wait(40_000);
      await request("call", "mallory", "churn", { recycle: true });
    }
    await wait(2_000); // a normal refill (500 ms) would be ready by now
    await request("call", "bob", "b");
    await wait(20_000);
    await request("call", "carol", "c");
    expect(wrongNoBoot).toEqual([]);
  });

  it("boot_prediction: the request right after the one that took the spare is predicted to boot (the refill takes a boot's time)", async () => {
    await request("call", "bob", "a");
    await wait(2_000);
    await request("call", "bob", "b"); // takes the spare
    await request("call", "carol", "c");
    expect(wrongNoBoot).toEqual([]);
  });

  it("boot_prediction: describes replacing each other, recycled and warm calls, several memory limits, in a random order", async () => {
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const animas = ["alice", "bob", "mallory"];
    for (let step = 0; step < 400; step++) {
      const anima = animas[random(3)]!;
      const hash = `${anima}-${random(4)}`;
      const limit = [64, 128][random(2)]!;
      if (random(4) === 0) await request("describe", anima, hash, { limit });
      else await request("call", anima, hash, { limit, recycle: anima === "mallory" && random(2) === 0, runsMs: random(3_000) });
      await wait([0, 100, 1_000, 5_000, 40_000][random(5)]!);
    }
    expect(wrongNoBoot).toEqual([]);
  });
});
