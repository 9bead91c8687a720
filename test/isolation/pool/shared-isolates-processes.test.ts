import { afterAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost, sandboxOf } from "../../../src/host.js";
import { type TempDataDir, makeDataDir } from "../../helpers/data-dir.js";

/**
 * One Anima's tools sharing a warm isolate where they run: in sandbox processes, which get the operator's
 * `toolsPerIsolate` at launch (warm-pool.ts, sharing).
 */
const tool = (name: string) => `
let calls = 0;
globalThis.owner ??= ${JSON.stringify(name)};
export function get_tool_schemas() {
  return [{ name: "${name}_run", description: "Counts its calls.", input_schema: { type: "object", properties: {} } }];
}
export function dispatch() {
  return { calls: ++calls, owner: globalThis.owner };
}
`;

const dataDirs: TempDataDir[] = [];
const hosts: ToolHost[] = [];
afterAll(async () => {
  await Promise.all(hosts.map((host) => host.close()));
  for (const data of dataDirs) data.cleanup();
});

function start(toolsPerIsolate?: number): ToolHost {
  const data = makeDataDir({ "animas/alice/tools/alpha.ts": tool("alpha"), "animas/alice/tools/beta.ts": tool("beta") });
  dataDirs.push(data);
  const host = createHost({ dataDir: data.dir, isolation: "process", ...(toolsPerIsolate !== undefined ? { toolsPerIsolate } : {}), onLog: () => {} });
  hosts.push(host);
  return host;
}

async function aliceIdleIsolates(host: ToolHost): Promise<number> {
  const report = (await sandboxOf(host)!.warmPoolReport()).find((each) => each.cordon === "anima:alice");
  return report?.idleIsolates ?? -1;
}

describe("shared isolates in sandbox processes", () => {
  it("an Anima's two tools share one warm isolate by default, each with its own global and state; toolsPerIsolate 1 keeps them apart", async () => {
    const [shared, apart] = [start(), start(1)];
    for (const host of [shared, apart]) {
      for (let round = 1; round <= 2; round++) {
        for (const name of ["alpha", "beta"]) {
          const result = await host.call("alice", `${name}_run`, {});
          expect(result.status === "ok" && JSON.parse(result.output)).toEqual({ calls: round, owner: name });
        }
      }
    }
    expect(await aliceIdleIsolates(shared)).toBe(1);
    expect(await aliceIdleIsolates(apart)).toBe(2);
  });
});
