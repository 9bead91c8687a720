import { describe, expect, it } from "vitest";
import { callResultOf } from "../../src/mcp/job-tasks.js";
import { resultOf } from "../../src/jobs/service.js";
import type { Job } from "../../src/jobs/store.js";
import { jobFailure, jobOutputValue, jobText, jobView } from "../../src/jobs/view.js";
import { listedJobView } from "../../src/jobs/listing.js";

/** A job's recorded result as every door gives it: `jobs result -j`, the library, MCP tasks, job views. */
function job(fields: Partial<Job>): Job {
  return {
    id: "0123456789ab",
    anima: "alice",
    tool: "web",
    action: "fetch",
    schemaName: "web_fetch",
    argsJson: "{}",
    bundleHash: "f".repeat(64),
    priority: 0,
    status: "succeeded",
    attempts: 1,
    maxAttempts: 1,
    retryBackoffMs: 1_000,
    timeoutMs: 60_000,
    submittedAt: 0,
    cancelRequested: false,
    ...fields,
  };
}

describe("a job's result, as a direct call's", () => {
  it("gives an object result as the object and text as text, by what the job recorded", () => {
    const object = job({ result: '{"n":1}', resultStructured: true });
    const text = job({ result: '{"n":1}', resultStructured: false });
    expect(resultOf(object)).toEqual({ status: "ok", output: { n: 1 } });
    expect(resultOf(text)).toEqual({ status: "ok", output: '{"n":1}' });
    expect(callResultOf(object)).toEqual({ content: [{ type: "text", text: '{"n":1}' }], structuredContent: { n: 1 } });
    // Text that looks like an object is not given as structuredContent.
    expect(callResultOf(text)).toEqual({ content: [{ type: "text", text: '{"n":1}' }] });
    expect(jobView(object)).toMatchObject({ result_bytes: 7, result_structured: true });
    expect(jobView(text)).toMatchObject({ result_bytes: 7, result_structured: false });
  });

  it("reads a job recorded before the flag was kept from its text", () => {
    expect(jobOutputValue(job({ result: '{"n":1}' }))).toEqual({ n: 1 });
    expect(jobOutputValue(job({ result: "[1,2]" }))).toBe("[1,2]");
    expect(jobOutputValue(job({}))).toBeUndefined();
  });

  it("keeps a cancelled job's partial result with its error, everywhere", () => {
    const cancelled = job({ status: "cancelled", result: '{"rows":2}', resultStructured: true });
    expect(jobFailure(cancelled).message).toMatch(/was cancelled before it finished; .*partial result/);
    expect(resultOf(cancelled)).toMatchObject({ status: "error", error_type: "ExecutionError", fault: "caller", output: { rows: 2 } });
    const mcp = callResultOf(cancelled) as { isError: boolean; content: Array<{ text: string }> };
    expect(mcp.isError).toBe(true);
    expect(JSON.parse(mcp.content[0]!.text)).toMatchObject({ status: "error", output: { rows: 2 } });
    expect(jobText(cancelled)).toContain("partial result: 10 bytes");
    // Without one, a cancel says only that.
    const bare = job({ status: "cancelled" });
    expect(resultOf(bare)).not.toHaveProperty("output");
    expect(jobFailure(bare).message).toBe("job 0123456789ab was cancelled before it finished");
  });
});

describe("a job of a listing, as JSON (jobs list --json, MCP list_jobs)", () => {
  it("listed_texts_cut: gives arguments too long to list as their size and first characters, and the whole result's size and kind", () => {
    const argsJson = JSON.stringify({ blob: "x".repeat(10_000) });
    const cut = job({ argsJson: argsJson.slice(0, 4_096), result: '{"rows":"', resultStructured: true, listed: { argsBytes: 10_011, resultBytes: 50_000 } });
    const view = listedJobView(cut);
    expect(view).not.toHaveProperty("args");
    expect(view).toMatchObject({ args_bytes: 10_011, args_preview: argsJson.slice(0, 4_096), result_bytes: 50_000, result_structured: true });
    // Before the flag was kept, a cut result's kind is unknown: not guessed from a fragment.
    expect(listedJobView(job({ ...cut, resultStructured: undefined }))).not.toHaveProperty("result_structured");
    // Texts listed whole read as jobView reads them.
    const whole = job({ argsJson: '{"url":"u"}', result: '{"n":1}', listed: { argsBytes: 11, resultBytes: 7 } });
    expect(listedJobView(whole)).toEqual(jobView(whole));
    expect(listedJobView(whole)).toMatchObject({ args: { url: "u" }, result_bytes: 7, result_structured: true });
  });
});
