import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hostStatusDir, readHostStatuses } from "../../src/audit/host-status.js";
import { main } from "../../src/cli/main.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";
import { simpleTool } from "../helpers/tools.js";

/**
 * A long-running host publishes what its warm pools hold; `audit`, run as another command, shows it.
 * The file goes when the host closes, and a file left by a process that is gone is ignored and removed.
 */
describe("host status in audit", () => {
  let data: TempDataDir;
  let host: ToolHost;
  beforeAll(() => {
    data = makeDataDir({ "animas/alice/tools/echo.mjs": simpleTool("echo") });
    host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "no-core-tools"), onLog: () => {} });
  });
  afterAll(async () => {
    await host.close();
    data.cleanup();
  });

  it("shows the warm pools of a running host, and forgets the host once it closed", async () => {
    expect((await host.call("alice", "echo_run", {})).status).toBe("ok");
    await waitFor(() => readHostStatuses(data.dir).some((s) => s.warmPools.some((pool) => (pool.idleIsolates ?? 0) >= 1)), 8_000, 50);
    const [status] = readHostStatuses(data.dir);
    expect(status?.pid).toBe(process.pid);
    expect(statSync(join(hostStatusDir(data.dir), `${process.pid}.json`)).mode & 0o777).toBe(0o600);
    const holding = status!.warmPools.find((pool) => (pool.idleIsolates ?? 0) >= 1)!;
    expect(holding).toMatchObject({ lowPriority: false, animas: 1, idleIsolates: 1 });
    expect(holding.idleBytes).toBeGreaterThan(100_000);
    // One cordon per Anima: the warm budget is split over the most processes that may live.
    expect(holding.maxIdleBytes).toBe(Math.floor((host.config.warmIsolatesMb * 2 ** 20) / host.config.maxSandboxProcesses));

    const stdout: string[] = [];
    const code = await main(["--data-dir", data.dir, "audit"], { stdout: (t) => stdout.push(t), stderr: () => {} });
    expect(code).toBe(0);
    expect(stdout.join("\n")).toMatch(
      new RegExp(
        `Running hosts:\\n  pid ${process.pid}, since .*\\n    sandbox process \\d+: 1 Anima placed, 1 idle isolate, \\d+\\.\\d of \\d+\\.\\d MB, 0 evicted`,
      ),
    );
    const json = JSON.parse((await captureJson()).join("\n")) as { hosts: Array<{ pid: number }> };
    expect(json.hosts.map((h) => h.pid)).toEqual([process.pid]);

    await host.close();
    expect(readHostStatuses(data.dir)).toEqual([]);
    expect(readdirSync(hostStatusDir(data.dir))).toEqual([]);
  });

  it("ignores and removes a status left by a process that is gone", () => {
    const dead = join(hostStatusDir(data.dir), "4194000.json");
    writeFileSync(dead, JSON.stringify({ pid: 4194000, startedAt: "", updatedAt: "", warmPools: [] }));
    expect(readHostStatuses(data.dir)).toEqual([]);
    expect(existsSync(dead)).toBe(false);
  });

  async function captureJson(): Promise<string[]> {
    const stdout: string[] = [];
    await main(["--data-dir", data.dir, "audit", "--json"], { stdout: (t) => stdout.push(t), stderr: () => {} });
    return stdout;
  }
});
