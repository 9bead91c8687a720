import type { Writable } from "node:stream";
import { READ_BUFFERS, UndecodedText, writeBulk } from "./bulk-channel.js";
import type { CapabilityReply, ToSandbox } from "./messages.js";

/**
 * Large capability answers (a fetched body) cross to a sandbox process in slices, one per turn of the
 * host's event loop. Serialising the whole answer for the IPC channel at once blocks the host for tens of
 * milliseconds per MiB-scale answer (JSON of 10 MiB ≈ 60–75 ms here), which every other Anima's call
 * would wait behind; a slice costs about a millisecond. File contents do better still: they go as bytes
 * on a pipe of their own (bulk-channel.ts) and are decoded by the sandbox process.
 *
 * Only the one large string of an answer is sliced: its `value` when that is a string, or `value.body`
 * (fetch). The final message carries the answer without it, and says where the joined slices go.
 */

/** Files from this size on go as bytes on the bulk pipe; smaller ones inline, decoded here. */
export const BULK_MIN_BYTES = 64 * 1024;

/** Characters per slice. */
export const REPLY_SLICE_CHARS = 256 * 1024;

type Slot = "value" | "body";

function largeString(reply: CapabilityReply): { slot: Slot; text: string } | undefined {
  if (!reply.ok) return undefined;
  if (typeof reply.value === "string" && reply.value.length > REPLY_SLICE_CHARS) return { slot: "value", text: reply.value };
  const body = typeof reply.value === "object" && reply.value !== null ? (reply.value as { body?: unknown }).body : undefined;
  if (typeof body === "string" && body.length > REPLY_SLICE_CHARS) return { slot: "body", text: body };
  return undefined;
}

/**
 * Sends `reply` for `capabilityId` through `send` (resolves once the message was written; false when
 * the channel is closed), sliced when large, with undecoded file text as bytes on `bulk` when given;
 * resolves once all is handed over.
 */
export async function sendReply(send: (message: ToSandbox) => Promise<boolean>, capabilityId: number, reply: CapabilityReply, bulk?: Writable): Promise<void> {
  if (reply.ok && reply.value instanceof UndecodedText) {
    const text = reply.value;
    const bytes = text.byteLength;
    // A small file costs less decoded here and sent inline than as a second channel's write and wake-up.
    if (bulk && bytes >= BULK_MIN_BYTES) {
      // When the pipe broke, the process is going away: nothing is sent.
      // Every frame written means the kernel holds the bytes: the buffers may serve another read.
      if (await writeBulk(bulk, capabilityId, text)) {
        text.recycle(READ_BUFFERS);
        await send({ type: "capabilityReply", capabilityId, reply: { ok: true, value: "" }, bulkBytes: bytes });
      }
      return;
    }
    reply = { ok: true, value: text.decode() };
    text.recycle(READ_BUFFERS);
  }
  const large = largeString(reply);
  if (!large) {
    await send({ type: "capabilityReply", capabilityId, reply });
    return;
  }
  // Each slice waits until the previous one was written: the host never queues a whole answer.
  for (let start = 0; start < large.text.length; start += REPLY_SLICE_CHARS) {
    if (!(await send({ type: "capabilityReplyPart", capabilityId, text: large.text.slice(start, start + REPLY_SLICE_CHARS) }))) return;
  }
  const value = large.slot === "value" ? "" : { ...(reply as { value: object }).value, body: "" };
  await send({ type: "capabilityReply", capabilityId, reply: { ok: true, value }, joinSlicesInto: large.slot });
}

/** The sandbox process's side: collects slices and rebuilds the answer. */
export class ReplyAssembler {
  private readonly slices = new Map<number, string[]>();

  addSlice(capabilityId: number, text: string): void {
    const list = this.slices.get(capabilityId);
    if (list) list.push(text);
    else this.slices.set(capabilityId, [text]);
  }

  complete(capabilityId: number, reply: CapabilityReply, slot: Slot | undefined): CapabilityReply {
    const slices = this.slices.get(capabilityId);
    this.slices.delete(capabilityId);
    if (!slot || !reply.ok) return reply;
    const text = (slices ?? []).join("");
    return { ok: true, value: slot === "value" ? text : { ...(reply.value as object), body: text } };
  }
}
