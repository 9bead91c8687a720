import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IsolateRunner } from "../../../src/isolation/isolate/isolate-runner.js";
import type { CallOutcome, CallRequest } from "../../../src/isolation/wire/messages.js";
import { type ProbeTool, buildProbeTool } from "../../helpers/probe-tool.js";

/**
 * One Anima's tools in one warm isolate, each in a context of its own (warm-pool.ts, sharing), through
 * the isolate runner with real isolates.
 */
const toolSource = (name: string, extra = "") => `
let calls = 0;
globalThis.owner ??= ${JSON.stringify(name)};
export function get_tool_schemas() {
  return [{ name: "probe_run", description: "${name}", input_schema: { type: "object", properties: {} } }];
}
export async function dispatch() {
  ${extra}
  return { tool: ${JSON.stringify(name)}, calls: ++calls, owner: globalThis.owner };
}
`;

let alpha: ProbeTool;
let beta: ProbeTool;
let spinner: ProbeTool;
let sleeper: ProbeTool;
let hoarder: ProbeTool;
let poisoner: ProbeTool;
beforeAll(async () => {
  [alpha, beta, spinner, sleeper, hoarder, poisoner] = await Promise.all([
    buildProbeTool(toolSource("alpha")),
    buildProbeTool(toolSource("beta")),
    buildProbeTool(toolSource("spinner", "while (true) {}")),
    // Its first call returns at once (to make the isolate warm); later ones take 2 s.
    buildProbeTool(toolSource("sleeper", "if (calls > 0) await new Promise((resolve) => setTimeout(resolve, 2000));")),
    // ≈ 12 MB of module state: over what another tool's context may join.
    buildProbeTool(toolSource("hoarder", "globalThis.kept ??= Array.from({ length: 300000 }, (_, i) => 'item ' + i);")),
    // poison_neighbour: rewrites what a neighbour's code and the prelude would use, if they shared a realm.
    buildProbeTool(
      toolSource(
        "poisoner",
        `Object.prototype.calls = 1e9;
        Object.defineProperty(Object.prototype, "owner", { get: () => "poisoner", set() {}, configurable: true });
        JSON.stringify = () => '{"tool":"poisoned"}';
        JSON.parse = () => ({ tool: "poisoned" });
        Array.prototype.map = function () { return ["poisoned"]; };
        globalThis.owner = "poisoner";`,
      ),
    ),
  ]);
});
afterAll(() => [alpha, beta, spinner, sleeper, hoarder, poisoner].forEach((tool) => tool.cleanup()));

/** A call of `tool` as `anima`, named `name` (tools of one Anima differ by name: each has its own lineage). */
function request(tool: ProbeTool, anima: string, name: string, timeoutMs = 2_000): CallRequest {
  const base = tool.request(anima, { timeoutMs });
  return { ...base, context: { ...base.context, tool: name } };
}

function valueOf(outcome: CallOutcome): Record<string, unknown> {
  if (!outcome.ok) throw new Error(`call failed: ${outcome.error.type}: ${outcome.error.message}`);
  return JSON.parse(outcome.value.kind === "json" ? outcome.value.text : "null") as Record<string, unknown>;
}

async function withRunner(options: ConstructorParameters<typeof IsolateRunner>[0], body: (runner: IsolateRunner) => Promise<void>): Promise<void> {
  const runner = new IsolateRunner({ compactIdleAfterMs: 0, ...options });
  try {
    await body(runner);
  } finally {
    await runner.close();
  }
}

describe("shared isolates (isolate runner)", () => {
  it("two tools of one Anima share one warm isolate, each with its own global and module state", () =>
    withRunner({}, async (runner) => {
      expect(valueOf(await runner.call(request(alpha, "alice", "alpha")))).toEqual({ tool: "alpha", calls: 1, owner: "alpha" });
      // beta's global is its own: alpha's `owner` is not there.
      expect(valueOf(await runner.call(request(beta, "alice", "beta")))).toEqual({ tool: "beta", calls: 1, owner: "beta" });
      expect(runner.warmPoolStats().idleIsolates).toBe(1);
      expect(valueOf(await runner.call(request(alpha, "alice", "alpha")))).toMatchObject({ calls: 2, owner: "alpha" });
      expect(valueOf(await runner.call(request(beta, "alice", "beta")))).toMatchObject({ calls: 2, owner: "beta" });
      expect(runner.warmPoolStats().idleIsolates).toBe(1);
    }));

  it("never shares across Animas, nor with toolsPerIsolate 1", async () => {
    await withRunner({}, async (runner) => {
      valueOf(await runner.call(request(alpha, "alice", "alpha")));
      valueOf(await runner.call(request(beta, "bob", "beta")));
      expect(runner.warmPoolStats().idleIsolates).toBe(2);
    });
    await withRunner({ toolsPerIsolate: 1 }, async (runner) => {
      valueOf(await runner.call(request(alpha, "alice", "alpha")));
      valueOf(await runner.call(request(beta, "alice", "beta")));
      expect(runner.warmPoolStats().idleIsolates).toBe(2);
    });
  });

  it("a tool stopped at its timeout ends the isolate it shared; the other tool's next call runs afresh", () =>
    withRunner({}, async (runner) => {
      expect(valueOf(await runner.call(request(alpha, "alice", "alpha")))).toMatchObject({ calls: 1 });
      const stopped = await runner.call(request(spinner, "alice", "spinner", 200));
      expect(stopped).toMatchObject({ ok: false, error: { type: "Timeout" } });
      expect(runner.warmPoolStats().idleIsolates).toBe(0);
      expect(valueOf(await runner.call(request(alpha, "alice", "alpha")))).toMatchObject({ calls: 1, owner: "alpha" });
    }));

  it("calls of two tools of one Anima at once do not wait for each other", () =>
    withRunner({}, async (runner) => {
      valueOf(await runner.call(request(sleeper, "alice", "sleeper")));
      valueOf(await runner.call(request(alpha, "alice", "alpha")));
      expect(runner.warmPoolStats().idleIsolates).toBe(1);
      const order: string[] = [];
      const slow = runner.call(request(sleeper, "alice", "sleeper", 10_000)).then((outcome) => order.push(`sleeper:${String(valueOf(outcome)["calls"])}`));
      const quick = runner.call(request(alpha, "alice", "alpha", 10_000)).then((outcome) => order.push(`alpha:${String(valueOf(outcome)["tool"])}`));
      await Promise.all([slow, quick]);
      // alpha's context was in the isolate the sleeper held: alpha got an isolate of its own meanwhile.
      expect(order).toEqual(["alpha:alpha", "sleeper:2"]);
    }));

  it("poison_neighbour: a tool that rewrites its globals and builtins changes nothing of the other tool in its isolate", () =>
    withRunner({}, async (runner) => {
      expect(valueOf(await runner.call(request(alpha, "alice", "alpha")))).toEqual({ tool: "alpha", calls: 1, owner: "alpha" });
      for (let i = 0; i < 2; i++) expect((await runner.call(request(poisoner, "alice", "poisoner"))).ok).toBe(true);
      expect(runner.warmPoolStats().idleIsolates).toBe(1);
      // alpha's context, in the same isolate: its own builtins, its own global, its own state.
      expect(valueOf(await runner.call(request(alpha, "alice", "alpha")))).toEqual({ tool: "alpha", calls: 2, owner: "alpha" });
    }));

  it("a tool that keeps a large heap gets no neighbour", () =>
    withRunner({}, async (runner) => {
      valueOf(await runner.call(request(hoarder, "alice", "hoarder", 10_000)));
      valueOf(await runner.call(request(alpha, "alice", "alpha")));
      expect(runner.warmPoolStats().idleIsolates).toBe(2);
    }));
});
