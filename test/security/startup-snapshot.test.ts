import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IsolateRunner } from "../../src/isolation/isolate/isolate-runner.js";
import { type ProbeTool, buildProbeTool } from "../helpers/probe-tool.js";

/**
 * Isolates made from the V8 startup snapshot must be what isolates that ran the prelude are. V8 installs
 * WebAssembly, SharedArrayBuffer, Atomics and `ArrayBuffer.prototype.resize` again when it makes a
 * context from a snapshot; the prelude removes them again when the host binds the context. Each call
 * below runs in a fresh isolate (its own Anima), most of them made from the snapshot.
 */
const PROBE = `
export function get_tool_schemas() {
  return [{ name: "probe_run", description: "what the global offers", input_schema: { type: "object", properties: {} } }];
}
export function dispatch() {
  return {
    WebAssembly: typeof WebAssembly,
    SharedArrayBuffer: typeof SharedArrayBuffer,
    Atomics: typeof Atomics,
    WeakRef: typeof WeakRef,
    resize: typeof ArrayBuffer.prototype.resize,
    bind: typeof globalThis.__awBind,
    host: typeof globalThis.__awHost,
    random: Math.random(),
  };
}
`;

describe("startup snapshot", () => {
  let probe: ProbeTool;
  const runner = new IsolateRunner({});
  beforeAll(async () => {
    probe = await buildProbeTool(PROBE);
  });
  afterAll(async () => {
    await runner.close();
    probe.cleanup();
  });

  it("isolates made from it offer exactly what the prelude leaves, and their random numbers differ", async () => {
    const seen: Array<Record<string, unknown>> = [];
    for (let i = 0; i < 8; i++) {
      const outcome = await runner.call(probe.request(`anima${i}`));
      if (!outcome.ok || outcome.value.kind === "none") throw new Error(JSON.stringify(outcome));
      seen.push(JSON.parse(outcome.value.text) as Record<string, unknown>);
    }
    expect(runner.usesStartupSnapshot).toBe(true);
    for (const probe of seen) {
      expect(probe).toMatchObject({
        WebAssembly: "undefined",
        SharedArrayBuffer: "undefined",
        Atomics: "undefined",
        WeakRef: "undefined",
        resize: "undefined",
        bind: "undefined",
        host: "undefined",
      });
    }
    expect(new Set(seen.map((p) => p["random"])).size).toBe(seen.length);
  });
});
