import { existsSync, readFileSync, readdirSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CallResult } from "../../src/index.js";
import { waitFor } from "../helpers/data-dir.js";
import { sandboxPidFor, sandboxPids, warmPoolReport } from "../../src/isolation/executor.js";
import { processTreeCpu } from "../../src/isolation/os/process-cpu.js";
import { LOW_PRIORITY_NICE } from "../../src/isolation/os/low-priority.js";
import { type Harness, expectError, expectHealthy, expectOk, startHost } from "./harness.js";

/**
 * Tenants on one host: a tool that spins (`counter_hang`) makes its Anima "over its share", measured by
 * the host (a long call in a process /proc shows busy), and its calls then run in the low-priority
 * sandbox process; quiet Animas stay where their warm isolates are. Calls beyond an Anima's fair share
 * wait, and beyond its queue fail at once with `Busy`.
 */

/** Nice value and scheduling policy of every process in a sandbox process's tree (bwrap's children included). */
function schedulingOfTree(pid: number): Array<{ nice: number; policy: number }> {
  const found: Array<{ nice: number; policy: number }> = [];
  const visit = (p: number) => {
    const stat = readFileSync(`/proc/${p}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    found.push({ nice: Number(fields[16]), policy: Number(fields[38]) });
    for (const child of readFileSync(`/proc/${p}/task/${p}/children`, "utf8").split(" ").filter(Boolean)) visit(Number(child));
  };
  visit(pid);
  return found;
}
/** The same for every thread of every process in the tree (a process demoted in place is lowered thread by thread). */
function schedulingOfThreads(pid: number): Array<{ nice: number; policy: number }> {
  const found: Array<{ nice: number; policy: number }> = [];
  const visit = (p: number) => {
    for (const task of readdirSync(`/proc/${p}/task`)) {
      const stat = readFileSync(`/proc/${p}/task/${task}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      found.push({ nice: Number(fields[16]), policy: Number(fields[38]) });
    }
    for (const child of readFileSync(`/proc/${p}/task/${p}/children`, "utf8").split(" ").filter(Boolean)) visit(Number(child));
  };
  visit(pid);
  return found;
}
const SCHED_OTHER = 0;
const SCHED_IDLE = 5;

describe("noisy neighbour", () => {
  let h: Harness;
  beforeAll(() => {
    h = startHost({ mode: "process", cordons: "all", timeoutMs: 1_500, animas: ["mallory", "alice", "bob"] });
  });
  afterAll(() => h.close());

  it("a spinning tool's Anima runs in the low-priority process afterwards; quiet Animas keep their process and warm isolates", async () => {
    const config = h.host!.config;
    expect(await expectHealthy(h, "alice")).toBe(1);
    expect(await expectHealthy(h, "mallory")).toBe(1);
    const aliceHome = sandboxPidFor(config, "alice");
    const normal = sandboxPids(config);
    expect(normal).toHaveLength(2);

    const spins = await Promise.all([h.call("mallory", "counter_hang"), h.call("mallory", "counter_hang"), expectHealthy(h, "alice")]);
    expectError(spins[0], "Timeout");
    expectError(spins[1], "Timeout");

    const pids = sandboxPids(config);
    expect(pids).toHaveLength(3);
    const lowPriority = pids[2] as number;
    // Mallory's first spinning calls were all its process ran: that process was demoted in place and
    // ended after them, and a fresh one took its slot.
    const malloryFirst = normal.find((pid) => pid !== aliceHome) as number;
    expect(pids.slice(0, 2)).not.toContain(malloryFirst);
    await waitFor(() => !existsSync(`/proc/${malloryFirst}`), 5_000);
    expect(sandboxPidFor(config, "mallory")).toBe(lowPriority);
    // Mallory's next call runs there (a fresh isolate); alice's warm isolate is where it was.
    expect(await expectHealthy(h, "mallory")).toBe(1);
    // Set by the host before the process started (chrt), and by the process on itself (nice).
    const low = schedulingOfTree(lowPriority);
    if (existsSync("/usr/bin/chrt")) expect(low.every((p) => p.policy === SCHED_IDLE)).toBe(true);
    expect(low.at(-1)?.nice).toBe(LOW_PRIORITY_NICE);
    for (const pid of pids.slice(0, 2)) expect(schedulingOfTree(pid as number).every((p) => p.nice === 0 && p.policy === SCHED_OTHER)).toBe(true);
    expect(sandboxPidFor(config, "alice")).toBe(aliceHome);
    expect(await expectHealthy(h, "alice")).toBe(3);
    // The host reads the process's CPU itself (its Node start alone takes tens of ms).
    expect(processTreeCpu(lowPriority)?.totalMs).toBeGreaterThan(0);

    // The warm pools say what they hold (each process answers for itself).
    const report = await warmPoolReport(config);
    expect(report.map((r) => r.lowPriority)).toEqual([false, false, true]);
    expect(report.reduce((sum, r) => sum + (r.idleIsolates ?? 0), 0)).toBeGreaterThanOrEqual(2);
    expect(report.every((r) => (r.maxIdleBytes ?? 0) > 0)).toBe(true);
  });
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
  async function attackDemotedInPlace(attacker: string, schema: string): Promise<CallResult> {
    const config = h.host!.config;
    expect(await expectHealthy(h, "alice")).toBeGreaterThanOrEqual(1);
    const shared = sandboxPidFor(config, "alice") as number;
    const stop = new AbortController();
    const attack = h.call(attacker, schema, {}, { signal: stop.signal });
    let replaced = false;
    const aliceCalls = aliceMeanwhile(() => replaced);
    try {
      // Measured over two samples of 250 ms once the call is long (250 ms): well within 3 s.
      await waitFor(() => !sandboxPids(config).includes(shared), 3_000);
    } finally {
      replaced = true;
    }
    expect((await aliceCalls).every((r) => r.status === "ok")).toBe(true);
    // The demoted process still runs the attack, now at low priority, every thread of it.
    expect(existsSync(`/proc/${shared}`)).toBe(true);
    const lowered = (p: { nice: number; policy: number }) => (existsSync("/usr/bin/chrt") ? p.policy === SCHED_IDLE : p.nice === LOW_PRIORITY_NICE);
    await waitFor(() => schedulingOfThreads(shared).every(lowered), 2_000);
    expect(schedulingOfThreads(shared).length).toBeGreaterThan(4); // bwrap's processes and node's threads
    // Alice's calls go to the fresh process, at normal priority; the attacker's next ones are demoted.
    const fresh = sandboxPids(config)[0] as number;
    expect(await expectHealthy(h, "alice")).toBeGreaterThanOrEqual(1);
    expect(sandboxPidFor(config, "alice")).toBe(fresh);
    expect(schedulingOfThreads(fresh).every((p) => p.nice === 0 && p.policy === SCHED_OTHER)).toBe(true);
    expect(sandboxPidFor(config, attacker)).toBe(sandboxPids(config)[1]);
    // The attack ran on until stopped; then its process ends.
    expect(existsSync(`/proc/${shared}`)).toBe(true);
    stop.abort();
    const result = await attack;
    await waitFor(() => !existsSync(`/proc/${shared}`), 5_000);
    expect(await expectHealthy(h, "alice")).toBeGreaterThanOrEqual(2);
    return result;
  }

  it("a read flood (its process's main thread busy relaying): lowered where it runs, replaced for everyone else", async () => {
    expectError(await attackDemotedInPlace("mallory", "read_flood_run"), "ExecutionError", /stopped by its caller/);
  });

  it("a spinning tool (its isolate thread busy): the same", async () => {
    expectError(await attackDemotedInPlace("trudy", "counter_hang"), "ExecutionError", /stopped by its caller/);
  });

  it("a long call that waits while another Anima's short calls keep the process busy: nothing is demoted in place", async () => {
    const config = h.host!.config;
    expect(await expectHealthy(h, "alice")).toBeGreaterThanOrEqual(1);
    const before = sandboxPids(config)[0];
    const waiting = h.call("alice", "counter_wait", {}, { timeoutMs: 1_500 });
    // Eight of alice's calls in flight at all times for as long as the wait lasts.
    const end = Date.now() + 1_400;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (Date.now() < end) expectOk(await h.call("alice", "counter_count"));
      }),
    );
    expectError(await waiting, "Timeout");
    expect(sandboxPids(config)[0]).toBe(before);
  });
});

describe("noisy neighbour: calls slowed by another Anima's long call", () => {
  it("are not judged back to back: the quiet Anima keeps its process and warm isolate, the spinner's Anima is demoted", async () => {
    const h = startHost({ mode: "process", cordons: "all", timeoutMs: 1_500, sandboxProcesses: 1, animas: ["trudy", "alice"] });
    try {
      const config = h.host!.config;
      expect(await expectHealthy(h, "alice")).toBe(1);
      const home = sandboxPidFor(config, "alice");
      let spinning = true;
      const attack = h.call("trudy", "counter_hang").finally(() => {
        spinning = false;
      });
      // Four of alice's calls in flight at all times while trudy's spins: her time in flight there is four
      // times every window's, and trudy calls meanwhile.
      const alice = await Promise.all(
        Array.from({ length: 4 }, async () => {
          const results: CallResult[] = [];
          while (spinning) results.push(await h.call("alice", "counter_count"));
          return results;
        }),
      );
      expectError(await attack, "Timeout");
      expect(alice.flat().every((r) => r.status === "ok")).toBe(true);
      expect(sandboxPidFor(config, "trudy")).toBe(sandboxPids(config)[1]);
      expect(sandboxPidFor(config, "alice"), `pids ${sandboxPids(config).join(",")}`).toBe(home);
      expect(await expectHealthy(h, "alice")).toBeGreaterThan(1); // its warm isolate, where it was
    } finally {
      await h.close();
    }
  });
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
    const config = h.host!.config;
    const routedLow = () => sandboxPids(config).length === 2 && sandboxPidFor(config, "mallory") === sandboxPids(config)[1];
    while (!done() && !routedLow()) expectOk(await h.call("mallory", "back_to_back_spins_run"));
  }

  it("alone on the host, they keep their normal process", async () => {
    const config = h.host!.config;
    const end = Date.now() + 1_500;
    await spinsUntil(() => Date.now() > end);
    expect(sandboxPids(config)).toHaveLength(1); // no low-priority process was needed
    expect(sandboxPidFor(config, "mallory")).toBe(sandboxPids(config)[0]);
  });

  it("beside another Anima's calls, their Anima is over its share: its next calls run in the low-priority process, the other's stay", async () => {
    const config = h.host!.config;
    expect(await expectHealthy(h, "alice")).toBeGreaterThanOrEqual(1);
    const normal = sandboxPids(config)[0];
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
      await waitFor(() => sandboxPids(config).length === 2 && sandboxPidFor(config, "mallory") === sandboxPids(config)[1], 3_000);
    } finally {
      demoted = true;
    }
    await Promise.all([aliceCalls, spins]);
    expect(alice.every((r) => r.status === "ok")).toBe(true);
    expect(sandboxPidFor(config, "alice")).toBe(normal);
    // Mallory's next call runs there (the process may have been started only now: one call has it up).
    // At idle priority it gets only the CPU nothing else wants: on a busy machine it may time out.
    const next = await h.call("mallory", "back_to_back_spins_run");
    if (next.status === "error") expectError(next, "Timeout");
    const low = sandboxPids(config)[1] as number;
    expect(sandboxPidFor(config, "mallory")).toBe(low);
    const lowered = (p: { nice: number; policy: number }) => (existsSync("/usr/bin/chrt") ? p.policy === SCHED_IDLE : p.nice === LOW_PRIORITY_NICE);
    expect(schedulingOfTree(low).every(lowered)).toBe(true);
    expect(await expectHealthy(h, "alice")).toBeGreaterThan(1); // its warm isolate, still in the normal process
  });
});

describe("noisy neighbour: closing the host while a demoted process still runs its call", () => {
  it("stops the demoted process too; the call fails as the host shutting down", async () => {
    const h = startHost({ mode: "process", cordons: "all", timeoutMs: 5_000, sandboxProcesses: 1, animas: ["trudy", "alice"] });
    try {
      const config = h.host!.config;
      expect(await expectHealthy(h, "alice")).toBe(1);
      const shared = sandboxPidFor(config, "alice") as number;
      const attack = h.call("trudy", "counter_hang");
      await waitFor(() => !sandboxPids(config).includes(shared), 3_000);
      expect(existsSync(`/proc/${shared}`)).toBe(true);
      await h.host!.close();
      expectError(await attack, "SandboxCrashed", /shutting down/);
      expect(existsSync(`/proc/${shared}`)).toBe(false);
    } finally {
      await h.close();
    }
  });
});

/** A long call that mostly waits on capabilities: it keeps the host busy, not its isolate thread. */
const READER = `
import { fs } from "@animaworks/tool";
export function get_tool_schemas() {
  return [{ name: "reader_run", description: "reads for 600 ms", input_schema: { type: "object", properties: {} } }];
}
export async function dispatch() {
  const end = Date.now() + 600;
  let reads = 0;
  while (Date.now() < end) {
    await fs.readFile("data.txt");
    reads++;
  }
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
    const config = h.host!.config;
    const result = await h.call("bob", "reader_run");
    expect(JSON.parse(expectOk(result)).reads).toBeGreaterThan(10);
    expect(sandboxPids(config)).toHaveLength(2); // no low-priority process was needed
    expect(sandboxPids(config)).toContain(sandboxPidFor(config, "bob"));
  });
});

describe("fair share of direct calls", () => {
  let h: Harness;
  beforeAll(() => {
    h = startHost({ mode: "process", cordons: "all", timeoutMs: 2_000, animas: ["mallory", "bob"], maxConcurrentCallsPerAnima: 1, maxQueuedCallsPerAnima: 1 });
  });
  afterAll(() => h.close());

  it("holds an Anima to its share while another Anima has calls, and refuses a call beyond its queue with Busy", async () => {
    // Both tools loaded first, so that calls reach the gate in the order they are made.
    expect(await expectHealthy(h, "bob")).toBe(1);
    expect(await expectHealthy(h, "mallory")).toBe(1);
    // Bob has a call in flight throughout (it waits 1 s, then times out): mallory is not alone.
    const bobWaiting = h.call("bob", "counter_wait", {}, { timeoutMs: 1_000 });
    const first = h.call("mallory", "counter_slow");
    const second = h.call("mallory", "counter_slow"); // waits for the first
    const third = await h.call("mallory", "counter_count"); // the queue (1) is full
    expectError(third, "Busy", /"mallory" already has 1 calls running and 1 waiting/);
    expect(third.status === "error" ? third.hint : "").toMatch(/maxQueuedCallsPerAnima 1/);
    const results = await Promise.all([first, second]);
    expect(results.map((r) => r.status)).toEqual(["ok", "ok"]);
    expectError(await bobWaiting, "Timeout");
    // One isolate served both of mallory's calls, one after the other.
    expect(results.map((r) => (r.status === "ok" ? (JSON.parse(r.output) as { calls: number }).calls : 0)).sort()).toEqual([2, 3]);
    // Alone on the host, an Anima is not held back.
    const alone = await Promise.all([h.call("mallory", "counter_count"), h.call("mallory", "counter_count"), h.call("mallory", "counter_count")]);
    expect(alone.map((r) => r.status)).toEqual(["ok", "ok", "ok"]);
  });
});
