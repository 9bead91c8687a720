import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { preparedCallsOf } from "../../src/prepared-calls.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * `runPrepared(prepared, { signal })`: the caller can stop a running call at once (background jobs use it
 * to cancel; they reach the host's prepared calls as the job service does, through `preparedCallsOf`). The isolate is disposed, the call ends as ExecutionError, and the host keeps serving.
 */
const TOOL = `
import { logger } from "@animaworks/tool";
let calls = 0;
export function get_tool_schemas() {
  return [
    { name: "halt_spin", description: "spins", input_schema: { type: "object", properties: {} } },
    { name: "halt_count", description: "counts", input_schema: { type: "object", properties: {} } },
  ];
}
export function dispatch(name) {
  calls++;
  if (name === "halt_count") return String(calls);
  logger.info("spinning");
  for (;;) {}
}
`;

for (const isolation of ["process", "in-process"] as const) {
  describe(`aborting a call (${isolation} isolation)`, () => {
    let data: TempDataDir;
    let host: ToolHost;
    let spinning: () => void = () => undefined;
    beforeAll(() => {
      data = makeDataDir({ "animas/alice/tools/halt.ts": TOOL });
      host = createHost({
        dataDir: data.dir,
        isolation,
        sandboxProcesses: 1,
        timeoutMs: 20_000,
        onLog: (record) => record.message === "spinning" && spinning(),
      });
    });
    afterAll(async () => {
      await host.close();
      data.cleanup();
    });

    it("stops a spinning call when its signal aborts, long before its timeout, and the next call works", async () => {
      expect(await host.call("alice", "halt_count")).toMatchObject({ status: "ok", output: "1" });
      const prepared = await preparedCallsOf(host).prepare("alice", "halt_spin", {});
      const controller = new AbortController();
      const started = new Promise<void>((resolve) => (spinning = resolve));
      const call = preparedCallsOf(host).runPrepared(prepared, { signal: controller.signal });
      await started;
      const abortedAt = performance.now();
      controller.abort();
      const result = await call;
      expect(result).toMatchObject({
        status: "error",
        error_type: "ExecutionError",
        fault: "caller",
        message: "the call was stopped by its caller before it finished",
      });
      expect(performance.now() - abortedAt).toBeLessThan(10_000); // at the abort, not the call's 20 s timeout
      // A fresh isolate serves the next call (the stopped one was disposed, never reused).
      expect(await host.call("alice", "halt_count")).toMatchObject({ status: "ok", output: "1" });
    });

    it("does not start a call whose signal is already aborted", async () => {
      const prepared = await preparedCallsOf(host).prepare("alice", "halt_spin", {});
      const controller = new AbortController();
      controller.abort();
      const result = await preparedCallsOf(host).runPrepared(prepared, { signal: controller.signal });
      expect(result).toMatchObject({ status: "error", error_type: "ExecutionError", fault: "caller" });
      expect(result.durationMs).toBeLessThan(10_000); // never started: not the 20 s timeout
    });
  });
}
