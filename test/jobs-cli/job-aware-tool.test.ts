import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LogRecord } from "../../src/host-options.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { JobService } from "../../src/jobs/service.js";
import type { Job } from "../../src/jobs/store.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { cli, waitFor } from "./helpers.js";
import { printResult } from "../../src/cli/output.js";

/**
 * Tools see their job: `progress(fraction, message)` reaches `jobs show`/`wait`, and `isCancelled()`
 * turns true on cancel so the tool can wrap up. A tool that does not is stopped by force after the grace.
 * A profile's `retry` becomes the job's retry policy.
 */
const STEPS_TOOL = `
import { isCancelled, logger, progress, sleep } from "@animaworks/tool";
export const EXECUTION_PROFILE = {
  work: { background_eligible: true, timeout_seconds: 120 },
  stubborn: { background_eligible: true, timeout_seconds: 120 },
  flaky: { background_eligible: true, retry: { attempts: 3, backoff: 0.05 } },
  plain: { background_eligible: true, timeout_seconds: 120 },
  collect: { background_eligible: true, timeout_seconds: 120 },
  jsontext: { background_eligible: true },
};
export function get_tool_schemas() {
  const object = (properties = {}) => ({ type: "object", properties });
  return [
    { name: "steps_work", description: "Works in steps.", input_schema: object({ steps: { type: "integer" }, ms: { type: "integer" } }) },
    { name: "steps_stubborn", description: "Ignores cancellation.", input_schema: object() },
    { name: "steps_flaky", description: "Safe to retry.", input_schema: object() },
    { name: "steps_badprogress", description: "Reports nonsense.", input_schema: object() },
    { name: "steps_plain", description: "Checks isCancelled() without await.", input_schema: object({ steps: { type: "integer" }, ms: { type: "integer" } }) },
    { name: "steps_collect", description: "Collects items; returns what it has when cancelled.", input_schema: object({ steps: { type: "integer" }, ms: { type: "integer" } }) },
    { name: "steps_jsontext", description: "Returns text that looks like JSON.", input_schema: object() },
  ];
}
export async function dispatch(name, args) {
  if (name === "steps_work") {
    for (let i = 0; i < args.steps; i++) {
      await sleep(args.ms);
      await progress((i + 1) / args.steps, "step " + (i + 1));
      if (await isCancelled()) {
        logger.info("saw the cancel after step " + (i + 1));
        return "stopped early";
      }
    }
    return "done, cancelled: " + (await isCancelled());
  }
  if (name === "steps_stubborn") {
    logger.info("spinning");
    for (;;) {}
  }
  if (name === "steps_flaky") return "ok";
  if (name === "steps_collect") {
    const items = [];
    for (let i = 0; i < args.steps; i++) {
      if (isCancelled()) return { items, complete: false };
      await sleep(args.ms);
      items.push(i);
      await progress((i + 1) / args.steps, "item " + i);
    }
    return { items, complete: true };
  }
  if (name === "steps_jsontext") return '{"looks":"like an object"}';
  if (name === "steps_plain") {
    // As two tool authors wrote it against the documented API: no await on the check.
    for (let i = 0; i < args.steps; i++) {
      if (isCancelled()) {
        logger.info("the plain check saw the cancel before step " + (i + 1));
        return "stopped before step " + (i + 1);
      }
      await sleep(args.ms);
      await progress((i + 1) / args.steps, "step " + (i + 1));
    }
    return "all " + args.steps + " steps; isCancelled() is a " + typeof isCancelled();
  }
  try {
    await progress(2, "too far");
    return "accepted";
  } catch (error) {
    return error.type + ": " + error.message;
  }
}
`;

let data: TempDataDir;
let host: ToolHost;
let service: JobService;
const logs: LogRecord[] = [];

beforeAll(() => {
  data = makeDataDir({ "animas/alice/tools/steps.ts": STEPS_TOOL });
  host = createHost({ dataDir: data.dir, isolation: "process", sandboxProcesses: 1, onLog: (record) => logs.push(record) });
  // Heartbeat every 100 ms: a cancel is seen that soon. A short grace keeps the forced stop quick.
  service = new JobService({ host, worker: { pollIntervalMs: 20, heartbeatIntervalMs: 100, idleCheckIntervalMs: 20, cancelGraceMs: 300 } });
});
afterAll(async () => {
  await service.close();
  await host.close();
  data.cleanup();
});

async function withWorker<T>(body: () => Promise<T>): Promise<T> {
  const stop = new AbortController();
  const worker = service.runWorker({ signal: stop.signal });
  try {
    return await body();
  } finally {
    stop.abort();
    await worker;
  }
}

describe("tools that see their job", () => {
  it("reports progress that wait and show display, ending at the last step", async () => {
    const { job } = await service.submit("alice", "steps_work", { steps: 4, ms: 120 });
    const seen: Array<Job["progress"]> = [];
    const done = await withWorker(() => service.wait("alice", job.id, { timeoutMs: 15_000, pollIntervalMs: 20, onProgress: (j) => seen.push(j.progress) }));
    expect(done.status).toBe("succeeded");
    expect(done.result).toBe("done, cancelled: false");
    expect(done.progress).toEqual({ fraction: 1, message: "step 4" });
    // Seen while running, not only at the end.
    expect(seen.some((p) => p !== undefined && p.fraction > 0 && p.fraction < 1)).toBe(true);
    // The call's audit record names its job: an auditor ties the two together.
    await host.audit.flush();
    const records = await host.audit.read({ anima: "alice" });
    expect(records.filter((r) => r.kind === "call" && r.schema === "steps_work" && r.jobId === job.id)).toHaveLength(1);
  });

  it("lets a cancelled tool see isCancelled() and end by itself within the grace", async () => {
    const { job } = await service.submit("alice", "steps_work", { steps: 1_000, ms: 30 });
    await withWorker(async () => {
      await waitFor("progress", async () => ((await service.get("alice", job.id)).progress?.fraction ?? 0) > 0);
      await service.cancel("alice", job.id);
      const done = await service.wait("alice", job.id, { timeoutMs: 10_000, pollIntervalMs: 20 });
      expect(done.status).toBe("cancelled");
    });
    // It ended by itself, having seen the cancel (a tool stopped by force after the grace logs nothing more).
    expect(logs.some((r) => r.anima === "alice" && /^saw the cancel after step \d+$/.test(r.message))).toBe(true);
  });

  it("keeps a cancelled tool's partial result: the job stays cancelled, and jobs result shows the output and says so", async () => {
    const { job } = await service.submit("alice", "steps_collect", { steps: 1_000, ms: 30 });
    const done = await withWorker(async () => {
      await waitFor("progress", async () => ((await service.get("alice", job.id)).progress?.fraction ?? 0) > 0);
      await service.cancel("alice", job.id);
      return service.wait("alice", job.id, { timeoutMs: 10_000, pollIntervalMs: 20 });
    });
    expect(done).toMatchObject({ status: "cancelled", resultStructured: true });
    const partial = JSON.parse(done.result ?? "null") as { items: number[]; complete: boolean };
    expect(partial.complete).toBe(false);
    expect(partial.items.length).toBeGreaterThan(0);
    const text = await cli(data.dir, ["--anima", "alice", "jobs", "result", job.id]);
    expect(text.code).toBe(1);
    expect(JSON.parse(text.stdout)).toEqual(partial);
    expect(text.stderr).toMatch(/^Error \(ExecutionError\): job \w+ was cancelled before it finished; .*partial result/);
    const json = await cli(data.dir, ["--anima", "alice", "jobs", "result", job.id, "-j"]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ status: "error", error_type: "ExecutionError", fault: "caller", job_status: "cancelled", output: partial });
    expect(await service.result("alice", job.id)).toMatchObject({ status: "error", output: partial });
  });

  it("gives jobs result -j the shape of a direct call's -j: an object result as the object, text (even JSON-like) as text", async () => {
    const collect = await service.submit("alice", "steps_collect", { steps: 2, ms: 1 });
    const text = await service.submit("alice", "steps_jsontext", {});
    await withWorker(async () => {
      for (const id of [collect.job.id, text.job.id]) await service.wait("alice", id, { timeoutMs: 10_000, pollIntervalMs: 20 });
    });
    const viaJob = await cli(data.dir, ["--anima", "alice", "jobs", "result", collect.job.id, "-j"]);
    expect(JSON.parse(viaJob.stdout)).toEqual({ status: "ok", job_id: collect.job.id, job_status: "succeeded", output: { items: [0, 1], complete: true } });
    // The same calls made directly, printed as the CLI's -j prints a call's result.
    const directJson = async (schema: string, args: Record<string, unknown>): Promise<unknown> => {
      const printed: string[] = [];
      printResult({ stdout: (t) => printed.push(t), stderr: () => {} }, await host.call("alice", schema, args, { structured: true }), true);
      return (JSON.parse(printed.join("")) as { output: unknown }).output;
    };
    expect(JSON.parse(viaJob.stdout).output).toEqual(await directJson("steps_collect", { steps: 2, ms: 1 }));
    const textJob = await cli(data.dir, ["--anima", "alice", "jobs", "result", text.job.id, "-j"]);
    expect(JSON.parse(textJob.stdout).output).toBe('{"looks":"like an object"}');
    expect(JSON.parse(textJob.stdout).output).toEqual(await directJson("steps_jsontext", {}));
  });

  it("gives isCancelled() as a plain boolean: `if (isCancelled())` runs every step of a job not cancelled", async () => {
    const { job } = await service.submit("alice", "steps_plain", { steps: 5, ms: 5 });
    const done = await withWorker(() => service.wait("alice", job.id, { timeoutMs: 15_000, pollIntervalMs: 20 }));
    expect(done).toMatchObject({ status: "succeeded", result: "all 5 steps; isCancelled() is a boolean" });
    expect(await host.call("alice", "steps_plain", { steps: 2, ms: 1 })).toMatchObject({ status: "ok", output: "all 2 steps; isCancelled() is a boolean" });
  });

  it("turns the plain isCancelled() true after a cancel, by the tool's next awaited step", async () => {
    const { job } = await service.submit("alice", "steps_plain", { steps: 1_000, ms: 30 });
    await withWorker(async () => {
      await waitFor("progress", async () => ((await service.get("alice", job.id)).progress?.fraction ?? 0) > 0);
      await service.cancel("alice", job.id);
      expect((await service.wait("alice", job.id, { timeoutMs: 10_000, pollIntervalMs: 20 })).status).toBe("cancelled");
    });
    expect(logs.some((r) => r.anima === "alice" && /^the plain check saw the cancel before step \d+$/.test(r.message))).toBe(true);
  });

  it("stops a tool that ignores the cancel by force after the grace, and keeps serving", async () => {
    const { job } = await service.submit("alice", "steps_stubborn", {});
    await withWorker(async () => {
      await waitFor("the tool to spin", () => logs.some((r) => r.message === "spinning"));
      const cancelledAt = performance.now();
      await service.cancel("alice", job.id);
      const done = await service.wait("alice", job.id, { timeoutMs: 10_000, pollIntervalMs: 20 });
      expect(done.status).toBe("cancelled");
      // Heartbeat (100 ms) + grace (300 ms) + the stop itself: far from the 120 s timeout, however busy the machine.
      expect(performance.now() - cancelledAt).toBeLessThan(30_000);
      const next = await service.submit("alice", "steps_work", { steps: 1, ms: 1 });
      expect((await service.wait("alice", next.job.id, { timeoutMs: 10_000, pollIntervalMs: 20 })).status).toBe("succeeded");
    });
    // The call itself ended (its isolate was disposed), rather than running on to its deadline unseen.
    await host.audit.flush();
    const calls = await host.audit.read({ anima: "alice" });
    const stubborn = calls.find((r) => r.kind === "call" && r.schema === "steps_stubborn");
    expect(stubborn).toMatchObject({ outcome: "error", errorType: "ExecutionError" });
    expect((stubborn as { durationMs: number }).durationMs).toBeLessThan(30_000); // not its 120 s timeout
  });

  it("takes the retry policy from the profile, never from the submitter", async () => {
    const flaky = await service.submit("alice", "steps_flaky", {});
    expect(flaky.job).toMatchObject({ maxAttempts: 3, retryBackoffMs: 50 });
    const work = await service.submit("alice", "steps_work", { steps: 1, ms: 1 });
    expect(work.job).toMatchObject({ maxAttempts: 1 });
    await withWorker(() => service.wait("alice", flaky.job.id, { timeoutMs: 10_000, pollIntervalMs: 20 }));
    await service.wait("alice", work.job.id, { timeoutMs: 10_000, pollIntervalMs: 20 }).catch(() => undefined);
  });

  it("checks progress arguments, and does nothing (isCancelled false) in a direct call", async () => {
    const bad = await host.call("alice", "steps_badprogress");
    expect(bad).toMatchObject({ status: "ok", output: "InvalidArguments: progress: fraction must be a number from 0 to 1" });
    const direct = await host.call("alice", "steps_work", { steps: 2, ms: 1 });
    expect(direct).toMatchObject({ status: "ok", output: "done, cancelled: false" });
  });
});
