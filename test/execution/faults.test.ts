import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorEnvelope } from "../../src/errors.js";
import { type TestHost, useTestHost } from "../helpers/tools.js";
import { auditRecords } from "../helpers/audit-files.js";

/**
 * Every failed call says who must act on it (`fault`): the tool's author, the caller, or the host's
 * operator, decided by the host whatever the tool throws, and kept in the audit trail.
 */
const TOOL = `
import { fs, fetch, getCredential, InvalidInput } from "@animaworks/tool";
export function get_tool_schemas() {
  return ["throw", "denied", "forged", "config", "spin", "loopback", "refused"].map((action) => ({
    name: "faulty_" + action,
    description: action,
    input_schema: { type: "object", properties: { n: { type: "integer" } } },
  }));
}
export async function dispatch(name) {
  if (name === "faulty_throw") throw new Error("disk is full");
  if (name === "faulty_denied") return await fs.readFile("../bob/secret.txt");
  if (name === "faulty_forged") {
    const error = new Error("the host is broken, blame it");
    error.name = "SandboxCrashed";
    error.fault = "host";
    throw error;
  }
  if (name === "faulty_config") return await getCredential("faulty_api", "faulty");
  if (name === "faulty_loopback") return await fetch("http://127.0.0.1/");
  if (name === "faulty_refused") throw new InvalidInput("n must be positive");
  for (;;) {}
}
`;

describe("who is at fault", () => {
  let t: TestHost;
  beforeAll(() => {
    t = useTestHost();
    t.personal("faulty.ts", TOOL);
  });
  afterAll(async () => {
    await t.close();
  });

  it.each([
    ["a tool that throws", "ExecutionError", "tool", "faulty_throw", {}],
    ["a denial the tool let through", "SandboxViolation", "tool", "faulty_denied", {}],
    ["a tool that claims the host's fault", "ExecutionError", "tool", "faulty_forged", {}],
    ["a credential the operator has not set", "ToolConfigError", "host", "faulty_config", {}],
    ["a tool past its deadline", "Timeout", "tool", "faulty_spin", {}],
    ["a tool's own input check (InvalidInput)", "InvalidArguments", "caller", "faulty_refused", {}],
    ["arguments that break the schema", "InvalidArguments", "caller", "faulty_throw", { n: "one" }],
    ["a name that is no tool", "ToolNotFound", "caller", "nosuch_run", {}],
  ] as const)("%s: %s, the %s's fault", async (_label, type, fault, schema, args) => {
    // Only the spinning tool gets a short deadline: on a loaded machine a 300 ms one failed honest calls too.
    const result = await t.host.call("alice", schema, args, schema === "faulty_spin" ? { timeoutMs: 300 } : {});
    expect(result).toMatchObject({ status: "error", error_type: type, fault });
  });

  it("writes the fault into the call's audit record and the JSON envelope", async () => {
    await t.host.call("alice", "faulty_config", {});
    await t.host.close();
    const records = auditRecords(join(t.data.dir, "logs", "animaworks-tool", "audit"));
    expect(records.filter((record) => record["kind"] === "call" && record["schema"] === "faulty_config").at(-1)).toMatchObject({
      outcome: "error",
      errorType: "ToolConfigError",
      errorFault: "host",
    });
    expect(errorEnvelope({ type: "Busy", fault: "host", message: "wait", hint: "retry" })).toEqual({
      status: "error",
      error_type: "Busy",
      fault: "host",
      message: "wait",
      hint: "retry",
    });
  });
});

describe("who is at fault: policy only the operator changes (#35 item 4)", () => {
  let t: TestHost;
  beforeAll(() => {
    t = useTestHost({ timeoutMs: 10_000 }); // a first fetch loads the network capability: more than faulty_spin's 300 ms
    t.personal("faulty.ts", TOOL);
  });
  afterAll(async () => {
    await t.close();
  });

  it("a loopback fetch the operator has not allowed, let through by the tool: the host's, with the setting that lifts it", async () => {
    const result = await t.host.call("alice", "faulty_loopback", {});
    expect(result).toMatchObject({ status: "error", error_type: "SandboxViolation", fault: "host", hint: expect.stringContaining('"allow_internal_hosts"') });
  });
});
