import { monotonicMs } from "../../clock.js";
import type { ChildLink } from "./child-link.js";
import type { Pending } from "./process-owner.js";
import { decodeCallOutcome, decodeDescribeOutcome } from "../wire/decode.js";
import type { CallOutcome, DescribeOutcome, FromSandbox } from "../wire/messages.js";
import { boundedResult } from "../wire/result-bounds.js";

/**
 * A process's answer to a request as the host takes it (child-handle.ts): decoded by the host, its parted
 * text joined from the parts the host held, and a call's result measured here against the request's
 * limit, never taken from what the process says of it. Anything else is a protocol violation, named.
 */
export function checkedResponse(
  child: ChildLink,
  pending: Pending,
  message: Extract<FromSandbox, { type: "response" }>,
): { outcome: CallOutcome | DescribeOutcome } | { violation: string } {
  const durationMs = monotonicMs() - pending.startedAt;
  let outcome = pending.request.op === "describe" ? decodeDescribeOutcome(message.outcome) : decodeCallOutcome(message.outcome, durationMs);
  if (!outcome) return { violation: "answered a request with an outcome that is not part of the protocol" };
  if (message.parted) {
    const text = child.parts.take(message.id);
    if (text === undefined || !outcome.ok || !("value" in outcome) || outcome.value.kind === "none")
      return { violation: "sent a parted answer without its parts" };
    outcome = { ...outcome, value: { ...outcome.value, text } };
  }
  if (pending.request.op === "call" && outcome.ok && "value" in outcome) {
    // Measured here, never taken from the process: the text's size and whether it was cut.
    const bounded = boundedResult(outcome.value, pending.request.maxResultBytes);
    if (bounded.broken !== undefined) return { violation: `answered request ${message.id} with ${bounded.broken}` };
    outcome = { ...outcome, value: bounded.value };
  }
  return { outcome };
}
