import { describe, expect, it } from "vitest";
import { decodeCallOutcome, decodeDescribeOutcome, decodeFromSandbox, decodeToSandbox } from "../../../src/isolation/wire/decode.js";
import { type CallRequest, type DescribeRequest, labelled } from "../../../src/isolation/wire/messages.js";

describe("decodeFromSandbox", () => {
  it("accepts the protocol's messages", () => {
    expect(decodeFromSandbox({ type: "ready" })).toEqual({ type: "ready" });
    expect(decodeFromSandbox({ type: "log", id: 3, level: "warn", message: "m" })).toEqual({ type: "log", id: 3, level: "warn", message: "m" });
    expect(decodeFromSandbox({ type: "capability", capabilityId: 1, id: 2, name: "fs.stat", argsJson: "[]" })).toEqual({
      type: "capability",
      capabilityId: 1,
      id: 2,
      name: "fs.stat",
      argsJson: "[]",
    });
    expect(decodeFromSandbox({ type: "needBundle", id: 1 })).toEqual({ type: "needBundle", id: 1 });
    expect(decodeFromSandbox({ type: "part", id: 1, text: "abc" })).toEqual({ type: "part", id: 1, text: "abc" });
    expect(decodeFromSandbox({ type: "capability", capabilityId: 1, id: 2, name: "fs.writeFile", argsJson: "", parted: true })).toMatchObject({
      argsJson: "",
      parted: true,
    });
    expect(decodeFromSandbox({ type: "response", id: 2, outcome: { ok: true }, parted: true })).toMatchObject({ parted: true });
  });

  it.each([
    [
      "a context (the host attributes by request id only)",
      { type: "capability", capabilityId: 1, id: 2, name: "fs.stat", argsJson: "[]", context: { anima: "alice", animaDir: "/" } },
    ],
    ["an anima field on a log line", { type: "log", id: 1, level: "info", message: "m", anima: "alice" }],
    ["the old log shape", { type: "log", line: { level: "info", message: "m", context: { anima: "alice" } } }],
    ["an unknown type", { type: "exec", command: "sh" }],
    ["a capability the contract does not name", { type: "capability", capabilityId: 1, id: 2, name: "job.kill", argsJson: "[]" }],
    ["a non-integer id", { type: "log", id: 1.5, level: "info", message: "m" }],
    ["an unknown log level", { type: "log", id: 1, level: "fatal", message: "m" }],
    ["a batch (frames are the only batching)", { type: "batch", messages: [{ type: "ready" }] }],
    ["an empty part", { type: "part", id: 1, text: "" }],
    ["a part without an id", { type: "part", text: "abc" }],
    ["parted arguments that are not empty", { type: "capability", capabilityId: 1, id: 2, name: "fs.stat", argsJson: "[]", parted: true }],
    ["a parted flag that is not true", { type: "response", id: 2, outcome: { ok: true }, parted: 1 }],
    ["a non-object", "ready"],
  ])("refuses %s", (_label, message) => {
    expect(decodeFromSandbox(message)).toBeUndefined();
  });
});

describe("decoding outcomes", () => {
  it("keeps only declared fields and error types, and takes the host's duration", () => {
    expect(decodeCallOutcome({ ok: true, value: { kind: "text", text: "hi", bytes: 2, truncated: false }, durationMs: 0.001 }, 12)).toEqual({
      ok: true,
      value: { kind: "text", text: "hi", bytes: 2, truncated: false },
      durationMs: 12,
    });
    expect(decodeCallOutcome({ ok: false, error: { type: "RootAccess", message: "x" } }, 1)).toBeUndefined();
    expect(decodeCallOutcome({ ok: true, value: { kind: "text", text: 5 } }, 1)).toBeUndefined();
    expect(decodeDescribeOutcome({ ok: true, module: { exports: { dispatch: "function", bad: 1 }, schemas: [] } })).toEqual({
      ok: true,
      module: { exports: { dispatch: "function" }, schemas: [], profile: null },
    });
  });
});

describe("decodeToSandbox (what the host sends a sandbox process)", () => {
  const bundle = { hash: "h", code: "", displayName: "personal/t.js" };
  const call = {
    op: "call",
    bundle,
    context: { anima: "alice", tool: "t" },
    entry: "call",
    schemaName: "t_run",
    payloadJson: "{}",
    timeoutMs: 1_000,
    memoryLimitMb: 32,
    maxResultBytes: 1_000,
    maxLogLines: 0,
    maxLogLineChars: 100,
  };

  it.each([
    ["a call request", { type: "request", id: 1, request: call }],
    ["a describe request", { type: "request", id: 2, request: { op: "describe", bundle, timeoutMs: 1_000, memoryLimitMb: 32 } }],
    ["an answer", { type: "capabilityReply", capabilityId: 3, reply: { ok: true, value: { any: ["json"] } } }],
    ["a sliced answer", { type: "capabilityReply", capabilityId: 3, reply: { ok: true, value: "" }, joinSlicesInto: "value" }],
    ["an answer on the bulk pipe", { type: "capabilityReply", capabilityId: 3, reply: { ok: true, value: "" }, bulkBytes: 70_000 }],
    ["a denial", { type: "capabilityReply", capabilityId: 3, reply: { ok: false, error: { type: "SandboxViolation", message: "no", hint: "h" } } }],
    ["a slice", { type: "capabilityReplyPart", capabilityId: 3, text: "abc" }],
    ["an abort", { type: "abort", id: 1 }],
    ["a forget", { type: "forget", anima: "alice" }],
    ["a stats request", { type: "stats", statsId: 1 }],
    ["a shutdown", { type: "shutdown" }],
  ])("accepts %s as it is", (_label, message) => {
    expect(decodeToSandbox(message)).toBe(message);
  });

  it.each([
    ["an unknown type", { type: "exec", command: "sh" }],
    ["a capability the contract does not name", { type: "capability", capabilityId: 1, id: 2, name: "job.kill", argsJson: "[]" }],
    ["a request without an id", { type: "request", request: call }],
    ["a request without a bundle", { type: "request", id: 1, request: { ...call, bundle: undefined } }],
    ["a call without a context", { type: "request", id: 1, request: { ...call, context: undefined } }],
    // A call is told its label only: the host's record of it never crosses (messages.ts `labelled`).
    ["a context with the Anima's folder", { type: "request", id: 1, request: { ...call, context: { ...call.context, animaDir: "/data/animas/alice" } } }],
    ["a context with a call id", { type: "request", id: 1, request: { ...call, context: { ...call.context, callId: "c1" } } }],
    ["a context with a job id", { type: "request", id: 1, request: { ...call, context: { ...call.context, jobId: "j" } } }],
    ["a context without a tool", { type: "request", id: 1, request: { ...call, context: { anima: "alice" } } }],
    ["a label that is not text", { type: "request", id: 1, request: { ...call, context: { anima: "alice", tool: 7 } } }],
    ["an unknown entry", { type: "request", id: 1, request: { ...call, entry: "eval" } }],
    ["an unknown op", { type: "request", id: 1, request: { ...call, op: "run" } }],
    ["a limit that is not a number", { type: "request", id: 1, request: { ...call, timeoutMs: "1000" } }],
    ["a negative limit", { type: "request", id: 1, request: { ...call, maxResultBytes: -1 } }],
    ["an answer without ok", { type: "capabilityReply", capabilityId: 3, reply: { value: 1 } }],
    ["a denial of an unknown type", { type: "capabilityReply", capabilityId: 3, reply: { ok: false, error: { type: "Root", message: "x" } } }],
    ["an unknown slice target", { type: "capabilityReply", capabilityId: 3, reply: { ok: true, value: "" }, joinSlicesInto: "headers" }],
    ["a slice without text", { type: "capabilityReplyPart", capabilityId: 3 }],
    ["a forget without an Anima", { type: "forget" }],
    ["a batch", { type: "batch", messages: [{ type: "shutdown" }] }],
    ["a non-object", "shutdown"],
  ])("refuses %s", (_label, message) => {
    expect(decodeToSandbox(message)).toBeUndefined();
  });
});

describe("labelled (a request as a sandbox process sees it)", () => {
  const bundle = { hash: "h", code: "x", displayName: "personal/t.js" };
  const context = { anima: "alice", animaDir: "/data/animas/alice", tool: "t", callId: "c1", jobId: "j1" };
  const call: CallRequest = {
    op: "call",
    bundle,
    context,
    entry: "call",
    schemaName: "t_run",
    payloadJson: "{}",
    timeoutMs: 1_000,
    memoryLimitMb: 32,
    maxResultBytes: 1_000,
    maxLogLines: 0,
    maxLogLineChars: 100,
  };

  it("cuts a call's context to its label: no folder, call or job id crosses, and the host's record is untouched", () => {
    const sent = labelled(call);
    expect(sent).toEqual({ ...call, context: { anima: "alice", tool: "t" } });
    expect(sent.op === "call" && sent.context).not.toBe(context);
    expect(JSON.stringify({ type: "request", id: 1, request: sent })).not.toMatch(/animaDir|\/data\/animas|c1|j1/);
    expect(call.context).toEqual({ anima: "alice", animaDir: "/data/animas/alice", tool: "t", callId: "c1", jobId: "j1" });
    // What it sends is what a sandbox process accepts; the host's record itself would be refused.
    expect(decodeToSandbox(JSON.parse(JSON.stringify({ type: "request", id: 1, request: sent })))).toBeDefined();
    expect(decodeToSandbox({ type: "request", id: 1, request: call })).toBeUndefined();
  });

  it("leaves a describe request as it is", () => {
    const describeRequest: DescribeRequest = { op: "describe", bundle, timeoutMs: 1_000, memoryLimitMb: 32, owner: "alice" };
    expect(labelled(describeRequest)).toBe(describeRequest);
  });
});
