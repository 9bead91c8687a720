import { describe, expect, it, vi } from "vitest";
import {
  CHUNK_CHARS,
  FrameDecoder,
  MAX_FRAME_BYTES,
  ProtocolError,
  chunks,
  decodeClientMessage,
  decodeHostMessage,
  encodeFrame,
} from "../../src/endpoint/protocol.js";

describe("endpoint frames", () => {
  it("decodes frames split anywhere and several in one chunk", () => {
    const bytes = Buffer.concat([encodeFrame({ type: "stdout", text: "a\n" }), encodeFrame({ type: "exit", code: 3 })]);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const decoder = new FrameDecoder();
      const values = [...decoder.push(bytes.subarray(0, cut)), ...decoder.push(bytes.subarray(cut))];
      expect(values.map(decodeHostMessage)).toEqual([
        { type: "stdout", text: "a\n" },
        { type: "exit", code: 3 },
      ]);
      expect(decoder.pendingBytes).toBe(0);
    }
  });

  it("joins a frame's pieces once, however finely the stream cuts it (linear, not quadratic)", () => {
    // A 6 MiB stdin frame (1 Mi NUL characters, each escaped as \u0000) in 64 KiB pieces, as a socket delivers it.
    const frame = encodeFrame({ type: "stdin", data: "\u0000".repeat(CHUNK_CHARS) });
    const concat = vi.spyOn(Buffer, "concat");
    try {
      const decoder = new FrameDecoder();
      const values: unknown[] = [];
      for (let at = 0; at < frame.length; at += 64 * 1024) values.push(...decoder.push(frame.subarray(at, at + 64 * 1024)));
      expect(values).toHaveLength(1);
      const copiedBytes = concat.mock.calls.reduce((sum, [list]) => sum + (list as Buffer[]).reduce((n, b) => n + b.length, 0), 0);
      // Before: every piece re-joined all that came before it (≈ 300 MB copied for this frame).
      expect(copiedBytes).toBeLessThan(2 * frame.length);
    } finally {
      concat.mockRestore();
    }
  });

  it("rejects a frame that announces more than the limit, and one that is not JSON", () => {
    const header = Buffer.alloc(4);
    header.writeUInt32BE(MAX_FRAME_BYTES + 1);
    expect(() => new FrameDecoder().push(header)).toThrow(ProtocolError);
    const bad = Buffer.concat([Buffer.from([0, 0, 0, 3]), Buffer.from("{x}")]);
    expect(() => new FrameDecoder().push(bad)).toThrow(/not hold valid JSON/);
  });

  it("checks every field of a client message", () => {
    const call = {
      type: "call",
      protocol: 1,
      build: "b",
      install: "/i",
      argv: ["x"],
      cwd: "/",
      env: { HOME: "/h" },
      stdoutIsTerminal: false,
      stderrIsTerminal: true,
    };
    expect(decodeClientMessage(call)).toEqual(call);
    expect(() => decodeClientMessage({ ...call, argv: ["x", 1] })).toThrow(/argv must be an array of strings/);
    expect(() => decodeClientMessage({ ...call, cwd: "relative" })).toThrow(/cwd must be an absolute path/);
    expect(() => decodeClientMessage({ ...call, env: { A: 1 } })).toThrow(/env must be an object of strings/);
    expect(() => decodeClientMessage({ ...call, protocol: "1" })).toThrow(/protocol must be an integer/);
    expect(() => decodeClientMessage({ type: "become-root" })).toThrow(/unknown client message type/);
    expect(() => decodeClientMessage([1])).toThrow(/must be a JSON object/);
    // Extra fields are dropped, not passed on.
    expect(decodeClientMessage({ ...call, anima: "eve" })).not.toHaveProperty("anima");
  });

  it("checks host messages", () => {
    expect(() => decodeHostMessage({ type: "exit", code: 300 })).toThrow(/exit code/);
    expect(() => decodeHostMessage({ type: "refused", reason: "whim", message: "" })).toThrow(/refusal reason/);
    expect(decodeHostMessage({ type: "refused", reason: "busy", message: "m", restarting: true })).toEqual({
      type: "refused",
      reason: "busy",
      message: "m",
      restarting: true,
    });
  });

  it("splits long text into chunks without breaking a surrogate pair", () => {
    const text = `${"a".repeat(CHUNK_CHARS - 1)}😀${"b".repeat(10)}`;
    const parts = chunks(text);
    expect(parts.join("")).toBe(text);
    expect(parts[0]).toHaveLength(CHUNK_CHARS - 1);
    expect(parts.every((part) => part.length <= CHUNK_CHARS)).toBe(true);
  });
});
