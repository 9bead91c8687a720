import { existsSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sandboxPidFor, sandboxPids, warmPoolReport } from "../../src/isolation/executor.js";
import { processTreeCpu } from "../../src/isolation/process-cpu.js";
import { LOW_PRIORITY_NICE } from "../../src/isolation/low-priority.js";
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
const SCHED_OTHER = 0;
const SCHED_IDLE = 5;

describe("noisy neighbour", () => {
  let h: Harness;
  beforeAll(() => {
    h = startHost({ mode: "process", timeoutMs: 1_500, animas: ["mallory", "alice", "bob"] });
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
    expect(sandboxPidFor(config, "mallory")).toBe(lowPriority);
    // Mallory's next call runs there (a fresh isolate); alice's warm isolate is where it was.
    expect(await expectHealthy(h, "mallory")).toBe(1);
    // Set by the host before the process started (chrt), and by the process on itself (nice).
    const low = schedulingOfTree(lowPriority);
    if (existsSync("/usr/bin/chrt")) expect(low.every((p) => p.policy === SCHED_IDLE)).toBe(true);
    expect(low.at(-1)?.nice).toBe(LOW_PRIORITY_NICE);
    for (const pid of normal) expect(schedulingOfTree(pid as number).every((p) => p.nice === 0 && p.policy === SCHED_OTHER)).toBe(true);
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
    h = startHost({ mode: "process", timeoutMs: 3_000, animas: ["bob"] });
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
    h = startHost({ mode: "process", timeoutMs: 2_000, animas: ["mallory", "bob"], maxConcurrentCallsPerAnima: 1, maxQueuedCallsPerAnima: 1 });
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
