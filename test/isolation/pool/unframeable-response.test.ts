import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { CallRequest, DescribeRequest } from "../../../src/isolation/wire/messages.js";
import { SandboxPool } from "../../../src/isolation/pool/sandbox-pool.js";
import { PROJECT_ROOT } from "../../../src/project-root.js";
import { waitFor } from "../../helpers/data-dir.js";

/**
 * A sandbox process that cannot frame an answer (test/fixtures/sandbox-faults/unframeable-response.mjs
 * injects the fault) says why on stderr and ends: the host fails that request at once, as a crash,
 * instead of waiting for its deadline, and a fresh process serves the next one.
 */
const UNFRAMEABLE = join(PROJECT_ROOT, "test", "fixtures", "sandbox-faults", "unframeable-response.mjs");
/** Far past what the test waits for: an answer that came from the deadline would show as a Timeout. */
const DEADLINE_MS = 120_000;

function describeRequest(description: string): DescribeRequest {
  const schemas = JSON.stringify([{ name: "probe_run", description, input_schema: { type: "object", properties: {} } }]);
  return {
    op: "describe",
    bundle: {
      hash: `unframeable-${description}`,
      displayName: "personal/probe.js",
      code: `__awRegister({ get_tool_schemas: () => ${schemas}, dispatch: () => "ok" });`,
    },
    timeoutMs: DEADLINE_MS,
    memoryLimitMb: 32,
  };
}

function callRequest(): CallRequest {
  return {
    op: "call",
    bundle: { hash: "unframeable-call", displayName: "personal/probe.js", code: `__awRegister({ dispatch: () => "served" });` },
    context: { anima: "alice", animaDir: "/nonexistent/animas/alice", tool: "probe" },
    entry: "call",
    schemaName: "probe_run",
    payloadJson: "{}",
    timeoutMs: 10_000,
    memoryLimitMb: 32,
    maxResultBytes: 10_000,
    maxLogLines: 10,
    maxLogLineChars: 100,
  };
}

describe("a sandbox process whose answer cannot be framed", () => {
  let pool: SandboxPool | undefined;
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
  });

  it("says why and ends; the host fails the request as a crash, not at its deadline, and serves the next", async () => {
    const stderr: string[] = [];
    pool = new SandboxPool({ osSandbox: "off", entryScript: UNFRAMEABLE, onStderr: (line) => stderr.push(line) });
    expect(await pool.describe(describeRequest("fine"))).toMatchObject({ ok: true });

    const outcome = await pool.describe(describeRequest("UNFRAMEABLE"));
    // A describe that lost its process is a LoadError of the host's (the pool's describe queue says so).
    expect(outcome).toMatchObject({
      ok: false,
      error: { type: "LoadError", fault: "host", message: expect.stringMatching(/stopped \(signal SIGKILL\)/) as unknown },
    });
    await waitFor(() => stderr.some((line) => /the response of request \d+ could not be sent \(it ends/.test(line)), 10_000, 10);
    expect(stderr.join("\n")).toMatch(/Invalid string length/);

    expect(await pool.describe(describeRequest("fine again"))).toMatchObject({ ok: true });
    expect(await pool.call(callRequest())).toMatchObject({ ok: true, value: { text: "served" } });
  });
});
