import { describe, expect, it } from "vitest";
import type { CapabilityReply, ToSandbox } from "../../../src/isolation/wire/messages.js";
import { REPLY_SLICE_CHARS, ReplyAssembler, sendReply } from "../../../src/isolation/wire/reply-chunks.js";

async function roundTrip(reply: CapabilityReply): Promise<{ messages: ToSandbox[]; rebuilt: CapabilityReply | undefined }> {
  const messages: ToSandbox[] = [];
  await sendReply(async (message) => (messages.push(message), true), 7, reply);
  const assembler = new ReplyAssembler();
  let rebuilt: CapabilityReply | undefined;
  for (const message of messages) {
    if (message.type === "capabilityReplyPart") assembler.addSlice(message.capabilityId, message.text);
    if (message.type === "capabilityReply") rebuilt = assembler.complete(message.capabilityId, message.reply, message.joinSlicesInto);
  }
  return { messages, rebuilt };
}

describe("sliced capability answers", () => {
  it("sends a small answer as one message", async () => {
    const { messages, rebuilt } = await roundTrip({ ok: true, value: { size: 3 } });
    expect(messages).toEqual([{ type: "capabilityReply", capabilityId: 7, reply: { ok: true, value: { size: 3 } } }]);
    expect(rebuilt).toEqual({ ok: true, value: { size: 3 } });
  });

  it("slices a large read and a large fetched body, and rebuilds them exactly", async () => {
    const text = "é😀x".repeat(REPLY_SLICE_CHARS); // slice boundaries fall inside surrogate pairs too
    const read = await roundTrip({ ok: true, value: text });
    expect(read.messages.filter((m) => m.type === "capabilityReplyPart").length).toBe(Math.ceil(text.length / REPLY_SLICE_CHARS));
    expect(read.rebuilt).toEqual({ ok: true, value: text });
    const fetched = await roundTrip({ ok: true, value: { status: 200, headers: { a: "b" }, body: text } });
    expect(fetched.rebuilt).toEqual({ ok: true, value: { status: 200, headers: { a: "b" }, body: text } });
  });

  it("stops slicing when the channel closes", async () => {
    const sent: ToSandbox[] = [];
    await sendReply(async (message) => (sent.push(message), sent.length < 2), 1, { ok: true, value: "y".repeat(REPLY_SLICE_CHARS * 5) });
    expect(sent.length).toBe(2);
  });
});
