import { afterEach, describe, expect, it } from "vitest";
import { monotonicMs } from "../../src/clock.js";
import { SandboxPool } from "../../src/isolation/pool/sandbox-pool.js";
import type { LiveChildren } from "../../src/isolation/pool/live-children.js";
import { waitingRequest } from "../helpers/waiting-requests.js";
import { waitFor } from "../helpers/data-dir.js";

/**
 * demoted_anima_past_process_cap: an Anima the judge demotes gets one more process (the cordon's
 * low-priority one, or a fresh one beside a process demoted in place). Both were started at once, so a
 * pool at its cap went over it while another cordon sat idle; an Anima that spins on purpose can be
 * demoted again and again. Now they start once idle cordons have made room, as a new cordon's processes
 * do (sandbox-pool.ts), and the demoted Anima's calls wait for that, not anyone else's.
 * The judge is not what is tested (noisy-neighbour.test.ts is): its decisions are applied directly.
 */

interface Internals {
  live: LiveChildren;
  pools: Map<string, CordonInternals>;
}
interface CordonInternals {
  placement: { demote(anima: string, untilMs: number): void };
  processes: Array<{ demoteRunning(): boolean; load: number }>;
}

const MAX_PROCESSES = 2;

describe("demotion under the pool's process cap", () => {
  let pool: SandboxPool | undefined;
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
  });

  /** Bob's idle cordon and the team's (mallory and alice), one process each: at the cap unless `maxProcesses` says otherwise; the most processes alive at once. */
  async function atCap(maxProcesses = MAX_PROCESSES): Promise<{ p: SandboxPool; team: CordonInternals; peak: () => number; bobServed: () => boolean }> {
    pool = new SandboxPool({ cordons: { team: ["mallory", "alice"] }, maxProcesses, spareProcesses: 0, onStderr: () => {} });
    const p = pool;
    const internals = p as unknown as Internals;
    const live = internals.live;
    const add = live.add.bind(live);
    let peak = 0;
    live.add = (link) => {
      add(link);
      peak = Math.max(peak, live.size);
    };
    expect(await p.call(waitingRequest("bob", "waiting_quick"))).toMatchObject({ ok: true });
    expect(await p.call(waitingRequest("mallory", "waiting_quick"))).toMatchObject({ ok: true });
    expect(live.size).toBe(2);
    const team = internals.pools.get("group:team");
    if (!team) throw new Error("no team cordon");
    return { p, team, peak: () => peak, bobServed: () => internals.pools.has("anima:bob") };
  }

  it("demoted_anima_past_process_cap: the low-priority process starts once an idle cordon made room", async () => {
    const { p, team, peak, bobServed } = await atCap();
    team.placement.demote("mallory", monotonicMs() + 60_000);
    // Mallory's next call waits for the low-priority process, which waited for bob's idle cordon to end.
    expect(await p.call(waitingRequest("mallory", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(bobServed()).toBe(false);
    expect(peak()).toBeLessThanOrEqual(MAX_PROCESSES);
    // Alice, in the team, and bob, whose cordon comes back, are served.
    expect(await p.call(waitingRequest("alice", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(await p.call(waitingRequest("bob", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
  }, 60_000);

  /**
   * Demotes the team's process in place while mallory's call is in flight there (so that the demoted
   * process lives on beside its replacement), then alice calls: her call goes to the replacement.
   */
  async function demoteInPlace(p: SandboxPool, team: CordonInternals): Promise<void> {
    const stop = new AbortController();
    const inFlight = p.call(waitingRequest("mallory", "waiting_forever"), stop.signal);
    const process = team.processes[0];
    if (!process) throw new Error("no team process");
    await waitFor(() => process.load > 0, 10_000);
    expect(process.demoteRunning()).toBe(true);
    expect(await p.call(waitingRequest("alice", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    stop.abort();
    expect(await inFlight).toMatchObject({ ok: false });
  }

  it("a process demoted in place is replaced once an idle cordon made room", async () => {
    const { p, team, peak, bobServed } = await atCap();
    await demoteInPlace(p, team);
    // The replacement waited for bob's idle cordon to end.
    expect(bobServed()).toBe(false);
    expect(peak()).toBeLessThanOrEqual(MAX_PROCESSES);
  }, 60_000);

  it("a demotion in place with room under the cap ends no other cordon", async () => {
    const { p, team, bobServed } = await atCap(MAX_PROCESSES + 1);
    await demoteInPlace(p, team);
    expect(bobServed()).toBe(true);
  }, 60_000);
});
