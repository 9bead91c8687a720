import { describe, expect, it } from "vitest";
import { InterpretersSent, WARM_TOOLS_KEPT } from "../../../src/isolation/pool/interpreters-sent.js";
import { DESCRIBED_KEPT_MS, SPARE_INTERPRETER_DELAY_MS, SPARE_INTERPRETER_MAX_DELAY_MS } from "../../../src/isolation/isolate/python-spares.js";
import type { CallOutcome, SandboxRequest } from "../../../src/isolation/wire/messages.js";
import { PYTHON_BOOT_GRACE_MS, PYTHON_BUNDLE_MARKER } from "../../../src/isolation/wire/tool-bundle.js";

const python = (hash: string) => ({ hash, code: `${PYTHON_BUNDLE_MARKER}print(1)` });
const call = (hash: string, memoryLimitMb = 64, anima = "alice", code = python(hash).code) =>
  ({ op: "call", bundle: { hash, code }, memoryLimitMb, context: { anima } }) as unknown as SandboxRequest;
const describeOf = (hash: string, memoryLimitMb = 64) =>
  ({ op: "describe", bundle: python(hash), memoryLimitMb, timeoutMs: 1_000, owner: "eve" }) as unknown as SandboxRequest;
const ok = { ok: true, value: { kind: "none" }, durationMs: 1 } as unknown as CallOutcome;
const failed = (type: string) => ({ ok: false, error: { type, fault: "tool", message: "m" }, durationMs: 1 }) as unknown as CallOutcome;

/** Sends `request` at `at`, ends it at `endAt` with `outcome`: whether the host said it must boot. */
function run(sent: InterpretersSent, request: SandboxRequest, at: number, outcome: CallOutcome | undefined = ok, endAt = at): boolean {
  const noted = sent.sent(request, at);
  noted.ended(outcome, endAt);
  return noted.needsBoot;
}

/** The spare's refill window after a lone request ended: one churn counted (its own), then a boot's bound. */
const REFILL_MS = 2 * SPARE_INTERPRETER_DELAY_MS + PYTHON_BOOT_GRACE_MS;

/**
 * The host's record of what a sandbox process was sent of Python tools (interpreters-sent.ts): a request
 * that finds an interpreter there gets no boot allowance (scheduling/boot-allowance.ts), so where the
 * process may lack one the record says "boot".
 */
describe("interpreters sent", () => {
  it("python_first_call_grace: after one Python call and the spare's refill, the next tool's first call finds the spare", () => {
    const sent = new InterpretersSent(true);
    expect(run(sent, call("a"), 0)).toBe(true);
    expect(run(sent, call("b"), REFILL_MS)).toBe(false);
    expect(run(sent, call("a"), REFILL_MS + 1)).toBe(false); // warm
    expect(run(sent, describeOf("c"), 3 * REFILL_MS)).toBe(false);
    // Another memory limit has no spare of its own yet.
    expect(run(sent, call("a", 128), 3 * REFILL_MS + 1)).toBe(true);
  });

  it("boot_prediction: the spare counts as missing while a request that may take it runs, and until its refill after", () => {
    const sent = new InterpretersSent(true);
    run(sent, call("a"), 0);
    // Right after the request that took it: the process refills it only after a delay and a boot.
    expect(run(sent, call("b", 64, "bob"), 1)).toBe(true);
    const long = sent.sent(call("a"), 2 * REFILL_MS); // warm itself, yet it may take the spare (a recycled interpreter)
    expect(long.needsBoot).toBe(false);
    expect(run(sent, call("c", 64, "bob"), 3 * REFILL_MS)).toBe(true); // `long` still in flight
    long.ended(ok, 3 * REFILL_MS + 1);
    expect(run(sent, describeOf("d"), 3 * REFILL_MS + 2)).toBe(true);
  });

  it("boot_prediction: mirrors the process's churn backoff from above, and forgets it only after a quiet minute", () => {
    const CAPPED_MS = SPARE_INTERPRETER_MAX_DELAY_MS + PYTHON_BOOT_GRACE_MS;
    /** Eight calls a second apart whose interpreters may each have been recycled at once: the delay is at its cap. */
    const churned = () => {
      const sent = new InterpretersSent(true);
      for (let i = 0; i < 8; i++) run(sent, call("churn", 64, "mallory"), i * 1_000);
      return sent;
    };
    const lastEnd = 7_000;
    expect(run(churned(), call("x", 64, "bob"), lastEnd + REFILL_MS)).toBe(true);
    const busy = churned();
    expect(run(busy, call("x", 64, "bob"), lastEnd + 50_000)).toBe(true);
    expect(run(busy, call("y", 64, "bob"), lastEnd + 50_000 + REFILL_MS)).toBe(true); // not forgotten: requests kept coming
    const quiet = churned();
    expect(run(quiet, call("x", 64, "bob"), lastEnd + CAPPED_MS)).toBe(false);
    expect(run(quiet, call("y", 64, "bob"), lastEnd + CAPPED_MS + REFILL_MS)).toBe(false); // a quiet minute: the short refill again
  });

  it("a tool is warm only after a call of it ended ok, by that Anima, with no other call of it running", () => {
    const sent = new InterpretersSent(false);
    expect(run(sent, call("a"), 0)).toBe(true);
    expect(run(sent, call("a"), 1)).toBe(false);
    expect(run(sent, call("a", 64, "bob"), 2)).toBe(true); // bob's isolate of it is his own
    for (const type of ["Timeout", "MemoryLimit", "SandboxCrashed"]) {
      run(sent, call("a"), 3, failed(type)); // its interpreter was thrown away
      expect(run(sent, call("a"), 4)).toBe(true);
    }
    sent.sent(call("a"), 5).ended(undefined, 5); // no outcome at all
    expect(run(sent, call("a"), 6)).toBe(true);
    const first = sent.sent(call("a"), 7);
    expect(first.needsBoot).toBe(false);
    expect(sent.sent(call("a"), 8).needsBoot).toBe(true); // the warm isolate is busy: a second one is made
    first.ended(ok, 9);
    sent.forgetAnima("alice");
    expect(run(sent, call("a"), 10)).toBe(true);
  });

  it("without spares, only the tool's own warm isolate, or its describe's, is an interpreter for it", () => {
    const sent = new InterpretersSent(false);
    expect(run(sent, call("a"), 0)).toBe(true);
    expect(run(sent, call("a"), 1)).toBe(false);
    expect(run(sent, call("b"), 2)).toBe(true);
    expect(run(sent, describeOf("c"), 3)).toBe(true);
    expect(run(sent, call("c"), 4)).toBe(false); // takes the described isolate
    expect(run(sent, describeOf("d"), 5)).toBe(true);
    expect(run(sent, call("d"), 5 + DESCRIBED_KEPT_MS)).toBe(true); // dropped by then
  });

  it("a described isolate: the last describe's only, once it ended ok, for one call", () => {
    const sent = new InterpretersSent(false);
    run(sent, describeOf("c"), 0);
    run(sent, describeOf("d"), 1); // the process drops c's isolate when it keeps d's
    expect(run(sent, call("c"), 2)).toBe(true);
    run(sent, describeOf("e"), 3, failed("LoadError"));
    expect(run(sent, call("e"), 4)).toBe(true);
    const describing = sent.sent(describeOf("f"), 5);
    expect(run(sent, call("f"), 6)).toBe(true); // sent before the describe ended: nothing kept yet
    describing.ended(ok, 7);
    expect(run(sent, call("f", 64, "bob"), 8)).toBe(true); // that call took it, if anyone did
    run(sent, describeOf("g"), 9);
    expect(run(sent, call("g", 64, "bob"), 10, failed("Timeout"))).toBe(false);
    expect(run(sent, call("g", 64, "bob"), 11)).toBe(true); // taken once
  });

  it("a JavaScript tool's request never boots an interpreter", () => {
    expect(run(new InterpretersSent(true), call("js", 64, "alice", '"use strict";'), 0)).toBe(false);
  });

  it("boot_prediction: holds a bounded record, whatever tool versions an Anima mints", () => {
    const sent = new InterpretersSent(true);
    for (let i = 0; i < 20_000; i++) run(sent, describeOf(`d${i}`), i);
    for (let i = 0; i < 20_000; i++) run(sent, call(`v${i}`, 64 + (i % 8)), 20_000 + i);
    const held = sent as unknown as { warm: Set<string>; inFlight: Map<number, number>; callsInFlight: Map<string, number>; missingUntil: Map<number, number> };
    expect(held.warm.size).toBe(WARM_TOOLS_KEPT);
    expect([held.inFlight.size, held.callsInFlight.size, held.missingUntil.size]).toEqual([0, 0, 8]);
    // A dropped tool costs one request predicted to boot; the newest are still warm.
    expect(run(sent, call("v0", 64), 50_000)).toBe(true);
    expect(run(sent, call("v19999", 64 + (19_999 % 8)), 50_001)).toBe(false);
  });
});
