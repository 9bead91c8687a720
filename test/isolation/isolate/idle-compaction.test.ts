import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COLLECT_GARBAGE_GLOBAL } from "../../../src/contract/tool-globals.js";
import { IsolateRunner } from "../../../src/isolation/isolate/isolate-runner.js";
import type { CallOutcome } from "../../../src/isolation/wire/messages.js";
import { waitFor } from "../../helpers/data-dir.js";
import { type ProbeTool, buildProbeTool } from "../../helpers/probe-tool.js";

/**
 * Idle isolates give back what their calls left (src/isolation/isolate/idle-compaction.ts). These
 * processes start with a sandbox process's flags (vitest.config.ts), so V8's collector is installed
 * under `COLLECT_GARBAGE_GLOBAL` in every context, as in a sandbox process.
 */
const TOOL = `
let calls = 0;
export function get_tool_schemas() {
  return [{ name: "probe_run", description: "leaves garbage", input_schema: { type: "object", properties: {} } }];
}
export function dispatch() {
  // Garbage a call leaves behind: pages of the young and old generations stay committed after it.
  let kept = [];
  for (let i = 0; i < 30000; i++) kept.push({ i, text: "item " + i, pair: [i, i + 1] });
  kept = kept.length;
  return { calls: ++calls, kept, collector: typeof globalThis[${JSON.stringify(COLLECT_GARBAGE_GLOBAL)}] };
}
`;

let probe: ProbeTool;
beforeAll(async () => {
  probe = await buildProbeTool(TOOL);
});
afterAll(() => probe.cleanup());

/** The tool's result (a JSON object), or an error naming why the call failed. */
function valueOf(outcome: CallOutcome): unknown {
  if (!outcome.ok) throw new Error(`call failed: ${outcome.error.type}: ${outcome.error.message}`);
  if (outcome.value.kind !== "json") throw new Error(`not a JSON result: ${outcome.value.kind}`);
  return JSON.parse(outcome.value.text);
}

describe("idle compaction (isolate runner)", () => {
  it("the process has the collector, and a tool's global does not", async () => {
    expect(typeof (globalThis as Record<string, unknown>)[COLLECT_GARBAGE_GLOBAL]).toBe("function");
    const runner = new IsolateRunner({ compactIdleAfterMs: 0 });
    try {
      expect(valueOf(await runner.call(probe.request("alice")))).toMatchObject({ calls: 1, collector: "undefined" });
    } finally {
      await runner.close();
    }
  });

  it("compacts an isolate idle long enough, once: its heap figure falls, and it serves the next call with its state", async () => {
    const runner = new IsolateRunner({ compactIdleAfterMs: 100 });
    try {
      valueOf(await runner.call(probe.request("alice")));
      valueOf(await runner.call(probe.request("alice")));
      const before = runner.warmPoolStats();
      expect(before).toMatchObject({ idleIsolates: 1, compactions: 0 });
      await waitFor(() => runner.warmPoolStats().compactions === 1, 10_000, 20);
      const after = runner.warmPoolStats();
      expect(after.idleIsolates).toBe(1);
      // V8's committed heap, as the pool measures it: what the calls' garbage held is given back.
      expect(after.idleBytes).toBeLessThan(before.idleBytes * 0.8);
      // The same isolate (its module state) serves the next call, and is compacted again once idle again.
      expect(valueOf(await runner.call(probe.request("alice")))).toMatchObject({ calls: 3, kept: 30_000 });
      await waitFor(() => runner.warmPoolStats().compactions === 2, 10_000, 20);
    } finally {
      await runner.close();
    }
  });

  it("compacts every idle isolate, one Anima's as another's, and none when turned off", async () => {
    const runner = new IsolateRunner({ compactIdleAfterMs: 50 });
    const off = new IsolateRunner({ compactIdleAfterMs: 0 });
    try {
      for (const anima of ["alice", "bob", "carol"]) valueOf(await runner.call(probe.request(anima)));
      valueOf(await off.call(probe.request("alice")));
      await waitFor(() => runner.warmPoolStats().compactions === 3, 10_000, 20);
      expect(runner.warmPoolStats().idleIsolates).toBe(3);
      expect(off.warmPoolStats()).toMatchObject({ idleIsolates: 1, compactions: 0 });
    } finally {
      await runner.close();
      await off.close();
    }
  });

  it("calls that arrive between and during compactions find their isolate whole", async () => {
    const runner = new IsolateRunner({ compactIdleAfterMs: 1 });
    try {
      // Each call comes 0–3 ms after the last (jitter, not a wait): some find a compaction running on the
      // isolate's thread and wait for it; every one is served by the same isolate, its state intact.
      for (let i = 1; i <= 40; i++) {
        expect(valueOf(await runner.call(probe.request("alice")))).toMatchObject({ calls: i, kept: 30_000 });
        await new Promise((resolve) => setTimeout(resolve, i % 4));
      }
      await waitFor(() => runner.warmPoolStats().compactions > 0, 10_000, 5);
      expect(runner.warmPoolStats().idleIsolates).toBe(1);
    } finally {
      await runner.close();
    }
  });
});
