import { FRAME_HEADER_BYTES, encodeFrame } from "../../isolation/wire/frames.js";
import { type CheckReplyMessage, MAX_REPLY_FRAME_BYTES } from "./protocol.js";

/**
 * The frame of `reply`, encoded once. A schema check whose validators' code would pass the host's bound
 * on a reply frame is answered instead with the tool's problem, said as such: a reply past the bound is a
 * failed check, which a load would retry with its backoff, again and again, each time compiling it all.
 */
export function replyFrame(reply: CheckReplyMessage): Buffer {
  const frame = encodeFrame(reply);
  const bytes = frame.length - FRAME_HEADER_BYTES;
  if (bytes <= MAX_REPLY_FRAME_BYTES || !("schemaCheck" in reply) || !reply.schemaCheck.ok) return frame;
  const problem = `its schemas compile to ${bytes} bytes of validators, more than the ${MAX_REPLY_FRAME_BYTES} the host takes: make them smaller or fewer`;
  return encodeFrame({ id: reply.id, schemaCheck: { ok: false, problems: [problem] } } satisfies CheckReplyMessage);
}
