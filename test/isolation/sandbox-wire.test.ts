import { describe, expect, it } from "vitest";
import { decodeCallOutcome, decodeDescribeOutcome, decodeFromSandbox } from "../../src/isolation/sandbox-wire.js";

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
    expect(decodeFromSandbox({ type: "batch", messages: [{ type: "needBundle", id: 1 }] })).toEqual({ type: "batch", messages: [{ type: "needBundle", id: 1 }] });
  });

  it.each([
    ["a context (the host attributes by request id only)", { type: "capability", capabilityId: 1, id: 2, name: "fs.stat", argsJson: "[]", context: { anima: "alice", animaDir: "/" } }],
    ["an anima field on a log line", { type: "log", id: 1, level: "info", message: "m", anima: "alice" }],
    ["the old log shape", { type: "log", line: { level: "info", message: "m", context: { anima: "alice" } } }],
    ["an unknown type", { type: "exec", command: "sh" }],
    ["a non-integer id", { type: "log", id: 1.5, level: "info", message: "m" }],
    ["an unknown log level", { type: "log", id: 1, level: "fatal", message: "m" }],
    ["a nested batch", { type: "batch", messages: [{ type: "batch", messages: [] }] }],
    ["a batch with one bad message", { type: "batch", messages: [{ type: "ready" }, { type: "nope" }] }],
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
