import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CallResult } from "../../src/index.js";
import { waitFor } from "../helpers/data-dir.js";
import { sandboxOf } from "../../src/host.js";
import { processTreeCpu } from "../../src/isolation/os/process-cpu.js";
import { LOW_PRIORITY_NICE } from "../../src/isolation/os/low-priority.js";
import { HANG_MS, HOST_ACTS_TEST_MS, SCHED_OTHER, lowered, schedulingOf, untilHostActs } from "./demotion-readings.js";
import { type Harness, expectError, expectHealthy, expectOk, startHost } from "./harness.js";

/**
 * Tenants on one host: a tool that spins (`counter_hang`) makes its Anima "over its share", measured by
 * the host (a long call in a process /proc shows busy; docs/scheduling.md), and its calls then run in the
 * low-priority sandbox process; quiet Animas stay where their warm isolates are. Calls beyond an Anima's
 * per-Anima call limits wait, and beyond its queue fail at once with `Busy`.
 * The tests assert what the host did, never how fast: attacks run until the host has acted, then are
 * stopped; waits are for events, bounded only to catch a hang. The low-priority process gets only the CPU
 * nothing else wants, so what needs it to run is checked only when it did. (Per-Anima call limits:
 * call-limits.test.ts.)
 */
describe("noisy neighbour", () => {
  let h: Harness;
  beforeAll(() => {
    h = startHost({ mode: "process", cordons: "all", timeoutMs: 1_500, animas: ["mallory", "alice", "bob"] });
  });
  afterAll(() => h.close());

  it(
    "a spinning tool's Anima runs in the low-priority process afterwards; quiet Animas keep their process and warm isolates",
    async ({ skip }) => {
      const sandbox = sandboxOf(h.host!)!;
      expect(await expectHealthy(h, "alice")).toBe(1);
      expect(await expectHealthy(h, "mallory")).toBe(1);
      const aliceHome = sandbox.pidFor("alice");
      const normal = sandbox.pids();
      expect(normal).toHaveLength(2);
      const malloryFirst = normal.find((pid) => pid !== aliceHome) as number;

      const stop = new AbortController();
      const spins = [1, 2].map(() => h.call("mallory", "counter_hang", {}, { signal: stop.signal, timeoutMs: HANG_MS }));
      try {
        expect(await expectHealthy(h, "alice")).toBe(2);
        // Mallory's spinning calls were all its process ran: that process is demoted in place (a fresh one
        // takes its slot), and the low-priority process is started for mallory's next calls.
        await untilHostActs(() => sandbox.pids().length === 3 && !sandbox.pids().slice(0, 2).includes(malloryFirst), malloryFirst, skip);
      } finally {
        stop.abort();
      }
      for (const spin of await Promise.all(spins)) expectError(spin, "ExecutionError", /stopped by its caller/);
      // The demoted process ends after its calls.
      await waitFor(() => !existsSync(`/proc/${malloryFirst}`), HANG_MS);

      const pids = sandbox.pids();
      const lowPriority = pids[2] as number;
      expect(sandbox.pidFor("mallory")).toBe(lowPriority);
      // Set by the host before the process runs (chrt; else by the process on itself, nice).
      await waitFor(() => schedulingOf(lowPriority).every(lowered), HANG_MS);
      for (const pid of pids.slice(0, 2)) expect(schedulingOf(pid).every((p) => p.nice === 0 && p.policy === SCHED_OTHER)).toBe(true);
      expect(sandbox.pidFor("alice")).toBe(aliceHome);
      expect(await expectHealthy(h, "alice")).toBe(3);
      // Mallory's next call goes there, to a fresh isolate, if the process gets the CPU to run it; else it
      // times out at the host's deadline (it was not lost).
      const next = await h.call("mallory", "counter_count");
      if (next.status === "error") expectError(next, "Timeout");
      else {
        expect(JSON.parse(next.output)).toEqual({ calls: 1 });
        // The host reads the process's CPU itself (its Node start alone takes tens of ms); nice set by the process.
        expect(processTreeCpu(lowPriority)?.totalMs).toBeGreaterThan(0);
        expect(schedulingOf(lowPriority).at(-1)?.nice).toBe(LOW_PRIORITY_NICE);
      }

      // The warm pools say what they hold (each process answers for itself; one that does not answer in
      // time has no figures).
      const report = await sandbox.warmPoolReport();
      expect(report.map((r) => r.lowPriority)).toEqual([false, false, true]);
      for (const r of report) if (r.maxIdleBytes !== undefined) expect(r.maxIdleBytes).toBeGreaterThan(0);
      expect(report.find((r) => r.pid === aliceHome)?.idleIsolates ?? 1).toBeGreaterThanOrEqual(1);
    },
    HOST_ACTS_TEST_MS,
  );
});

/**
 * An attacker's first call: nothing is demoted yet, and the call runs in a normal process beside the quiet
 * Animas' calls (one sandbox process here, so that they share it). The host measures the process busy
 * with that long call, lowers the whole process to the low-priority scheduling where it runs (the call
 * keeps running there until it ends), and starts a fresh process for the calls that come next.
 */
describe("noisy neighbour: an attacker's first call", () => {
  let h: Harness;
  beforeAll(() => {
    h = startHost({ mode: "process", cordons: "all", timeoutMs: 4_000, sandboxProcesses: 1, animas: ["mallory", "trudy", "alice"] });
    h.install("mallory", "read_flood");
    h.data.write("animas/mallory/flood.txt", "x".repeat(4 * 1024 * 1024));
  });
  afterAll(() => h.close());

  /** Alice calls every 5 ms until `done`; every call must succeed. */
  async function aliceMeanwhile(done: () => boolean): Promise<CallResult[]> {
    const results: CallResult[] = [];
    while (!done()) {
      results.push(await h.call("alice", "counter_count"));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return results;
  }

  /** Runs `attacker`'s first call beside alice's calls, checks its demotion in place, stops it; its result. */
  async function attackDemotedInPlace(attacker: string, schema: string, skip: (note: string) => never): Promise<CallResult> {
    const sandbox = sandboxOf(h.host!)!;
    expect(await expectHealthy(h, "alice")).toBeGreaterThanOrEqual(1);
    const shared = sandbox.pidFor("alice") as number;
    const stop = new AbortController();
    // It runs until stopped below, once the host has acted on it.
    const attack = h.call(attacker, schema, {}, { signal: stop.signal, timeoutMs: 2 * HANG_MS });
    let replaced = false;
    const aliceCalls = aliceMeanwhile(() => replaced);
    try {
      try {
        // Measured over two readings once the call is long.
        await untilHostActs(() => !sandbox.pids().includes(shared), shared, skip);
      } finally {
        replaced = true;
      }
      expect((await aliceCalls).every((r) => r.status === "ok")).toBe(true);
      // The demoted process still runs the attack, now at low priority, every thread of it.
      expect(existsSync(`/proc/${shared}`)).toBe(true);
      await waitFor(() => schedulingOf(shared, true).every(lowered), HANG_MS);
      expect(schedulingOf(shared, true).length).toBeGreaterThan(4); // bwrap's processes and node's threads
      // Alice's calls go to the fresh process, at normal priority; the attacker's next ones are demoted.
      const fresh = sandbox.pids()[0] as number;
      expect(await expectHealthy(h, "alice")).toBeGreaterThanOrEqual(1);
      expect(sandbox.pidFor("alice")).toBe(fresh);
      expect(schedulingOf(fresh, true).every((p) => p.nice === 0 && p.policy === SCHED_OTHER)).toBe(true);
      expect(sandbox.pidFor(attacker)).toBe(sandbox.pids()[1]);
      // The attack ran on until stopped; then its process ends.
      expect(existsSync(`/proc/${shared}`)).toBe(true);
    } finally {
      stop.abort();
    }
    const result = await attack;
    await waitFor(() => !existsSync(`/proc/${shared}`), HANG_MS);
    expect(await expectHealthy(h, "alice")).toBeGreaterThanOrEqual(2);
    return result;
  }

  it(
    "a read flood (its process's main thread busy relaying): lowered where it runs, replaced for everyone else",
    async ({ skip }) => {
      expectError(await attackDemotedInPlace("mallory", "read_flood_run", skip), "ExecutionError", /stopped by its caller/);
    },
    HOST_ACTS_TEST_MS,
  );

  it(
    "a spinning tool (its isolate thread busy): the same",
    async ({ skip }) => {
      expectError(await attackDemotedInPlace("trudy", "counter_hang", skip), "ExecutionError", /stopped by its caller/);
    },
    HOST_ACTS_TEST_MS,
  );

  it("a long call that waits while another Anima's short calls keep the process busy: nothing is demoted in place", async () => {
    const sandbox = sandboxOf(h.host!)!;
    expect(await expectHealthy(h, "alice")).toBeGreaterThanOrEqual(1);
    const before = sandbox.pids()[0];
    let waited = false;
    const waiting = h.call("alice", "counter_wait", {}, { timeoutMs: 1_500 }).finally(() => {
      waited = true;
    });
    // Eight of alice's calls in flight at all times for as long as the wait lasts.
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (!waited) expectOk(await h.call("alice", "counter_count"));
      }),
    );
    expectError(await waiting, "Timeout");
    expect(sandbox.pids()[0]).toBe(before);
  });
});

describe("noisy neighbour: calls slowed by another Anima's long call", () => {
  it(
    "are not judged back to back: the quiet Anima keeps its process and warm isolate, the spinner's Anima is demoted",
    async ({ skip }) => {
      const h = startHost({ mode: "process", cordons: "all", timeoutMs: 1_500, sandboxProcesses: 1, animas: ["trudy", "alice"] });
      try {
        const sandbox = sandboxOf(h.host!)!;
        expect(await expectHealthy(h, "alice")).toBe(1);
        const home = sandbox.pidFor("alice");
        let spinning = true;
        const stop = new AbortController();
        const attack = h.call("trudy", "counter_hang", {}, { signal: stop.signal, timeoutMs: 2 * HANG_MS }).finally(() => {
          spinning = false;
        });
        // Four of alice's calls in flight at all times while trudy's spins: her time in flight there is four
        // times every window's, and trudy calls meanwhile.
        const aliceCalls = Promise.all(
          Array.from({ length: 4 }, async () => {
            const results: CallResult[] = [];
            while (spinning) results.push(await h.call("alice", "counter_count"));
            return results;
          }),
        );
        // The spin goes on until trudy is demoted and for at least 1.5 s (six readings) in all: alice's
        // calls beside it are judged all that time.
        const started = Date.now();
        try {
          await untilHostActs(() => sandbox.pidFor("trudy") === sandbox.pids()[1] && Date.now() - started >= 1_500, home as number, skip);
        } finally {
          stop.abort();
        }
        expectError(await attack, "ExecutionError", /stopped by its caller/);
        const alice = await aliceCalls;
        expect(alice.flat().every((r) => r.status === "ok")).toBe(true);
        expect(sandbox.pidFor("trudy")).toBe(sandbox.pids()[1]);
        expect(sandbox.pidFor("alice"), `pids ${sandbox.pids().join(",")}`).toBe(home);
        expect(await expectHealthy(h, "alice")).toBeGreaterThan(1); // its warm isolate, where it was
      } finally {
        await h.close();
      }
    },
    HOST_ACTS_TEST_MS,
  );
});

describe("noisy neighbour: short calls back to back", () => {
  let h: Harness;
  beforeAll(() => {
    h = startHost({ mode: "process", cordons: "all", timeoutMs: 3_000, sandboxProcesses: 1, animas: ["mallory", "alice"] });
    h.install("mallory", "back_to_back_spins");
  });
  afterAll(() => h.close());

  /**
   * Mallory's 100 ms calls, one after the other, until `done` or until they are routed to the
   * low-priority process (where a 100 ms spin gets only the CPU nothing else wants, and may time out on
   * a busy machine); every call must succeed.
   */
  async function spinsUntil(done: () => boolean): Promise<void> {
    const sandbox = sandboxOf(h.host!)!;
    const routedLow = () => sandbox.pids().length === 2 && sandbox.pidFor("mallory") === sandbox.pids()[1];
    while (!done() && !routedLow()) expectOk(await h.call("mallory", "back_to_back_spins_run"));
  }

  it("alone on the host, they keep their normal process", async () => {
    const sandbox = sandboxOf(h.host!)!;
    // Fifteen of them: 1.5 s or more of spinning, six readings at least.
    let calls = 0;
    await spinsUntil(() => calls++ >= 15);
    expect(sandbox.pids()).toHaveLength(1); // no low-priority process was needed
    expect(sandbox.pidFor("mallory")).toBe(sandbox.pids()[0]);
  });

  it(
    "beside another Anima's calls, their Anima is over its share: its next calls run in the low-priority process, the other's stay",
    async ({ skip }) => {
      const sandbox = sandboxOf(h.host!)!;
      expect(await expectHealthy(h, "alice")).toBeGreaterThanOrEqual(1);
      const normal = sandbox.pids()[0];
      let demoted = false;
      const alice: CallResult[] = [];
      const aliceCalls = (async () => {
        while (!demoted) {
          alice.push(await h.call("alice", "counter_count"));
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      })();
      const spins = spinsUntil(() => demoted);
      try {
        // Judged on the next reading of the process's CPU time (every 250 ms) once the calls are back to back.
        await untilHostActs(() => sandbox.pids().length === 2 && sandbox.pidFor("mallory") === sandbox.pids()[1], normal as number, skip);
      } finally {
        demoted = true;
      }
      await Promise.all([aliceCalls, spins]);
      expect(alice.every((r) => r.status === "ok")).toBe(true);
      expect(sandbox.pidFor("alice")).toBe(normal);
      // Mallory's next call runs there (the process may have been started only now: one call has it up).
      // At idle priority it gets only the CPU nothing else wants: on a busy machine it may time out.
      const next = await h.call("mallory", "back_to_back_spins_run");
      if (next.status === "error") expectError(next, "Timeout");
      const low = sandbox.pids()[1] as number;
      expect(sandbox.pidFor("mallory")).toBe(low);
      await waitFor(() => schedulingOf(low).every(lowered), HANG_MS);
      expect(await expectHealthy(h, "alice")).toBeGreaterThan(1); // its warm isolate, still in the normal process
    },
    HOST_ACTS_TEST_MS,
  );
});

describe("noisy neighbour: closing the host while a demoted process still runs its call", () => {
  it(
    "stops the demoted process too; the call fails as the host shutting down",
    async ({ skip }) => {
      const h = startHost({ mode: "process", cordons: "all", timeoutMs: 5_000, sandboxProcesses: 1, animas: ["trudy", "alice"] });
      try {
        const sandbox = sandboxOf(h.host!)!;
        expect(await expectHealthy(h, "alice")).toBe(1);
        const shared = sandbox.pidFor("alice") as number;
        const attack = h.call("trudy", "counter_hang", {}, { timeoutMs: 2 * HANG_MS });
        await untilHostActs(() => !sandbox.pids().includes(shared), shared, skip);
        expect(existsSync(`/proc/${shared}`)).toBe(true);
        await h.host!.close();
        expectError(await attack, "SandboxCrashed", /shutting down/);
        expect(existsSync(`/proc/${shared}`)).toBe(false);
      } finally {
        await h.close();
      }
    },
    HOST_ACTS_TEST_MS,
  );
});

/** A long call that mostly waits on capabilities: it keeps the host busy, not its isolate thread. */
const READER = `
import { fs } from "@animaworks/tool";
export function get_tool_schemas() {
  return [{ name: "reader_run", description: "reads for 600 ms", input_schema: { type: "object", properties: {} } }];
}
export async function dispatch() {
  let reads = 0;
  for (const end = Date.now() + 600; Date.now() < end; reads++) await fs.readFile("data.txt");
  return { reads };
}
`;

describe("noisy neighbour: what is not over its share", () => {
  let h: Harness;
  beforeAll(() => {
    h = startHost({ mode: "process", cordons: "all", timeoutMs: 3_000, animas: ["bob"] });
    h.data.write("animas/bob/tools/reader.ts", READER);
    h.data.write("animas/bob/data.txt", "x".repeat(1024));
  });
  afterAll(() => h.close());

  it("a long call that waits on capability calls leaves its Anima where it is", async () => {
    const sandbox = sandboxOf(h.host!)!;
    const result = await h.call("bob", "reader_run");
    expect(JSON.parse(expectOk(result)).reads).toBeGreaterThan(0);
    expect(sandbox.pids()).toHaveLength(2); // no low-priority process was needed
    expect(sandbox.pids()).toContain(sandbox.pidFor("bob"));
  });
});
