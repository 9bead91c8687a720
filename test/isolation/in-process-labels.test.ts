import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { resolveConfig } from "../../src/config.js";
import { createExecutor } from "../../src/isolation/executor.js";
import { IsolateRunner } from "../../src/isolation/isolate/isolate-runner.js";
import type { CallContext, CallRequest, CapabilityReply, ToolLogLine } from "../../src/isolation/wire/messages.js";
import { makeDataDir, type TempDataDir } from "../helpers/data-dir.js";
import { type ProbeTool, buildProbeTool } from "../helpers/probe-tool.js";

/**
 * In-process isolation hands the isolate runner a call's label, as a sandbox process gets
 * (wire/messages.ts `labelled`): the runner never holds the host's record of a call. What the runner
 * reports back (capability requests, log lines) reaches the host under that record, found by the label
 * object its call was given, so that each call's capabilities and lines stay its own.
 */
const PROBE = `
import { fs, logger } from "@animaworks/tool";
export function get_tool_schemas() {
  return [{ name: "probe_run", description: "who the host served", input_schema: { type: "object", properties: {} } }];
}
export async function dispatch() {
  logger.info("asking");
  const stat = await fs.stat("x");
  return stat.type;
}
`;

describe("in-process isolation: the runner knows calls by their label", () => {
  let probe: ProbeTool;
  let data: TempDataDir;
  beforeAll(async () => {
    probe = await buildProbeTool(PROBE);
    data = makeDataDir();
  });
  afterAll(() => {
    probe.cleanup();
    data.cleanup();
  });

  it("capabilities and log lines reach the host's own record of each call; the runner is given the label only", async () => {
    const served: CallContext[] = [];
    const lines: ToolLogLine[] = [];
    const config = resolveConfig({ dataDir: data.dir, isolation: "in-process" }, {});
    // The capability answers with the call id of the record it was run for: each call must get its own.
    const handle = createExecutor(
      config,
      (line) => lines.push(line),
      async (context, name): Promise<CapabilityReply> => {
        served.push(context);
        return { ok: true, value: { type: `${name} for ${context.callId ?? "?"}`, size: 1, mtimeMs: 0 } };
      },
    );
    // What the runner is given (the spy calls through).
    const spy = vi.spyOn(IsolateRunner.prototype, "call");
    try {
      const base = probe.request("alice");
      const records: CallContext[] = ["call-1", "call-2"].map((callId) => ({ ...base.context, callId, jobId: `job-of-${callId}` }));
      const requests: CallRequest[] = records.map((context) => ({ ...base, context }));
      const outcomes = await Promise.all(requests.map((request) => handle.executor.call(request)));

      expect(outcomes.map((outcome) => (outcome.ok && outcome.value.kind !== "none" ? outcome.value.text : outcome))).toEqual([
        "fs.stat for call-1",
        "fs.stat for call-2",
      ]);
      expect(spy.mock.calls.map(([request]) => request.context)).toEqual([
        { anima: "alice", tool: "probe" },
        { anima: "alice", tool: "probe" },
      ]);
      // The very records the host made, not copies: the host's sinks are keyed by them (composition.ts).
      expect(served).toHaveLength(2);
      for (const record of records) expect(served.filter((context) => context === record)).toHaveLength(1);
      expect(lines.map((line) => line.message)).toEqual(["asking", "asking"]);
      for (const record of records) expect(lines.filter((line) => line.context === record)).toHaveLength(1);
    } finally {
      spy.mockRestore();
      await handle.executor.close();
    }
  });
});
