import { afterEach, describe, expect, it } from "vitest";
import type { LogRecord } from "../../src/host-options.js";
import { type ToolHost, createHost, sandboxOf } from "../../src/host.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { COUNTER_TOOL, HOSTILE_DIR, assertNoLeak, expectError, expectOk } from "./harness.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * A capability flood that runs into its deadline must cost nothing but its own call. It once crashed
 * the sandbox process it ran in (SIGSEGV in isolated-vm's timer thread: every answer re-entered the
 * isolate with a timeout of its own, hundreds of thousands of timers per call), failing the next
 * Animas' calls there. Here the flood times out, and other Animas' calls made at once, on the same
 * single process, all succeed; the process never crashes. On the old code this failed in 4 runs of 4.
 */
describe("capability flood (process isolation, one sandbox process)", () => {
  let data: TempDataDir | undefined;
  let host: ToolHost | undefined;
  afterEach(async () => {
    await host?.close();
    data?.cleanup();
  });

  it("times out, then other Animas' calls on the same process succeed at once", async () => {
    data = makeDataDir({
      "config.json": JSON.stringify({ credentials: { EVE_OWN_TOKEN: { api_key: "eve-own-secret-value" } } }),
      "animas/eve/tools/capability_flood.ts": readFileSync(join(HOSTILE_DIR, "capability_flood.ts"), "utf8"),
      "animas/alice/tools/counter.ts": COUNTER_TOOL,
      "animas/bob/tools/counter.ts": COUNTER_TOOL,
    });
    const logs: LogRecord[] = [];
    host = createHost({
      dataDir: data.dir,
      coreToolsDir: join(data.dir, "no-core-tools"),
      timeoutMs: 5_000,
      cordons: "all",
      sandboxProcesses: 1,
      onLog: (r) => logs.push(r),
    });
    const pidsBefore = sandboxOf(host)!.pids();
    const flood = await host.call("eve", "capability_flood_run", {});
    expectError(flood, "Timeout");
    assertNoLeak(flood, data);
    expect(JSON.stringify(flood)).not.toContain("eve-own-secret-value");
    // Right after the deadline, when the flood's leftovers come due: first calls (load and describe),
    // concurrently, by two Animas that have never called before.
    const victims = await Promise.all([
      ...Array.from({ length: 4 }, () => host!.call("alice", "counter_count", {})),
      ...Array.from({ length: 4 }, () => host!.call("bob", "counter_count", {})),
    ]);
    for (const result of victims) expectOk(result);
    // Still the same process a while later (a crash would have replaced it), and it keeps serving. (The
    // flood kept its process busy past LONG_CALL_MS, so eve's later calls would go to the low-priority
    // process, started beside it: listed after it.)
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (const result of await Promise.all([host.call("alice", "counter_count", {}), host.call("bob", "counter_count", {})])) expectOk(result);
    expect(sandboxOf(host)!.pids()[0]).toBe(pidsBefore[0]);
    expect(logs.filter((r) => /SIGSEGV|stopped \(signal/.test(r.message))).toEqual([]);
  }, 30_000);
});
