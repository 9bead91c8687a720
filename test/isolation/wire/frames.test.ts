import { describe, expect, it } from "vitest";
import { FrameDecoder, FrameError, MAX_FRAME_FROM_SANDBOX_BYTES, PART_CHARS, encodeFrame } from "../../../src/isolation/wire/frames.js";
import { HeldChars, PartAssembler, fitToFrames } from "../../../src/isolation/wire/parts.js";
import type { FromSandbox } from "../../../src/isolation/wire/messages.js";

const MESSAGES = [{ type: "ready" }, { type: "log", id: 1, level: "info", message: "héllo \u{1F600} \u0001" }, { type: "needBundle", id: 2 }];

describe("FrameDecoder", () => {
  it("gives back every message whatever the reads' boundaries", () => {
    const bytes = Buffer.concat(MESSAGES.map(encodeFrame));
    for (let size = 1; size <= bytes.length; size++) {
      const decoder = new FrameDecoder(1024);
      const out: unknown[] = [];
      for (let start = 0; start < bytes.length; start += size) out.push(...decoder.push(bytes.subarray(start, start + size)));
      expect(out, `reads of ${size} bytes`).toEqual(MESSAGES);
      expect(decoder.held).toBe(0);
    }
  });

  it("refuses a length over its limit before it holds a byte of the body", () => {
    const decoder = new FrameDecoder(100);
    expect(() => decoder.push(Buffer.from([0, 0, 0, 101]))).toThrow(/a frame of 101 bytes, over the 100-byte limit/);
    expect(decoder.held).toBe(0);
  });

  it.each([
    ["an empty frame", Buffer.from([0, 0, 0, 0]), /an empty frame/],
    ["a body that is not JSON", Buffer.concat([Buffer.from([0, 0, 0, 3]), Buffer.from("{x}")]), /a frame of 3 bytes that is not JSON/],
    ["a line of Node's IPC channel", Buffer.from('{"type":"ready"}\n'), /over the/],
  ])("refuses %s, and stays spent", (_label, bytes, reason) => {
    const decoder = new FrameDecoder(MAX_FRAME_FROM_SANDBOX_BYTES);
    expect(() => decoder.push(bytes)).toThrow(reason);
    expect(() => decoder.push(encodeFrame({ type: "ready" }))).toThrow(FrameError);
  });
});

describe("parts", () => {
  it("split what a frame cannot hold, and each part's frame fits the limit whatever its characters", () => {
    const text = "\u0001".repeat(PART_CHARS * 2 + 5);
    const messages = fitToFrames({ type: "capability", capabilityId: 1, id: 4, name: "fs.writeFile", argsJson: text });
    expect(messages.map((m) => m.type)).toEqual(["part", "part", "part", "capability"]);
    expect(messages.at(-1)).toMatchObject({ argsJson: "", parted: true });
    for (const message of messages) expect(encodeFrame(message).length).toBeLessThanOrEqual(MAX_FRAME_FROM_SANDBOX_BYTES);
    const assembler = new PartAssembler();
    assembler.chargeTo(new HeldChars(Number.POSITIVE_INFINITY), new HeldChars(Number.POSITIVE_INFINITY));
    for (const message of messages) if (message.type === "part") expect(assembler.add(message.id, message.text, text.length)).toBe("held");
    expect(assembler.take(4)).toBe(text);
    expect(assembler.take(4)).toBeUndefined();
  });

  it("a result text too long for a frame crosses in parts; a description too large becomes a load error", () => {
    const result: FromSandbox = {
      type: "response",
      id: 9,
      outcome: { ok: true, value: { kind: "text", text: "r".repeat(PART_CHARS + 1), bytes: PART_CHARS + 1, truncated: false }, durationMs: 1 },
    };
    expect(fitToFrames(result).map((m) => m.type)).toEqual(["part", "part", "response"]);
    const description: FromSandbox = {
      type: "response",
      id: 9,
      outcome: { ok: true, module: { exports: {}, schemas: "s".repeat(MAX_FRAME_FROM_SANDBOX_BYTES), profile: null } },
    };
    expect(fitToFrames(description)).toEqual([
      { type: "response", id: 9, outcome: { ok: false, error: expect.objectContaining({ type: "LoadError", fault: "tool" }) } },
    ]);
  });

  /** An assembler charged to `cordon` and `host`. */
  function assembler(cordon: HeldChars, host: HeldChars): PartAssembler {
    const made = new PartAssembler();
    made.chargeTo(cordon, host);
    return made;
  }

  it("the assembler holds no more than a request's limit, and one request's parts at a time", () => {
    const parts = assembler(new HeldChars(1_000), new HeldChars(1_000));
    expect(parts.add(1, "abcd", 6)).toBe("held");
    expect(parts.add(1, "efg", 6)).toBe("over-request");
    expect(parts.add(2, "x", 100)).toBe("interleaved"); // request 1's message has not come
    expect(parts.openId).toBe(1);
    expect(parts.take(1)).toBe("abcd");
    expect(parts.add(2, "x", 100)).toBe("held");
    parts.drop(2);
    expect(parts.take(2)).toBeUndefined();
  });

  it("a process given to no cordon yet (a spare) may hold nothing", () => {
    expect(new PartAssembler().add(1, "x", 100)).toBe("over-cordon");
  });

  it("held_parts_across_processes: the assemblers of a cordon's processes hold no more than the cordon's limit together, and all no more than the host's", () => {
    const host = new HeldChars(12);
    const eve = new HeldChars(10);
    const [first, second] = [assembler(eve, host), assembler(eve, host)];
    const alice = assembler(new HeldChars(10), host);
    expect(first.add(1, "12345678", 100)).toBe("held");
    expect(second.add(2, "abc", 100)).toBe("over-cordon"); // 8 + 3 > 10, the processes' cordon
    expect(second.add(2, "ab", 100)).toBe("held");
    expect(alice.add(3, "xyz", 100)).toBe("over-host"); // 10 + 3 > 12, though within alice's cordon
    expect(alice.add(3, "xy", 100)).toBe("held");
    expect([eve.chars, host.chars]).toEqual([10, 12]);
    first.drop(1);
    expect([eve.chars, host.chars]).toEqual([2, 4]);
    expect(second.add(2, "cdefgh", 100)).toBe("held");
    expect(second.take(2)).toBe("abcdefgh");
    expect(alice.take(3)).toBe("xy");
    expect([eve.chars, host.chars]).toEqual([0, 0]);
  });
});
