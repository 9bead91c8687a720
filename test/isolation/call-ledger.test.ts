import { describe, expect, it } from "vitest";
import { CallLedger, CapabilityBudget, LOG_LIMIT_NOTICE, MAX_CAPABILITY_ARGS_CHARS } from "../../src/isolation/call-ledger.js";
import type { AnswerMeter, CallContext, CapabilityReply } from "../../src/isolation/wire/messages.js";

const context = (anima = "eve"): CallContext => ({ anima, animaDir: `/data/animas/${anima}`, tool: "t" });
const limits = { maxLogLines: 3, maxLogLineChars: 10 };
const ok: CapabilityReply = { ok: true, value: null };
const MiB = 1024 * 1024;

/** A capability that answers only when told to. */
function gate() {
  const waiting: Array<() => void> = [];
  return {
    invoke: () => new Promise<CapabilityReply>((resolve) => waiting.push(() => resolve(ok))),
    openOne: () => waiting.shift()?.(),
    get waiting() {
      return waiting.length;
    },
  };
}

describe("CallLedger", () => {
  it("counts and cuts log lines itself, then drops them after one notice", () => {
    const ledger = new CallLedger(context(), limits, new CapabilityBudget());
    expect(ledger.log("info", "0123456789abcdef")).toEqual([{ level: "info", message: "0123456789… [cut]", context: context() }]);
    ledger.log("info", "b");
    ledger.log("info", "c");
    expect(ledger.log("info", "d")).toEqual([{ level: "warn", message: LOG_LIMIT_NOTICE, context: context() }]);
    expect(ledger.log("info", "e")).toEqual([]);
  });

  it("refuses capability calls beyond the in-flight limit per call and per Anima, and reports each refusal", async () => {
    const refusals: string[] = [];
    const budget = new CapabilityBudget({ maxInFlightPerCall: 2, maxInFlightPerAnima: 3 });
    const g = gate();
    const first = new CallLedger(context(), limits, budget, (_c, name, error) => refusals.push(`${name} ${error.type}`));
    const second = new CallLedger(context(), limits, budget, (_c, name, error) => refusals.push(`${name} ${error.type}`));
    const runs = [first.run("fs.stat", "[]", g.invoke), first.run("fs.stat", "[]", g.invoke)];
    expect(await first.run("fs.stat", "[]", g.invoke)).toMatchObject({
      ok: false,
      error: { type: "SandboxViolation", message: expect.stringMatching(/limit 2 per call/) },
    });
    runs.push(second.run("fs.stat", "[]", g.invoke));
    expect(await second.run("fs.stat", "[]", g.invoke)).toMatchObject({
      ok: false,
      error: { type: "SandboxViolation", message: expect.stringMatching(/for this Anima \(limit 3\)/) },
    });
    // Another Anima is not affected.
    const other = new CallLedger(context("alice"), limits, budget);
    const aliceRun = other.run("fs.stat", "[]", g.invoke);
    await new Promise((resolve) => setImmediate(resolve));
    expect(g.waiting).toBe(4);
    while (g.waiting > 0) g.openOne();
    for (const reply of await Promise.all([...runs, aliceRun])) expect(reply).toEqual(ok);
    expect(refusals).toEqual(["fs.stat SandboxViolation", "fs.stat SandboxViolation"]);
  });

  it("makes requests beyond the byte budget wait their turn, and answers waiting ones at once when the call ends", async () => {
    const budget = new CapabilityBudget({ maxBytesInFlightPerCall: 30 * 1024 * 1024 });
    const ledger = new CallLedger(context(), limits, budget);
    const g = gate();
    // A read reserves 14 MiB of answer: two fit in 30 MiB, the third waits.
    const reads = [ledger.run("fs.readFile", "[]", g.invoke), ledger.run("fs.readFile", "[]", g.invoke), ledger.run("fs.readFile", "[]", g.invoke)];
    await new Promise((resolve) => setImmediate(resolve));
    expect(g.waiting).toBe(2);
    expect(budget.bytesInFlight).toBeGreaterThanOrEqual(28 * 1024 * 1024);
    g.openOne();
    await reads[0];
    await new Promise((resolve) => setImmediate(resolve));
    expect(g.waiting).toBe(2); // the third started once the first finished
    const fourth = ledger.run("fs.readFile", "[]", g.invoke);
    ledger.end("Timeout");
    expect(await fourth).toMatchObject({ ok: false, error: { type: "ExecutionError", message: expect.stringMatching(/ended/) } });
    while (g.waiting > 0) g.openOne();
    await Promise.all(reads);
    expect(budget.bytesInFlight).toBe(0);
  });

  it("charges a live answer to the call's, the Anima's and the host's budgets at once, never waiting, and gives it all back when the run ends", async () => {
    const budget = new CapabilityBudget({ maxBytesInFlightPerCall: 8 * MiB, maxBytesInFlightPerAnima: 12 * MiB, maxBytesInFlightPerHost: 15 * MiB });
    const first = new CallLedger(context(), limits, budget);
    const second = new CallLedger(context(), limits, budget);
    const other = new CallLedger(context("alice"), limits, budget);
    const g = gate();
    const meters: AnswerMeter[] = [];
    const metered = (meter: AnswerMeter) => (meters.push(meter), g.invoke());
    const runs = [
      first.run("fetch", "[]", (_s, m) => metered(m)),
      second.run("fetch", "[]", (_s, m) => metered(m)),
      other.run("fetch", "[]", (_s, m) => metered(m)),
    ];
    await new Promise((resolve) => setImmediate(resolve));
    const [a, b, c] = meters as [AnswerMeter, AnswerMeter, AnswerMeter];
    const reserved = budget.report().inFlightBytes;
    // Whatever a request reserves (at most 1 MiB for a fetch), these fit or do not by the same budget.
    expect(a.hold(6 * MiB)).toBeUndefined();
    expect(a.hold(8 * MiB)).toEqual({ scope: "call", limitBytes: 8 * MiB }); // with its reservation, past its call's 8 MiB
    expect(b.hold(6.5 * MiB)).toEqual({ scope: "anima", limitBytes: 12 * MiB }); // 6 + 6.5 of eve's 12 MiB
    expect(b.hold(3 * MiB)).toBeUndefined();
    expect(c.hold(6 * MiB)).toEqual({ scope: "host", limitBytes: 15 * MiB }); // 9 + 6 + reservations of the host's 15 MiB
    expect(budget.report()).toMatchObject({ inFlightBytes: reserved + 9 * MiB, answerBytes: 9 * MiB, peakAnswerBytes: 9 * MiB });
    // Fewer bytes held are given back at once.
    expect(a.hold(MiB)).toBeUndefined();
    expect(c.hold(6 * MiB)).toBeUndefined();
    expect(budget.report()).toMatchObject({ answerBytes: 10 * MiB, peakAnswerBytes: 10 * MiB });
    while (g.waiting > 0) g.openOne();
    await Promise.all(runs);
    expect(budget.report()).toMatchObject({ inFlightBytes: 0, answerBytes: 0 });
    // A meter whose run has ended charges nothing more.
    expect(a.hold(1)).toMatchObject({ scope: "call" });
    expect(budget.report().peakAnimaBytes).toBeLessThanOrEqual(12 * MiB);
  });

  it("hands the invoker a signal that aborts when the call ends, and refuses requests after the end", async () => {
    const ledger = new CallLedger(context(), limits, new CapabilityBudget());
    let seen: AbortSignal | undefined;
    const run = ledger.run("fetch", "[]", (signal) => {
      seen = signal;
      return new Promise<CapabilityReply>((resolve) =>
        signal.addEventListener("abort", () => resolve({ ok: false, error: { type: "ExecutionError", fault: "tool", message: "aborted" } })),
      );
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen?.aborted).toBe(false);
    ledger.end("returned");
    expect(seen?.aborted).toBe(true);
    expect(await run).toMatchObject({ ok: false });
    expect(await ledger.run("fs.stat", "[]", async () => ok)).toMatchObject({ ok: false, error: { message: expect.stringMatching(/already ended/) } });
    expect(ledger.log("info", "late")).toEqual([]);
  });

  it("refuses argument text over the cap without running it", async () => {
    const ledger = new CallLedger(context(), limits, new CapabilityBudget());
    let ran = false;
    const reply = await ledger.run("fs.writeFile", "x".repeat(MAX_CAPABILITY_ARGS_CHARS + 1), async () => ((ran = true), ok));
    expect(reply).toMatchObject({ ok: false, error: { type: "InvalidArguments" } });
    expect(ran).toBe(false);
  });

  it("lets only denials the host issued to this call leave it as denials", async () => {
    const ledger = new CallLedger(context(), limits, new CapabilityBudget());
    await ledger.run("fs.readFile", "[]", async () => ({ ok: false, error: { type: "PermissionDenied", fault: "tool", message: "state/ is the host's" } }));
    // The fault is the host's record too, whatever the sandbox claims.
    expect(ledger.judge({ type: "PermissionDenied", fault: "host", message: "state/ is the host's" })).toEqual({
      type: "PermissionDenied",
      fault: "tool",
      message: "state/ is the host's",
    });
    expect(ledger.judge({ type: "SandboxViolation", fault: "tool", message: "state/ is the host's" }).type).toBe("ExecutionError");
    expect(ledger.judge({ type: "PermissionDenied", fault: "tool", message: "access to /etc/shadow denied" }).type).toBe("ExecutionError");
    expect(ledger.judge({ type: "ToolConfigError", fault: "host", message: "set API_KEY" }).type).toBe("ToolConfigError");
  });
});
