import { describe, expect, it } from "vitest";
import { DEFAULT_FAULT, ERROR_TYPES, ToolHostError, callerNotTool, errorEnvelope, errorInfoOf, infoOfWire, wireError } from "../src/errors.js";

describe("the host's one error shape", () => {
  it("gives every error type a usual fault, which a site may override", () => {
    expect(Object.keys(DEFAULT_FAULT).sort()).toEqual([...ERROR_TYPES].sort());
    expect(new ToolHostError("InvalidArguments", "bad").fault).toBe("caller");
    expect(new ToolHostError("ExecutionError", "stopped", undefined, "caller").toInfo()).toEqual({
      type: "ExecutionError",
      message: "stopped",
      fault: "caller",
    });
    const info = { type: "Busy", message: "full", fault: "host", hint: "later" } as const;
    expect(ToolHostError.fromInfo(info).toInfo()).toEqual(info);
  });

  it("makes a plain thrown value the host's own ExecutionError, and a system file error the host's setup", () => {
    expect(errorInfoOf(new TypeError("x is undefined"))).toEqual({ type: "ExecutionError", message: "x is undefined", fault: "host" });
    expect(errorInfoOf(new RangeError())).toMatchObject({ message: "RangeError", fault: "host" });
    const denied = Object.assign(new Error("EACCES: permission denied, open '/data/animas'"), { code: "EACCES", syscall: "open", path: "/data/animas" });
    expect(errorInfoOf(denied)).toMatchObject({ type: "PermissionDenied", fault: "host", message: "cannot open /data/animas: permission denied (EACCES)" });
    const full = Object.assign(new Error("ENOSPC"), { code: "ENOSPC", syscall: "write" });
    expect(errorInfoOf(full)).toMatchObject({ type: "ExecutionError", fault: "host", message: expect.stringContaining("no space left") });
    expect(errorInfoOf(Object.assign(new Error("gone"), { code: "ENOENT" }))).toEqual({ type: "ExecutionError", message: "gone", fault: "host" });
  });

  it("spells it snake_case only at the JSON edges, and reads it back whole", () => {
    const info = { type: "ToolConfigError", message: "set API_KEY", fault: "host", hint: "animaworks-tool cred set" } as const;
    expect(wireError(info)).toEqual({ error_type: "ToolConfigError", message: "set API_KEY", fault: "host", hint: "animaworks-tool cred set" });
    expect(errorEnvelope(info)).toEqual({ status: "error", ...wireError(info) });
    expect(infoOfWire(wireError(info))).toEqual(info);
    // An envelope from a writer that knew no faults reads with the type's usual one.
    expect(infoOfWire({ error_type: "Timeout", message: "slow" } as never)).toEqual({ type: "Timeout", message: "slow", fault: "tool" });
  });

  it("makes a refusal of the caller's own management call the caller's, never a tool's (#35 item 4)", () => {
    const outside = new ToolHostError("SandboxViolation", 'write_memory_file: "../bob/x" outside the Anima\'s directory is not allowed');
    expect(outside.fault).toBe("tool");
    expect((callerNotTool(outside) as ToolHostError).toInfo()).toEqual({ ...outside.toInfo(), fault: "caller" });
    const operator = new ToolHostError("PermissionDenied", "Shared tool creation is not permitted.", "an operator can …", "host");
    expect(callerNotTool(operator)).toBe(operator);
    const plain = new Error("x");
    expect(callerNotTool(plain)).toBe(plain);
  });
});
