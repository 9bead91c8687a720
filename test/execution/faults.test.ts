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
import { fs, getCredential } from "@animaworks/tool";
export function get_tool_schemas() {
  return ["throw", "denied", "forged", "config", "spin"].map((action) => ({
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
  for (;;) {}
}
`;

describe("who is at fault", () => {
  let t: TestHost;
  beforeAll(() => {
    t = useTestHost({ timeoutMs: 300 });
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
    ["arguments that break the schema", "InvalidArguments", "caller", "faulty_throw", { n: "one" }],
    ["a name that is no tool", "ToolNotFound", "caller", "nosuch_run", {}],
  ] as const)("%s: %s, the %s's fault", async (_label, type, fault, schema, args) => {
    const result = await t.host.call("alice", schema, args);
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
