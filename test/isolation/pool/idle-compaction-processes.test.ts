import { afterAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost, sandboxOf } from "../../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor } from "../../helpers/data-dir.js";

/**
 * Idle compaction where it runs: in sandbox processes (started with V8's collector exposed to the
 * prelude), after the operator's `compactIdleIsolatesAfterMs`, which reaches each process at launch.
 */
const TOOL = `
export function get_tool_schemas() {
  return [{ name: "parse_run", description: "Parses a document.", input_schema: { type: "object", properties: {} } }];
}
export function dispatch() {
  // ≈ 12 MB of garbage a call leaves: far over what the isolate holds once compacted (≈ 1.5 MB).
  const doc = JSON.stringify(Array.from({ length: 20000 }, (_, i) => ({ id: i, title: "item " + i, score: i / 7 })));
  return { items: JSON.parse(doc).length, collector: typeof globalThis.__awCollectGarbage };
}
`;

const dataDirs: TempDataDir[] = [];
const hosts: ToolHost[] = [];
afterAll(async () => {
  await Promise.all(hosts.map((host) => host.close()));
  for (const data of dataDirs) data.cleanup();
});

/** The figures of the process serving alice. */
async function aliceProcess(host: ToolHost): Promise<{ compactions: number; idleBytes: number; idleIsolates: number }> {
  const report = (await sandboxOf(host)!.warmPoolReport()).find((each) => each.cordon === "anima:alice");
  return { compactions: report?.compactions ?? -1, idleBytes: report?.idleBytes ?? -1, idleIsolates: report?.idleIsolates ?? -1 };
}

describe("idle compaction in sandbox processes", () => {
  it("a process compacts an isolate idle as long as the host was told, and one told 0 never does", async () => {
    const start = (compactIdleIsolatesAfterMs: number): ToolHost => {
      const data = makeDataDir({ "animas/alice/tools/parse.ts": TOOL });
      dataDirs.push(data);
      const host = createHost({ dataDir: data.dir, isolation: "process", compactIdleIsolatesAfterMs, onLog: () => {} });
      hosts.push(host);
      return host;
    };
    const [compacting, never] = [start(200), start(0)];
    for (const host of [compacting, never]) {
      for (let i = 0; i < 2; i++) {
        const result = await host.call("alice", "parse_run", {});
        expect(result.status === "ok" && JSON.parse(result.output)).toEqual({ items: 20_000, collector: "undefined" });
      }
    }
    await waitFor(async () => (await aliceProcess(compacting)).compactions === 1, 20_000, 50);
    const after = await aliceProcess(compacting);
    // The other host's process had as long (and longer: it answered second), and compacted nothing: its
    // isolate, which ran the same calls, is the control (on a loaded machine the compaction may come
    // before anything could be read of the compacting process's isolate).
    const control = await aliceProcess(never);
    expect(control).toMatchObject({ compactions: 0, idleIsolates: 1 });
    expect(after.idleIsolates).toBe(1);
    // What the tool's garbage held is given back (the pool's figure of V8's heap, measured again).
    expect(after.idleBytes).toBeLessThan(control.idleBytes * 0.6);
    // The compacted isolate serves the next call.
    const next = await compacting.call("alice", "parse_run", {});
    expect(next.status).toBe("ok");
  });
});
