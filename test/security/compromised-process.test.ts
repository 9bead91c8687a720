import { WAITING_BUNDLE, waitingRequest } from "../helpers/waiting-requests.js";
import { afterEach, describe, expect, it } from "vitest";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import type { CallContext, CallOutcome, CallRequest, CapabilityReply } from "../../src/isolation/wire/messages.js";
import { SandboxPool } from "../../src/isolation/pool/sandbox-pool.js";
import type { CapabilityBudget } from "../../src/isolation/call-ledger.js";
import { UndecodedText } from "../../src/isolation/wire/bulk-channel.js";
import { waitFor } from "../helpers/data-dir.js";
import { PROJECT_ROOT } from "./harness.js";

/**
 * A sandbox process is an adversary as a whole: these tests run a compromised one
 * (test/fixtures/compromised/escaped-process.mjs) under the host's real launch, writing raw bytes on its
 * channel when a request of eve's arrives, while alice's calls run in her own cordon's process. Each asserts the
 * violation the host reports, that nothing was served for anyone else, that eve's process was replaced,
 * and that the host keeps serving alice.
 */

const ESCAPED_PROCESS = join(PROJECT_ROOT, "test", "fixtures", "compromised", "escaped-process.mjs");

interface Internals {
  pools: Map<string, { processes: Array<{ pid: number | undefined; pending: Map<number, { child: { pid: number } | undefined; request: CallRequest }> }> }>;
}

describe("a compromised sandbox process, byte by byte", () => {
  let pool: SandboxPool | undefined;
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
  });

  async function start() {
    const served: Array<{ context: CallContext; name: string }> = [];
    const violations: string[] = [];
    const logs: Array<{ anima: string; message: string }> = [];
    pool = new SandboxPool({
      entryScript: ESCAPED_PROCESS,
      onStderr: () => {},
      onLog: (line) => logs.push({ anima: line.context.anima, message: line.message }),
      invokeCapability: async (context, name): Promise<CapabilityReply> => {
        served.push({ context, name });
        return { ok: true, value: "served" };
      },
      onViolation: (message) => violations.push(message),
    });
    const p = pool;
    // alice's call stays in flight on one process; eve's calls go to the other.
    const aliceCall = p.call(waitingRequest("alice", "waiting_forever"));
    const { id: aliceId, pid: alicePid } = await sent(p, "alice");
    return { p, served, violations, logs, aliceCall, aliceId, alicePid };
  }

  /** The id of `anima`'s call once it was sent to its process (only then could a process name it), and that process. */
  async function sent(p: SandboxPool, anima: string): Promise<{ id: number; pid: number }> {
    const internals = p as unknown as Internals;
    let found: { id: number; pid: number } | undefined;
    await waitFor(
      () => {
        for (const process of [...internals.pools.values()].flatMap((pool) => pool.processes))
          for (const [id, pending] of process.pending)
            if (pending.request.context.anima === anima && pending.child !== undefined) found = { id, pid: pending.child.pid };
        return found !== undefined;
      },
      10_000,
      2,
    ).catch((error: Error) => {
      const pools = [...internals.pools].map(
        ([c, pool]) =>
          `${c}: ${pool.processes.map((x) => `${x.pid}[${[...x.pending.values()].map((q) => `${q.request.context.anima}@${q.child?.pid}`).join(",")}]`).join(" ")}`,
      );
      throw new Error(`${error.message}: no sent call of ${anima}; ${pools.join("; ")}`);
    });
    return found as { id: number; pid: number };
  }

  async function attack(p: SandboxPool, args: Record<string, unknown>): Promise<{ evePid: number; eveCall: Promise<CallOutcome> }> {
    const eveCall = p.call(waitingRequest("eve", "waiting_forever", args));
    const { pid: evePid } = await sent(p, "eve");
    return { evePid, eveCall };
  }

  async function stillServes(p: SandboxPool, alicePid: number, aliceCall: Promise<CallOutcome>): Promise<void> {
    let aliceEnded = false;
    void aliceCall.then(() => (aliceEnded = true));
    expect(await p.call(waitingRequest("alice", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(await p.call(waitingRequest("bob", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(p.pids()).toContain(alicePid); // alice's process was never touched
    expect(aliceEnded).toBe(false); // nor her call in flight
  }

  it.each([
    ["malformed_frame", /sent a frame of 9 bytes that is not JSON/],
    ["endless_frame", /sent a frame of 4294967280 bytes, over the 1048576-byte limit/],
    ["ipc_line", /over the 1048576-byte limit/],
    ["need_bundle_flood", /asked for request \d+'s bundle a second time/],
    ["forged_context", /not part of the protocol/],
    ["second_ready", /said it was ready twice/],
  ])("%s: eve's process is reported and replaced; alice is untouched", async (name, reported) => {
    const { p, served, violations, aliceCall, alicePid } = await start();
    const { evePid, eveCall } = await attack(p, { attack: name });
    await waitFor(() => violations.length > 0 && !p.pids().includes(evePid), 10_000).catch((error: Error) => {
      const pools = [...(p as unknown as { pools: Map<string, { processes: Array<{ pid: number | undefined; pending: Map<number, unknown> }> }> }).pools].map(
        ([c, pool]) => `${c}: ${pool.processes.map((x) => `${x.pid}(${x.pending.size})`).join(",")}`,
      );
      throw new Error(
        `${error.message}; violations: ${JSON.stringify(violations)}; pids ${JSON.stringify(p.pids())}, eve's ${evePid}; ${pools.join("; ")}; spares ${JSON.stringify(p.sparePids())}`,
      );
    });
    expect(violations[0]).toMatch(reported);
    expect(violations[0]).toMatch(new RegExp(`sandbox process ${evePid} .*it was stopped and replaced`));
    expect(await eveCall).toMatchObject({ ok: false, error: { type: "SandboxCrashed" } });
    expect(served).toEqual([]);
    await stillServes(p, alicePid, aliceCall);
  });

  it.each([["foreign_capability"], ["foreign_result"], ["foreign_log"]])(
    "%s: a message under alice's call id from eve's process is a violation, and serves nothing",
    async (name) => {
      const { p, served, violations, logs, aliceCall, aliceId, alicePid } = await start();
      const { evePid } = await attack(p, { attack: name, target: aliceId });
      await waitFor(() => violations.length > 0 && !p.pids().includes(evePid), 10_000);
      expect(violations[0]).toMatch(new RegExp(`named request ${aliceId}, which the host never sent to it`));
      expect(served).toEqual([]);
      expect(logs).toEqual([]);
      await stillServes(p, alicePid, aliceCall);
    },
  );

  it.each([["warmPool"], ["log"]])(
    "message_flood (%s): throttled, then retired as flooding; the host's event loop stays responsive",
    async (type) => {
      const { p, violations, aliceCall, alicePid } = await start();
      const lag = monitorEventLoopDelay({ resolution: 10 });
      lag.enable();
      const { evePid } = await attack(p, { attack: "message_flood", type });
      // While it floods, alice's calls are answered.
      for (let i = 0; i < 5; i++) expect(await p.call(waitingRequest("alice", "waiting_quick"))).toMatchObject({ ok: true });
      await waitFor(() => violations.length > 0 && !p.pids().includes(evePid), 20_000);
      lag.disable();
      expect(violations[0]).toMatch(/flooding the host/);
      // Each read of the flood costs the host at most one read's worth of small frames: no long stall.
      expect(lag.max / 1e6).toBeLessThan(2_000);
      await stillServes(p, alicePid, aliceCall);
    },
    40_000,
  );

  it("part_flood: parts beyond a call's limit are refused before the host holds more", async () => {
    const { p, violations, aliceCall, alicePid } = await start();
    const { evePid } = await attack(p, { attack: "part_flood" });
    await waitFor(() => violations.length > 0 && !p.pids().includes(evePid), 20_000);
    expect(violations[0]).toMatch(/sent parts of request \d+ over their limit/);
    await stillServes(p, alicePid, aliceCall);
  }, 30_000);

  it("memory_bomb: memory taken outside every isolate is measured by the host, and the process is killed", async () => {
    const { p, violations, aliceCall, alicePid } = await start();
    const { evePid, eveCall } = await attack(p, { attack: "memory_bomb" });
    await waitFor(() => violations.length > 0 && !p.pids().includes(evePid), 20_000);
    expect(violations[0]).toMatch(new RegExp(`sandbox process ${evePid} went over a limit the host keeps outside its isolates \\(memory: `));
    expect(await eveCall).toMatchObject({ ok: false, error: { type: "SandboxCrashed" } });
    await stillServes(p, alicePid, aliceCall);
  }, 30_000);

  it("forged_description: a process that ran eve's code describes only eve's own tools; others are described where it cannot reach", async () => {
    const { p } = await start();
    await p.call(waitingRequest("eve", "waiting_quick", { attack: "none" })); // eve's process has run her code
    const describe = (owner?: string) =>
      p.describe({ op: "describe", bundle: WAITING_BUNDLE, timeoutMs: 5_000, memoryLimitMb: 32, ...(owner ? { owner } : {}) });
    const genuine = { ok: true, module: { exports: { dispatch: "function" }, schemas: null } };
    // A shared or core tool (no owner): a process of its own, ended after; alice's: alice's cordon.
    expect(await describe()).toMatchObject(genuine);
    expect(await describe("alice")).toMatchObject(genuine);
    // eve's own tool is described in eve's cordon: she may lie about her own tool, to herself.
    expect(JSON.stringify(await describe("eve"))).toContain("read secret.txt");
  });

  it("what_it_was_told: a process is told a call's label only, never the host's record (folder, call and job ids)", async () => {
    const { p } = await start();
    const eve = waitingRequest("eve", "waiting_forever", { attack: "what_it_was_told" });
    const context: CallContext = { ...eve.context, callId: "call-of-eve-7", jobId: "job-of-eve-7" };
    const outcome = await p.call({ ...eve, context });
    if (!outcome.ok || outcome.value.kind === "none") throw new Error(`no account of what the process was told: ${JSON.stringify(outcome)}`);
    const heard = JSON.parse(outcome.value.text) as { type: string; request: { op: string; context: unknown } };
    expect(heard).toMatchObject({ type: "request", request: { op: "call" } });
    expect(heard.request.context).toEqual({ anima: "eve", tool: "waiting" });
    expect(outcome.value.text).not.toMatch(/animaDir|\/nonexistent\/animas|call-of-eve-7|job-of-eve-7/);
    // The host's own record of the call is whole.
    expect(context).toEqual({ anima: "eve", animaDir: "/nonexistent/animas/eve", tool: "waiting", callId: "call-of-eve-7", jobId: "job-of-eve-7" });
  });

  it("unread_bulk: answers a process leaves unread after its call ended are not held for it; it is retired and the budget is free", async () => {
    const served: string[] = [];
    const violations: string[] = [];
    pool = new SandboxPool({
      entryScript: ESCAPED_PROCESS,
      onStderr: () => {},
      invokeCapability: async (context, name): Promise<CapabilityReply> => {
        served.push(`${context.anima} ${name}`);
        // 4 MiB of file text: far more than a pipe holds, so the host's writes wait for the process.
        return { ok: true, value: new UndecodedText([Buffer.alloc(4 * 2 ** 20, 0x61)], "utf8") };
      },
      onViolation: (message) => violations.push(message),
    });
    const p = pool;
    const budget = (p as unknown as { shared: { budget: CapabilityBudget } }).shared.budget;
    const { evePid, eveCall } = await attack(p, { attack: "unread_bulk" });
    expect(await eveCall).toMatchObject({ ok: true, value: { text: "ended" } });
    await waitFor(() => served.length === 2, 10_000);
    await waitFor(() => violations.length > 0 && !p.pids().includes(evePid), 10_000);
    expect(violations[0]).toMatch(new RegExp(`sandbox process ${evePid} left the answer to its fs.readFile unread 2000 ms after the call ended`));
    expect(violations).toHaveLength(1);
    await waitFor(() => budget.bytesInFlight === 0, 5_000);
    expect(await p.call(waitingRequest("alice", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
  });

  it("own_capability: a genuine request runs for the Anima of the host's own record", async () => {
    const { p, served, violations } = await start();
    await attack(p, { attack: "own_capability" });
    await waitFor(() => served.length > 0 || violations.length > 0, 10_000);
    expect(served).toEqual([{ context: waitingRequest("eve", "").context, name: "fs.stat" }]);
    expect(violations).toEqual([]);
  });
});
