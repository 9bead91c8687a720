import { afterEach, describe, expect, it } from "vitest";
import type { LogRecord } from "../../../src/host-options.js";
import { ToolHostError } from "../../../src/errors.js";
import { type ToolHost, createHost, sandboxOf } from "../../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor } from "../../helpers/data-dir.js";
import { processTree } from "../../../src/isolation/os/process-cpu.js";
import { spawnSync } from "node:child_process";

const bwrapWorks = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "true"]).status === 0;
if (!bwrapWorks && process.env["CI"] === "true") throw new Error("bubblewrap is required on CI (.ci/run installs it) but does not work here");
if (!bwrapWorks) console.warn("stop-signal: the stop of a whole bubblewrap launch is not tried (bubblewrap is not installed)");

/**
 * A caller's signal is the call's stop, with its reason: a call whose signal aborts ends with the
 * signal's reason when that is one of the host's errors (how a background job's deadline or cancel
 * reaches the call). The sandbox pool's one timer per call is the last-resort hard stop for a process
 * that does not answer, counted from the deadline or, sooner, from the moment the signal aborted.
 */
const WAITER = `
import { logger } from "@animaworks/tool";
export function get_tool_schemas() {
  return [{ name: "waiter_run", description: "Waits forever.", input_schema: { type: "object", properties: {} } }];
}
export async function dispatch() {
  logger.info("started");
  await new Promise(() => {});
}
`;

describe("a call's stop signal", () => {
  let data: TempDataDir | undefined;
  let host: ToolHost | undefined;
  const logs: LogRecord[] = [];
  afterEach(async () => {
    await host?.close();
    data?.cleanup();
    host = undefined;
    data = undefined;
    logs.length = 0;
  });

  function start(osSandbox: "off" | "required" = "off"): ToolHost {
    data = makeDataDir({ "animas/alice/tools/waiter.ts": WAITER });
    host = createHost({ dataDir: data.dir, isolation: "process", sandboxProcesses: 1, osSandbox, onLog: (r) => logs.push(r) });
    return host;
  }

  it("ends the call with the signal's reason when it is one of the host's errors", async () => {
    const h = start();
    const stop = new AbortController();
    const call = h.call("alice", "waiter_run", {}, { signal: stop.signal, timeoutMs: 60_000 });
    await waitFor(() => logs.some((r) => r.message === "started"), 10_000);
    stop.abort(new ToolHostError("Timeout", "job exceeded its timeout of 5 ms"));
    expect(await call).toMatchObject({ status: "error", error_type: "Timeout", message: "job exceeded its timeout of 5 ms" });
    // Any other reason: the call was stopped by its caller, as before.
    const other = new AbortController();
    const second = h.call("alice", "waiter_run", {}, { signal: other.signal, timeoutMs: 60_000 });
    await waitFor(() => logs.filter((r) => r.message === "started").length === 2, 10_000);
    other.abort();
    expect(await second).toMatchObject({ status: "error", error_type: "ExecutionError" });
  });

  /** `pids` stopped (SIGSTOP: they can no longer answer anything) while `run` runs; continued afterwards, if the host has not killed them. */
  async function whileStopped(pids: number | number[], run: () => Promise<void>): Promise<void> {
    const stopped = typeof pids === "number" ? [pids] : pids;
    for (const pid of stopped) process.kill(pid, "SIGSTOP");
    try {
      await run();
    } finally {
      for (const pid of stopped) {
        try {
          process.kill(pid, "SIGCONT");
        } catch {
          // already killed by the host
        }
      }
    }
  }

  /** Waits until the pool runs another process than `pid`, then checks that it serves (a fresh isolate: the 300 ms call times out). */
  async function replacedAndServing(h: ToolHost, pid: number): Promise<void> {
    await waitFor(
      () =>
        sandboxOf(h)!
          .pids()
          .some((p) => p !== pid),
      10_000,
    );
    expect(await h.call("alice", "waiter_run", {}, { timeoutMs: 300 })).toMatchObject({ status: "error", error_type: "Timeout", fault: "tool" });
  }

  // Stopped whole from outside: bwrap and bwrap's init, which the sandbox's own code cannot signal, are
  // stopped too (an operator's stop of the launch, of its session): the host can tell it was not the tool.
  it.skipIf(!bwrapWorks)(
    "a sandbox process whose whole launch is stopped from outside (SIGSTOP) fails its calls as the host's fault, and is replaced",
    async () => {
      const h = start("required");
      const call = h.call("alice", "waiter_run", {}, { timeoutMs: 1_000 });
      await waitFor(() => logs.some((r) => r.message === "started"), 10_000);
      const [pid] = sandboxOf(h)!.pids();
      const tree = processTree(pid!);
      expect(tree.length).toBe(3); // bwrap, its init, Node
      await whileStopped(tree, async () => {
        expect(await call).toMatchObject({
          status: "error",
          error_type: "SandboxCrashed",
          fault: "host",
          message: expect.stringMatching(/stopped by a signal from outside the host \(SIGSTOP\)/),
        });
      });
      await replacedAndServing(h, pid!);
    },
  );

  // The process that runs the sandbox's code can stop itself (test/security/compromised-lifecycle.test.ts,
  // self_sigstop_blames_host): stopped alone, from wherever, it is charged to the tool.
  it("a sandbox process stopped alone fails its call as the tool's timeout, since it could have stopped itself, and is replaced", async () => {
    const h = start();
    const call = h.call("alice", "waiter_run", {}, { timeoutMs: 1_000 });
    await waitFor(() => logs.some((r) => r.message === "started"), 10_000);
    const [pid] = sandboxOf(h)!.pids();
    await whileStopped(pid!, async () => {
      expect(await call).toMatchObject({
        status: "error",
        error_type: "Timeout",
        fault: "tool",
        message: expect.stringMatching(/\(it had stopped: SIGSTOP\)$/),
      });
    });
    await replacedAndServing(h, pid!);
  });

  it("kills a sandbox process that does not answer a stopped call soon after the stop, not at the call's deadline", async () => {
    const h = start();
    const stop = new AbortController();
    const call = h.call("alice", "waiter_run", {}, { signal: stop.signal, timeoutMs: 60_000 });
    await waitFor(() => logs.some((r) => r.message === "started"), 10_000);
    const [pid] = sandboxOf(h)!.pids();
    expect(pid).toBeTypeOf("number");
    await whileStopped(pid!, async () => {
      const stoppedAt = performance.now();
      stop.abort(new ToolHostError("ExecutionError", "job cancelled by request"));
      const result = await call;
      expect(result).toMatchObject({ status: "error", error_type: "ExecutionError", message: "job cancelled by request" });
      const took = performance.now() - stoppedAt;
      expect(took).toBeGreaterThanOrEqual(1_900); // the pool's grace (2 s) for an answer
      expect(took).toBeLessThan(30_000); // far from the call's 60 s deadline, however busy the machine
    });
    await replacedAndServing(h, pid!);
  });
});
