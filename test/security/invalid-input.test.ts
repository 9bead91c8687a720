import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { EXIT_CODES } from "../../src/errors.js";
import type { CallResult } from "../../src/host-api.js";
import { type TestHost, useTestHost } from "../helpers/tools.js";

/**
 * `InvalidInput` of `@animaworks/tool` (#35 item 4): a tool says that its own check of its input failed, so
 * the caller is told to change its arguments (`InvalidArguments`, fault `caller`, exit 2) instead of being sent
 * to fix the tool. The host still decides: only an instance of the prelude's own class counts, and all it can
 * claim is that type and fault with a bounded message; a lookalike gets nothing it could not get anyway.
 */
const CHECK_TOOL = `
import { InvalidInput, ToolError, fetch } from "@animaworks/tool";
const ACTIONS = ["days", "named", "shaped", "returned", "dressed", "long", "caught", "capability"];
export function get_tool_schemas() {
  return ACTIONS.map((action) => ({ name: "check_" + action, description: action, input_schema: { type: "object", properties: { days: { type: "integer" } } } }));
}
export async function dispatch(name, args) {
  switch (name) {
    case "check_days":
      if (args.days > 30) throw new InvalidInput("days must be at most 30, got " + args.days);
      return "ok";
    case "check_named": {
      const error = new Error("named like one");
      error.name = "InvalidInput";
      throw error;
    }
    case "check_shaped":
      throw { name: "InvalidInput", errorType: "InvalidInput", type: "InvalidArguments", message: "shaped like one", fault: "caller" };
    case "check_returned":
      return { ok: false, errorType: "InvalidInput", message: "returned like one", fault: "caller" };
    case "check_dressed": {
      class Louder extends InvalidInput {
        constructor(message) { super(message); this.fault = "host"; this.hint = "page the operator"; this.type = "Busy"; }
      }
      throw new Louder("dressed up");
    }
    case "check_long":
      throw new InvalidInput("x".repeat(20000));
    case "check_caught":
      try { throw new InvalidInput("inner"); } catch (error) { if (error instanceof ToolError) throw new Error("wrapped: " + error.message); }
      return "unreachable";
    case "check_capability":
      await fetch("not a url");
      return "unreachable";
  }
}
`;

let t: TestHost;
beforeAll(() => {
  t = useTestHost({ timeoutMs: 5_000 });
  t.personal("check.ts", CHECK_TOOL);
});
afterAll(() => t.close());

function failure(result: CallResult): { error_type: string; fault: string; message: string; hint?: string } {
  expect(result.status, JSON.stringify(result)).toBe("error");
  const { error_type, fault, message, hint } = result as Extract<CallResult, { status: "error" }>;
  return { error_type, fault, message, ...(hint !== undefined ? { hint } : {}) };
}

describe("InvalidInput: a tool's input check that failed is the caller's to fix", () => {
  it("is InvalidArguments with fault caller, the tool's message and no hint; exit 2 on the CLI", async () => {
    expect(failure(await t.host.call("alice", "check_days", { days: 45 }))).toEqual({
      error_type: "InvalidArguments",
      fault: "caller",
      message: "days must be at most 30, got 45",
    });
    expect(EXIT_CODES.InvalidArguments).toBe(2);
    const stdout: string[] = [];
    const code = await main(["--data-dir", t.data.dir, "--anima", "alice", "check", "days", "--days", "45", "-j"], {
      stdout: (text) => void stdout.push(text),
      stderr: () => {},
    });
    expect(code, stdout.join("")).toBe(2);
    expect(JSON.parse(stdout.join(""))).toMatchObject({ status: "error", error_type: "InvalidArguments", fault: "caller" });
  });

  it("a lookalike (a name, a shape, a returned object) claims nothing: the tool's own error or its result", async () => {
    expect(failure(await t.host.call("alice", "check_named", {}))).toEqual({
      error_type: "ExecutionError",
      fault: "tool",
      message: expect.stringMatching(/^InvalidInput: named like one/), // the tool's lines may follow
    });
    expect(failure(await t.host.call("alice", "check_shaped", {}))).toMatchObject({ error_type: "ExecutionError", fault: "tool" });
    const returned = await t.host.call("alice", "check_returned", {});
    expect(returned.status).toBe("ok"); // an object is a result, whatever it looks like
  });

  it("a subclass is still only InvalidArguments of the caller: its own fault, hint and type are ignored; its message is bounded", async () => {
    expect(failure(await t.host.call("alice", "check_dressed", {}))).toEqual({ error_type: "InvalidArguments", fault: "caller", message: "dressed up" });
    const long = failure(await t.host.call("alice", "check_long", {}));
    expect([long.error_type, long.fault]).toEqual(["InvalidArguments", "caller"]);
    expect(long.message.length).toBeLessThan(4_200);
  });

  it("an InvalidInput the tool caught and rethrew as its own error is the tool's; a capability's refusal of the tool's own input stays the tool's", async () => {
    expect(failure(await t.host.call("alice", "check_caught", {}))).toEqual({
      error_type: "ExecutionError",
      fault: "tool",
      message: expect.stringMatching(/^wrapped: inner/),
    });
    expect(failure(await t.host.call("alice", "check_capability", {}))).toMatchObject({ fault: "tool" });
  });
});
