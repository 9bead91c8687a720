import { describe, expect, it } from "vitest";
import { ToolHostError } from "../../../src/errors.js";
import { AnimaQueues } from "../../../src/isolation/scheduling/anima-queues.js";
import type { CallOutcome, CallRequest, Executor } from "../../../src/isolation/wire/messages.js";

/** An executor whose calls end only when the test says so. */
function heldExecutor() {
  const running: Array<{ anima: string; finish: () => void }> = [];
  const executor: Executor = {
    describe: async () => ({ ok: false, error: { type: "LoadError", fault: "tool", message: "unused" } }),
    call: (request) =>
      new Promise<CallOutcome>((resolve) => {
        running.push({ anima: request.context.anima, finish: () => resolve({ ok: true, value: { kind: "none" }, durationMs: 0 }) });
      }),
    close: async () => {},
    stuckEntries: () => 0,
  };
  const finishOne = (anima: string) => {
    const index = running.findIndex((r) => r.anima === anima);
    running.splice(index, 1)[0]?.finish();
  };
  return { executor, running, finishOne };
}

const request = (anima: string): CallRequest => ({
  op: "call",
  bundle: { hash: "h", code: "", displayName: "t" },
  context: { anima, animaDir: `/d/${anima}`, tool: "t" },
  entry: "call",
  schemaName: "t_a",
  payloadJson: "{}",
  timeoutMs: 1_000,
  memoryLimitMb: 16,
  maxResultBytes: 1_000,
  maxLogLines: 10,
  maxLogLineChars: 100,
});

/** Lets queued promise callbacks run (admissions resolve in microtasks). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("AnimaQueues", () => {
  it("lets an Anima that is alone on the host run beyond its limit", async () => {
    const held = heldExecutor();
    const gate = new AnimaQueues(held.executor, { maxConcurrentPerAnima: 2, maxQueuedPerAnima: 10 });
    for (let i = 0; i < 5; i++) void gate.call(request("a"));
    await settle();
    expect(held.running).toHaveLength(5);
  });

  it("holds an Anima to its limit while another has calls, admits round-robin, and fails at once when the queue is full", async () => {
    const held = heldExecutor();
    const gate = new AnimaQueues(held.executor, { maxConcurrentPerAnima: 2, maxQueuedPerAnima: 3 });
    const quiet = gate.call(request("quiet"));
    const noisy = Array.from({ length: 5 }, () => gate.call(request("noisy")));
    await settle();
    expect(gate.countsOf("noisy")).toEqual({ running: 2, queued: 3 });
    const refused = await gate.call(request("noisy"));
    expect(refused).toMatchObject({ ok: false, error: { type: "Busy", message: expect.stringMatching(/"noisy" already has 2 calls running and 3 waiting/) } });
    expect(refused.ok ? "" : refused.error.hint).toMatch(/maxQueuedCallsPerAnima 3/);
    // Quiet's own calls are never held by noisy's queue.
    void gate.call(request("quiet"));
    await settle();
    expect(gate.countsOf("quiet")).toEqual({ running: 2, queued: 0 });
    // A finished noisy call lets exactly one waiting noisy call in.
    held.finishOne("noisy");
    await settle();
    expect(gate.countsOf("noisy")).toEqual({ running: 2, queued: 2 });
    // Once quiet is done, noisy is alone: everything it queued runs.
    held.finishOne("quiet");
    held.finishOne("quiet");
    await quiet;
    await settle();
    expect(gate.countsOf("noisy")).toEqual({ running: 4, queued: 0 });
    for (let i = 0; i < 4; i++) held.finishOne("noisy");
    expect((await Promise.all(noisy)).every((o) => o.ok)).toBe(true);
    expect(gate.countsOf("noisy")).toEqual({ running: 0, queued: 0 });
  });

  it("a waiting call whose caller gives up leaves the queue without running", async () => {
    const held = heldExecutor();
    const gate = new AnimaQueues(held.executor, { maxConcurrentPerAnima: 1, maxQueuedPerAnima: 5 });
    void gate.call(request("other"));
    void gate.call(request("a"));
    const controller = new AbortController();
    const waiting = gate.call(request("a"), controller.signal);
    await settle();
    expect(gate.countsOf("a")).toEqual({ running: 1, queued: 1 });
    controller.abort();
    expect(await waiting).toMatchObject({ ok: false, error: { type: "ExecutionError", message: expect.stringMatching(/before it started/) } });
    expect(gate.countsOf("a")).toEqual({ running: 1, queued: 0 });
    expect(held.running.filter((r) => r.anima === "a")).toHaveLength(1);
  });

  it("ends a call whose signal aborts with the signal's reason when it is a host error, waiting or running", async () => {
    const stopped: CallOutcome = {
      ok: false,
      error: { type: "ExecutionError", fault: "tool", message: "the call was stopped by its caller before it finished" },
      durationMs: 1,
    };
    let stopRunning: (() => void) | undefined;
    const executor: Executor = {
      describe: async () => ({ ok: false, error: { type: "LoadError", fault: "tool", message: "unused" } }),
      call: (_request, signal) => new Promise<CallOutcome>((resolve) => (stopRunning = () => signal?.aborted && resolve(stopped))),
      close: async () => {},
      stuckEntries: () => 0,
    };
    const gate = new AnimaQueues(executor, { maxConcurrentPerAnima: 1, maxQueuedPerAnima: 5 });
    void gate.call(request("other"));
    const running = new AbortController();
    const first = gate.call(request("a"), running.signal);
    const waiting = new AbortController();
    const second = gate.call(request("a"), waiting.signal);
    await settle();
    waiting.abort(new ToolHostError("Timeout", "job exceeded its timeout of 10 ms"));
    expect(await second).toMatchObject({ ok: false, error: { type: "Timeout", message: "job exceeded its timeout of 10 ms" } });
    running.abort(new ToolHostError("ExecutionError", "job cancelled by request"));
    stopRunning?.();
    expect(await first).toMatchObject({ ok: false, error: { type: "ExecutionError", message: "job cancelled by request" } });
  });
});
