import { UndecodedText, bulkPipeOf } from "../wire/bulk-channel.js";
import { sendReply } from "../wire/reply-chunks.js";
import type { CallLedger } from "../call-ledger.js";
import type { ChildLink } from "./child-link.js";
import type { CapabilityInvoker, CapabilityReply, FromSandbox, SandboxRequest } from "../wire/messages.js";

/** What the relay needs of a request in flight (child-handle.ts's `Pending`). */
export interface RelayedRequest {
  request: SandboxRequest;
  ledger: CallLedger | undefined;
  /** Bytes of capability traffic relayed for it so far (arguments and answers). */
  relayedBytes: number;
}

/**
 * How long an answer may still wait for its sandbox process to take it once its call has ended, ms. An
 * answer's bytes hold the call's, the Anima's and the host's capability budgets until they have left the
 * host; a process that stops reading its bulk pipe or its channel would hold them for good (nine such
 * processes held the whole host budget, and every other Anima's file reads waited on it). Past this,
 * the process is reported as broken (killed and replaced), which ends the writes and frees the budgets.
 */
export const ANSWER_UNTAKEN_AFTER_CALL_MS = 2_000;

/**
 * Relays one capability request of a call in a sandbox process: the host runs it inside the call's
 * ledger (its limits), and answers on that very child's channel. The answer is handed over inside the
 * ledger's reservation: a large one is sliced (reply-chunks.ts) or sent as bytes on the bulk pipe, and
 * each part waits for the channel, so its bytes count until they have left the host, or until the call
 * has been over for `ANSWER_UNTAKEN_AFTER_CALL_MS` (then the process is broken). The bytes relayed
 * are added to the request's `relayedBytes` (what the pool weighs when it demotes a busy process).
 *
 * `pending` is the request as the host recorded it (undefined for one that has ended: the answer says so);
 * the caller has checked that it is a call, sent to `child`.
 */
export function relayCapability(
  child: ChildLink,
  pending: RelayedRequest | undefined,
  message: Extract<FromSandbox, { type: "capability" }>,
  invoke: CapabilityInvoker,
): void {
  const { capabilityId, name, argsJson } = message;
  let answered = false;
  const answer = (reply: CapabilityReply, callSignal?: AbortSignal): Promise<void> => {
    answered = true;
    if (pending) pending.relayedBytes += argsJson.length + replyBytes(reply);
    const sending = sendReply((part) => child.channel.sendAndWait(part), capabilityId, reply, bulkPipeOf(child.process));
    return callSignal ? takenOrBroken(sending, callSignal, child, name) : sending;
  };
  const ledger = pending?.ledger;
  if (!pending || !ledger || pending.request.op !== "call") {
    void answer({ ok: false, error: { type: "ExecutionError", fault: "tool", message: `${name}: the call has ended` } });
    return;
  }
  const context = pending.request.context;
  void ledger
    .run(name, argsJson, async (signal, meter) => {
      const reply = await invoke(context, name, argsJson, signal, meter).catch((): CapabilityReply => ({
        ok: false,
        error: { type: "ExecutionError", fault: "host", message: `${name} failed on the host` },
      }));
      await answer(reply, signal);
      return reply;
    })
    .then((reply) => (answered ? undefined : answer(reply)));
}

/**
 * Settles when `sending` does, or `ANSWER_UNTAKEN_AFTER_CALL_MS` after the call's end (`callSignal`
 * aborted) if the answer is still waiting for the process then: the process is reported broken.
 */
function takenOrBroken(sending: Promise<void>, callSignal: AbortSignal, child: ChildLink, name: string): Promise<void> {
  return new Promise<void>((settle) => {
    let timer: NodeJS.Timeout | undefined;
    const onCallEnd = (): void => {
      timer = setTimeout(() => {
        child.reportBroken(
          `left the answer to its ${name} unread ${ANSWER_UNTAKEN_AFTER_CALL_MS} ms after the call ended (holding the host's capability budget)`,
        );
        settle();
      }, ANSWER_UNTAKEN_AFTER_CALL_MS);
    };
    if (callSignal.aborted) onCallEnd();
    else callSignal.addEventListener("abort", onCallEnd, { once: true });
    const done = (): void => {
      clearTimeout(timer);
      callSignal.removeEventListener("abort", onCallEnd);
      settle();
    };
    sending.then(done, done);
  });
}

/** About how many bytes an answer makes its sandbox process handle (a small fixed cost for one not measured). */
function replyBytes(reply: CapabilityReply): number {
  if (!reply.ok) return 256;
  const value = reply.value;
  if (value instanceof UndecodedText) return value.byteLength;
  return typeof value === "string" ? value.length : 1_024;
}
