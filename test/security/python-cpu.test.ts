import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CallResult } from "../../src/index.js";
import { sandboxOf } from "../../src/host.js";
import { HANG_MS, HOST_ACTS_TEST_MS, untilHostActs } from "./demotion-readings.js";
import { type Harness, expectHealthy, startHost } from "./harness.js";

/**
 * Python tools and CPU demotion (docs/scheduling.md): what a Python tool costs its process beyond its
 * calls' own running is the Anima's to answer for. The interpreter's boot gets a small allowance, once
 * per process slot and Anima, and none where the process holds an interpreter for it already. Each
 * attack runs beside alice's short calls until the host has acted (its Anima's calls sent to the
 * low-priority process), then is stopped. The tests assert what the host did.
 */
const SCHEMA = (tool: string) =>
  `def get_tool_schemas():\n    return [{"name": "${tool}_run", "description": "d", "input_schema": {"type": "object", "properties": {}}}]\n`;
const WARM = `${SCHEMA("warm")}def dispatch(name, args):\n    return "warm"\n`;
const SPIN_ON_CALL = `${SCHEMA("spin_call")}def dispatch(name, args):\n    while True:\n        pass\n`;
const SPIN_ON_LOAD = `${SCHEMA("spin_load")}while True:\n    pass\n`;

/** Alice calls every 5 ms until `done`. */
async function aliceMeanwhile(h: Harness, done: () => boolean): Promise<CallResult[]> {
  const results: CallResult[] = [];
  while (!done()) {
    results.push(await h.call("alice", "counter_count"));
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return results;
}

/** A host of one sandbox process (alice's and mallory's calls share it) with mallory's Python `tools` written. */
function startCpuHost(tools: Record<string, string>): Harness {
  const h = startHost({ mode: "process", cordons: "all", timeoutMs: 4_000, loadTimeoutMs: 20_000, sandboxProcesses: 1, animas: ["mallory", "alice"] });
  for (const [file, source] of Object.entries(tools)) h.data.write(`animas/mallory/tools/${file}`, source);
  return h;
}

describe("python cpu: a spinning Python tool's first call", () => {
  let h: Harness;
  beforeAll(() => {
    h = startCpuHost({ "warm.py": WARM, "spin_call.py": SPIN_ON_CALL });
  });
  afterAll(() => h.close());

  it(
    "python_first_call_grace: a spinning tool's first call, where the process already holds an interpreter for it, is demoted like any call",
    async ({ skip }) => {
      const sandbox = sandboxOf(h.host!)!;
      // Mallory's calls go to the low-priority process (its attack, too, when its process was demoted in
      // place: how the judge deals with the running call is docs/scheduling.md's, beside alice's calls).
      const mallorysCallsDemoted = () => sandbox.pids().length === 2 && sandbox.pidFor("mallory") === sandbox.pids()[1];
      expect(await expectHealthy(h, "alice")).toBe(1);
      // Mallory's process has run a Python call: it keeps an interpreter ready for the next one.
      expect((await h.call("mallory", "warm_run")).status).toBe("ok");
      const shared = sandbox.pidFor("mallory") as number;
      expect(sandbox.pidFor("alice")).toBe(shared);
      const stop = new AbortController();
      // Its own deadline is far beyond the wait below: only the host's judgment ends its priority.
      const attack = h.call("mallory", "spin_call_run", {}, { signal: stop.signal, timeoutMs: 2 * HANG_MS });
      let acted = false;
      const aliceCalls = aliceMeanwhile(h, () => acted);
      try {
        await untilHostActs(() => mallorysCallsDemoted(), shared, skip);
      } finally {
        acted = true;
        stop.abort();
      }
      expect((await aliceCalls).every((r) => r.status === "ok")).toBe(true);
      expect((await attack).status).toBe("error");
    },
    HOST_ACTS_TEST_MS,
  );
});

describe("python cpu: a personal tool's load", () => {
  let h: Harness;
  beforeAll(() => {
    h = startCpuHost({ "spin_load.py": SPIN_ON_LOAD });
  });
  afterAll(() => h.close());

  it(
    "describe_spin: a tool whose top level spins is judged under its owner as a call is: its owner's calls are demoted",
    async ({ skip }) => {
      const sandbox = sandboxOf(h.host!)!;
      // Mallory's calls go to the low-priority process (its attack, too, when its process was demoted in
      // place: how the judge deals with the running call is docs/scheduling.md's, beside alice's calls).
      const mallorysCallsDemoted = () => sandbox.pids().length === 2 && sandbox.pidFor("mallory") === sandbox.pids()[1];
      expect(await expectHealthy(h, "alice")).toBe(1);
      expect(await expectHealthy(h, "mallory")).toBe(1);
      const shared = sandbox.pidFor("mallory") as number;
      expect(sandbox.pidFor("alice")).toBe(shared);
      // The call loads the tool first: its describe spins until the load's timeout, far beyond the wait below.
      const attack = h.call("mallory", "spin_load_run");
      let acted = false;
      const aliceCalls = aliceMeanwhile(h, () => acted);
      try {
        await untilHostActs(() => mallorysCallsDemoted(), shared, skip);
      } finally {
        acted = true;
      }
      expect((await aliceCalls).every((r) => r.status === "ok")).toBe(true);
      expect(sandbox.pidFor("alice")).toBe(sandbox.pids()[0]);
      void attack; // still spinning in the demoted process, at low priority: ended by the host's close
    },
    HOST_ACTS_TEST_MS,
  );
});
