import type { SchemaCheck } from "../../registry/schemas.js";
import { MAX_REPLY_FRAME_BYTES } from "./protocol.js";

/** Room a reply's frame keeps for what surrounds a schema check (its id, the frame's length). */
const REPLY_ENVELOPE_BYTES = 1024;

/**
 * `check`, or, when its validators' code would not fit one reply frame, the tool's problem said as such:
 * a reply past the host's bound is a failed check, which a load would retry with its backoff, again and
 * again, each time compiling it all.
 */
export function withinReplyBound(check: SchemaCheck): SchemaCheck {
  if (!check.ok) return check;
  const bytes = Buffer.byteLength(JSON.stringify(check));
  const bound = MAX_REPLY_FRAME_BYTES - REPLY_ENVELOPE_BYTES;
  if (bytes <= bound) return check;
  return { ok: false, problems: [`its schemas compile to ${bytes} bytes of validators, more than the ${bound} the host takes: make them smaller or fewer`] };
}
