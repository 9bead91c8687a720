import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditRecord } from "../../src/audit/audit-log.js";
import { type ToolHost, createHost, sandboxOf } from "../../src/host.js";
import { MAX_ORIGINAL_RESULT_BYTES } from "../../src/isolation/wire/result-bounds.js";
import { type TempDataDir, makeDataDir, waitFor, within } from "../helpers/data-dir.js";
import { PROJECT_ROOT } from "./harness.js";

/**
 * A compromised sandbox process (test/fixtures/compromised/large-strings-process.mjs, under the host's
 * real launch) answers eve's calls with results no honest prelude makes: larger than the call's result
 * limit (`maxResultTransferBytes`, 1 MiB by default) and said not to have been cut, or cut with a forged
 * original size. The host measures the text itself: an oversized result is a violation (audited, the
 * process replaced) and never reaches a caller or the host's parse of structured results (MCP's
 * `structuredContent`); a forged size never reaches a caller's truncation notice. alice, in her own
 * cordon, gets her own result whole from her untouched process throughout.
 */

const LARGE_STRINGS_PROCESS = join(PROJECT_ROOT, "test", "fixtures", "compromised", "large-strings-process.mjs");
const MI = 2 ** 20;
/** alice's own structured result, long enough to cross in parts. */
const ALICE_REPORT = "r".repeat(200_000);

const REPORT = `
export function get_tool_schemas() {
  return [{ name: "report_make", description: "a long report", input_schema: { type: "object", properties: {} } }];
}
export function dispatch() {
  return { report: "r".repeat(200000) };
}
`;

const WAITING = `
export function get_tool_schemas() {
  const properties = { attack: { type: "string" }, chars: { type: "integer" }, bytes: { type: "number" } };
  return [
    { name: "waiting_forever", description: "never returns", input_schema: { type: "object", properties } },
    { name: "waiting_quick", description: "returns at once", input_schema: { type: "object", properties: {} } },
  ];
}
export function dispatch(name) {
  return name === "waiting_quick" ? "done" : new Promise(() => {});
}
`;

/** A protocol violation the pool reported (child-handle.ts), as audited. */
function violationIn(record: AuditRecord): string | undefined {
  return record.kind === "sandbox_crash" && / it was stopped and replaced \(cordon /.test(record.message) ? record.message : undefined;
}

describe("results a compromised process says are within the call's limit", () => {
  let data: TempDataDir;
  let host: ToolHost;
  let alicePid: number | undefined;

  beforeAll(async () => {
    data = makeDataDir({ "animas/alice/tools/report.mjs": REPORT, "animas/eve/tools/waiting.mjs": WAITING });
    mkdirSync(join(data.dir, "core-tools"));
    host = createHost({
      dataDir: data.dir,
      coreToolsDir: join(data.dir, "core-tools"),
      isolation: "process",
      sandboxEntryScript: LARGE_STRINGS_PROCESS,
      onLog: () => {}, // violations are read from the audit trail
    });
    await aliceServed();
    alicePid = sandboxOf(host)?.pidFor("alice");
    expect(alicePid).toBeDefined();
  });

  afterAll(async () => {
    await host?.close();
    data?.cleanup();
  });

  /** alice's structured result, whole, from the process she had. */
  async function aliceServed(): Promise<void> {
    const result = await within(30_000, "alice's call", host.call("alice", "report_make", {}, { structured: true }));
    expect(result).toMatchObject({ status: "ok", originalBytes: JSON.stringify({ report: ALICE_REPORT }, null, 2).length }); // its output is cut at 50 KB, its structured form is whole
    expect(result.status === "ok" && result.structured?.["report"] === ALICE_REPORT).toBe(true);
    if (alicePid !== undefined) expect(sandboxOf(host)?.pidFor("alice")).toBe(alicePid);
  }

  /** The violation audited for eve's cordon that matches `reported`. */
  async function audited(reported: RegExp): Promise<string> {
    let found: string | undefined;
    const read = async () => (found = (await host.audit.read()).map(violationIn).find((message) => message !== undefined && reported.test(message)));
    await waitFor(async () => (await read()) !== undefined, 20_000, 50);
    return found as string;
  }

  it.each([
    // `{"big":"…"}`: the characters (2 Mi "a"), or the bytes (600,000 "é", 2 bytes each), and 10 more.
    ["oversized_structured_result", 2 * MI, /answered request \d+ with a result of 2097162 characters, over the call's 1048576-byte limit/],
    ["uncut_multibyte_result", 600_000, /answered request \d+ with a result of 1200010 bytes it said was not cut, over the call's 1048576-byte limit/],
  ])("%s: a violation, audited; nothing of it reaches the caller; eve's process is replaced, alice's untouched", async (attack, chars, reported) => {
    const eve = await within(30_000, `eve's ${attack} call`, host.call("eve", "waiting_forever", { attack, chars }, { structured: true }));
    expect(eve).toMatchObject({ status: "error", error_type: "SandboxCrashed" });
    expect(eve).not.toHaveProperty("structured");
    expect(JSON.stringify(eve)).not.toMatch(/aaaa|éééé/);

    const violation = await audited(reported);
    expect(violation).toMatch(/^sandbox process \d+ .*; it was stopped and replaced \(cordon anima:eve\)$/);
    const records = await host.audit.read();
    expect(records).toContainEqual(expect.objectContaining({ kind: "sandbox_crash", anima: "eve", message: violation }));
    const evePid = Number(/^sandbox process (\d+) /.exec(violation)?.[1]);
    expect(evePid).not.toBe(alicePid);
    await waitFor(() => !sandboxOf(host)?.pids().includes(evePid), 20_000);

    // The host keeps serving: eve from a fresh process, alice from hers.
    expect(await within(30_000, "eve's next call", host.call("eve", "waiting_quick"))).toMatchObject({ status: "ok", output: "done" });
    await aliceServed();
  });

  it.each([
    ["1e308", 1e308, 9],
    ["a negative size", -5, 9],
    ["more than V8's longest string", 2 ** 50, MAX_ORIGINAL_RESULT_BYTES],
  ])("forged_original_size (%s): the notice gives a size the host can believe", async (_label, bytes, shown) => {
    const eve = await within(30_000, "eve's call", host.call("eve", "waiting_forever", { attack: "forged_original_size", bytes }));
    expect(eve).toMatchObject({
      status: "ok",
      truncated: true,
      originalBytes: shown,
      output: `cut short\n\n[Output truncated because it exceeded 50KB. Original size: ${shown} bytes]`,
    });
    await aliceServed();
  });
});
