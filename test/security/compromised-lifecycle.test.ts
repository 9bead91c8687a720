import { waitingRequest } from "../helpers/waiting-requests.js";
import { afterEach, describe, expect, it } from "vitest";
import { join } from "node:path";
import type { CallContext, CallOutcome, CallRequest, CapabilityReply } from "../../src/isolation/wire/messages.js";
import { SandboxPool, type SandboxPoolOptions } from "../../src/isolation/pool/sandbox-pool.js";
import { SandboxProcess } from "../../src/isolation/pool/child-handle.js";
import { CAPABILITY_MESSAGES_BURST, CAPABILITY_MESSAGES_PER_SECOND } from "../../src/isolation/pool/child-link.js";
import type { LiveChildren } from "../../src/isolation/pool/live-children.js";
import { waitFor } from "../helpers/data-dir.js";
import { PROJECT_ROOT } from "./harness.js";

/**
 * What every sandbox process may do, done by a compromised one (test/fixtures/compromised/lifecycle-process.mjs,
 * under the host's real launch) to cost the host more than its own share: capability requests past the
 * limits its own ledger keeps, or as fast as the host answers. Each test asserts what the host does
 * with the process, that the Animas of other cordons (alice, bob) keep being served and get nothing of
 * eve's, and that alice's call in flight in her own process is never touched. No test relies on a
 * figure of time: bounds are checked against the time that passed, whatever it was.
 */

const LIFECYCLE_PROCESS = join(PROJECT_ROOT, "test", "fixtures", "compromised", "lifecycle-process.mjs");

interface Internals {
  pools: Map<string, { processes: Array<{ pending: Map<number, { child: { pid: number } | undefined; request: CallRequest }> }> }>;
}

interface Started {
  p: SandboxPool;
  /** Each capability the host ran, with when it ran it (`performance.now()`). */
  served: Array<{ context: CallContext; name: string; atMs: number }>;
  refusals: string[];
  violations: string[];
  aliceCall?: Promise<CallOutcome>;
  alicePid?: number;
}

describe("a compromised sandbox process, costing the host more than its share", () => {
  let pool: SandboxPool | undefined;
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
  });

  /**
   * A pool running the fixture, with alice's call in flight in her own process (unless `aliceWaiting` is
   * false). `hold`: eve's capabilities stay in flight until her call ends.
   */
  async function start(options: Partial<SandboxPoolOptions> & { hold?: boolean; aliceWaiting?: boolean } = {}): Promise<Started> {
    const { hold, aliceWaiting = true, ...rest } = options;
    const served: Started["served"] = [];
    const refusals: string[] = [];
    const violations: string[] = [];
    pool = new SandboxPool({
      entryScript: LIFECYCLE_PROCESS,
      onStderr: () => {},
      invokeCapability: async (context, name, _args, signal): Promise<CapabilityReply> => {
        served.push({ context, name, atMs: performance.now() });
        if (hold && context.anima === "eve") await new Promise((resolve) => signal?.addEventListener("abort", resolve, { once: true }));
        return { ok: true, value: { kind: "file", size: 0 } };
      },
      onRefusal: (_context, name, error) => refusals.push(`${name}: ${error.message}`),
      onViolation: (message) => violations.push(message),
      ...rest,
    });
    const p = pool;
    if (!aliceWaiting) return { p, served, refusals, violations };
    const aliceCall = p.call(waitingRequest("alice", "waiting_forever"));
    const alicePid = await sent(p, "alice", 1);
    return { p, served, refusals, violations, aliceCall, alicePid };
  }

  /**
   * The process `anima`'s calls were sent to, once `count` of them were (only then could a process name
   * them); all of them went to that one (an Anima's calls go to one process at a time).
   */
  async function sent(p: SandboxPool, anima: string, count: number): Promise<number> {
    const internals = p as unknown as Internals;
    let pids: number[] = [];
    await waitFor(() => {
      pids = [];
      for (const process of [...internals.pools.values()].flatMap((cordon) => cordon.processes))
        for (const pending of process.pending.values())
          if (pending.request.context.anima === anima && pending.child !== undefined) pids.push(pending.child.pid);
      return pids.length >= count;
    }, 10_000);
    expect(new Set(pids).size).toBe(1);
    return pids[0] as number;
  }

  /** Other cordons are served, alice's process and her call in flight untouched, and nothing of eve's reached them. */
  async function othersUntouched(s: Started): Promise<void> {
    let aliceEnded = false;
    void s.aliceCall?.then(() => (aliceEnded = true));
    expect(await s.p.call(waitingRequest("alice", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(await s.p.call(waitingRequest("bob", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(s.p.pids()).toContain(s.alicePid);
    expect(aliceEnded).toBe(false);
    expect(s.served.filter((entry) => entry.context.anima !== "eve").map((entry) => entry.name)).toEqual([]);
  }

  it("capability_flood_past_inflight: requests past the 64 a call may have in flight retire the process, in one violation, with no refusal audited", async () => {
    const s = await start();
    const eveCall = s.p.call(waitingRequest("eve", "waiting_forever", { attack: "capability_flood_past_inflight", count: 5_000 }));
    const evePid = await sent(s.p, "eve", 1);
    await waitFor(() => s.violations.length > 0 && !s.p.pids().includes(evePid), 10_000);
    expect(s.violations[0]).toMatch(
      new RegExp(`sandbox process ${evePid} asked for a capability with 64 of its call's already in flight .*stopped and replaced`),
    );
    expect(s.violations).toHaveLength(1);
    // The flood was cut at the first request past the limit: none of it was refused one by one (each
    // refusal is an audit record), and at most the 64 allowed ran.
    expect(s.refusals).toEqual([]);
    expect(s.served.length).toBeLessThanOrEqual(64);
    expect(await eveCall).toMatchObject({ ok: false, error: { type: "SandboxCrashed" } });
    await othersUntouched(s);
  });

  it("capability_flood_past_inflight (per Anima): 60 requests of each of five calls, past the 256 an Anima may have in flight in a process", async () => {
    const s = await start({ hold: true });
    const args = { attack: "capability_flood_past_anima_inflight", perCall: 60, calls: 5 };
    const eveCalls = Array.from({ length: 5 }, () => s.p.call(waitingRequest("eve", "waiting_forever", args)));
    const evePid = await sent(s.p, "eve", 5);
    await waitFor(() => s.violations.length > 0 && !s.p.pids().includes(evePid), 10_000);
    expect(s.violations[0]).toMatch(new RegExp(`sandbox process ${evePid} asked for a capability with 256 of its Anima's already in flight`));
    expect(s.violations).toHaveLength(1);
    expect(s.refusals).toEqual([]);
    for (const outcome of await Promise.all(eveCalls)) expect(outcome).toMatchObject({ ok: false, error: { type: "SandboxCrashed" } });
    await othersUntouched(s);
  });

  it("capability_flood_within_inflight: requests as fast as the host answers are taken at the process's message budget; it is slowed, not retired", async () => {
    // No other Anima has calls while eve floods: nothing else (a demotion of her busy process) slows her.
    const s = await start({ aliceWaiting: false });
    const eveCall = s.p.call(waitingRequest("eve", "waiting_forever", { attack: "capability_flood_within_inflight", keep: 60, delayMs: 0 }));
    let eveEnded = false;
    void eveCall.then(() => (eveEnded = true));
    const enough = 10 * CAPABILITY_MESSAGES_BURST;
    await waitFor(() => s.served.length >= enough, 30_000, 2);
    // The bucket's own bound over the time since the host took the first request (however long), plus the
    // debt of one delivery of the channel, which the host takes whole (after a pause, its buffer and a
    // read: 128 KiB at most; a request's frame is ≥ 80 bytes).
    const seconds = (performance.now() - (s.served[0] as { atMs: number }).atMs) / 1_000;
    const oneDelivery = Math.ceil((128 * 1024) / 80);
    expect(s.served.length).toBeLessThanOrEqual(CAPABILITY_MESSAGES_BURST + CAPABILITY_MESSAGES_PER_SECOND * seconds + oneDelivery);
    // What an honest tool in a tight loop could do as well: slowed down, never a violation.
    expect(s.violations).toEqual([]);
    expect(s.refusals).toEqual([]);
    expect(eveEnded).toBe(false);
    // Alice and bob are served meanwhile (eve keeps flooding), and get nothing of eve's.
    expect(await s.p.call(waitingRequest("alice", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(await s.p.call(waitingRequest("bob", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(s.served.filter((entry) => entry.context.anima !== "eve").map((entry) => entry.name)).toEqual([]);
    expect(s.violations).toEqual([]);
  }, 45_000);

  it("retiring_loop_past_process_cap: a process that says it is retiring on every call never has the pool hold more processes than its cap", async () => {
    const s = await start({ maxProcesses: 2 });
    // Every process the pool starts is added to its live set: the most alive at once is its size right after an add.
    const live = (s.p as unknown as { live: LiveChildren }).live;
    const add = live.add.bind(live);
    let peak = live.size;
    live.add = (link) => {
      add(link);
      peak = Math.max(peak, live.size);
    };
    // The process each of eve's calls is sent to, as it is sent: her quick call is in flight for a moment
    // only (polling for it missed it on a busy machine).
    const evePids = new Set<number>();
    const processes = SandboxProcess.prototype as unknown as { bind(this: Bound, id: number, child: { pid: number | undefined }): void };
    type Bound = { pending: Map<number, { request: CallRequest }> };
    const bind = processes.bind;
    processes.bind = function (this: Bound, id, child) {
      bind.call(this, id, child);
      if (this.pending.get(id)?.request.context.anima === "eve" && child.pid !== undefined) evePids.add(child.pid);
    };
    try {
      for (let i = 0; i < 6; i++) {
        const outcome = s.p.call(waitingRequest("eve", "waiting_quick", { attack: "retiring_loop", delayMs: 0 }));
        // Each call is answered: eve's cordon waits for its own processes to end, it is not refused.
        expect(await outcome).toMatchObject({ ok: true, value: { text: "done" } });
      }
    } finally {
      processes.bind = bind;
    }
    expect(evePids.size).toBeGreaterThan(1); // each process retired, and eve's next call went to its replacement
    expect(peak).toBeLessThanOrEqual(2);
    // Nothing of eve's outlives its slot for long: her retired processes were ended once they had nothing in flight.
    await waitFor(() => [...evePids].slice(0, -1).every((pid) => !live.pids().includes(pid)), 10_000);
    await othersUntouched(s);
    expect(peak).toBeLessThanOrEqual(2);
  }, 120_000);

  it("self_sigstop_blames_host: a process that stops itself fails its call as the tool's timeout, in the security trail, never as the host's fault", async () => {
    const s = await start({ deadlineGraceMs: 500 });
    const eveCall = s.p.call({ ...waitingRequest("eve", "waiting_forever", { attack: "self_sigstop" }), timeoutMs: 1_000 });
    const evePid = await sent(s.p, "eve", 1);
    expect(await eveCall).toMatchObject({
      ok: false,
      error: { type: "Timeout", fault: "tool", message: expect.stringMatching(/did not finish within 1000 ms .*\(it had stopped: SIGSTOP\)/) },
    });
    expect(JSON.stringify(await eveCall)).not.toMatch(/outside the host|did nothing wrong/);
    await waitFor(() => !s.p.pids().includes(evePid), 10_000);
    expect(s.violations).toEqual([expect.stringMatching(new RegExp(`sandbox process ${evePid} was found stopped \\(SIGSTOP\\) at a call's hard stop`))]);
    // eve's next call runs in her fresh process.
    expect(await s.p.call(waitingRequest("eve", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    await othersUntouched(s);
  });
});
