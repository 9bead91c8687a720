import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

const version = (n: number) => `export function get_tool_schemas(){return [{name:"live_get",description:"v"}]}\nexport function dispatch(){return "v${n}"}\n`;

let data: TempDataDir;
let host: ToolHost;
let toolPath: string;

/** Writes like an editor that saves atomically (temp file, then rename over the tool). */
function save(content: string): void {
  writeFileSync(`${toolPath}.swp`, content);
  renameSync(`${toolPath}.swp`, toolPath);
}

async function output(): Promise<string> {
  const result = await host.call("alice", "live_get", {});
  return result.status === "ok" ? result.output : `${result.error_type}`;
}

async function until(expected: string, timeoutMs: number): Promise<number> {
  const started = performance.now();
  for (;;) {
    if ((await output()) === expected) return performance.now() - started;
    if (performance.now() - started > timeoutMs) throw new Error(`still not "${expected}" after ${timeoutMs} ms (got "${await output()}")`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

beforeAll(async () => {
  data = makeDataDir();
  data.anima("alice");
  toolPath = join(data.dir, "animas", "alice", "tools", "live.ts");
  writeFileSync(toolPath, version(0));
  host = createHost({ dataDir: data.dir, isolation: "in-process", watch: true, onLog: () => {} });
  await host.ready();
});
afterAll(async () => {
  await host.close();
  data.cleanup();
});

describe("hot reload", () => {
  it("serves the final content of every burst of edits, never a stale one once settled", async () => {
    expect(await output()).toBe("v0");
    const latencies: number[] = [];
    let n = 0;
    for (let burst = 0; burst < 30; burst++) {
      for (let edit = 0; edit < 4; edit++) save(version(++n));
      latencies.push(await until(`v${n}`, 3_000));
      // settled: it stays on the final version
      expect(await output()).toBe(`v${n}`);
    }
    latencies.sort((a, b) => a - b);
    const p50 = latencies[Math.floor(latencies.length / 2)] as number;
    console.log(`hot reload: save → new version served, p50 ${p50.toFixed(1)} ms over ${latencies.length} bursts`);
    expect(p50).toBeLessThan(1_000);
  });

  it("makes a broken new version unavailable with its error, and recovers when fixed", async () => {
    save("export function get_tool_schemas(){ return [{ name: 'wrong' }] }");
    await until("LoadError", 3_000);
    const listing = await host.list("alice");
    expect(listing.tools.find((t) => t.name === "live")?.error?.type).toBe("LoadError");
    save(version(999));
    await until("v999", 3_000);
  });

  it("lets a call in flight finish on the version it started with while new calls get the new one", async () => {
    const slow = (n: number) =>
      `import { sleep } from "@animaworks/tool";\nexport function get_tool_schemas(){return [{name:"live_get",description:"v"}]}\nexport async function dispatch(){ await sleep(400); return "slow${n}" }\n`;
    save(slow(1));
    await until("slow1", 5_000);
    const inFlight = host.call("alice", "live_get", {});
    save(version(2000));
    await until("v2000", 3_000);
    expect(await inFlight).toMatchObject({ status: "ok", output: "slow1" });
  });

  it("picks up new tools and drops deleted ones", async () => {
    writeFileSync(
      join(data.dir, "animas", "alice", "tools", "fresh.ts"),
      'export function get_tool_schemas(){return [{name:"fresh_x"}]}\nexport function dispatch(){return "new"}',
    );
    const started = performance.now();
    while ((await host.call("alice", "fresh_x", {})).status !== "ok") {
      if (performance.now() - started > 3_000) throw new Error("new tool never appeared");
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  });
});
