import { UndecodedText, bulkPipeOf } from "../wire/bulk-channel.js";
import { sendReply } from "../wire/reply-chunks.js";
import { type CallLedger, SANDBOX_PROCESS_IN_FLIGHT } from "../call-ledger.js";
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
 * Capability requests of one sandbox process the host has received and not yet answered (its answer not
 * yet handed to the kernel), per call and per Anima. The process's own ledger keeps the same requests
 * in flight until their answers arrive there, which is later: an honest process never has more
 * outstanding here than `SANDBOX_PROCESS_IN_FLIGHT`, however its calls and their answers interleave.
 * (The answer's last write and this count's release happen in one turn of the host's event loop, before
 * it reads anything the process sent after taking that answer.)
 */
class Outstanding {
  private readonly perCall = new Map<number, number>();
  private readonly perAnima = new Map<string, number>();

  /** Counts a request of call `id` of `anima`; the breach, when it is one past the limits, is not counted. */
  admit(id: number, anima: string): string | undefined {
    const call = this.perCall.get(id) ?? 0;
    const own = this.perAnima.get(anima) ?? 0;
    if (call >= SANDBOX_PROCESS_IN_FLIGHT.perCall)
      return `asked for a capability with ${call} of its call's already in flight (a sandbox process keeps at most ${SANDBOX_PROCESS_IN_FLIGHT.perCall})`;
    if (own >= SANDBOX_PROCESS_IN_FLIGHT.perAnima)
      return `asked for a capability with ${own} of its Anima's already in flight (a sandbox process keeps at most ${SANDBOX_PROCESS_IN_FLIGHT.perAnima})`;
    this.perCall.set(id, call + 1);
    this.perAnima.set(anima, own + 1);
    return undefined;
  }

  release(id: number, anima: string): void {
    const call = (this.perCall.get(id) ?? 1) - 1;
    const own = (this.perAnima.get(anima) ?? 1) - 1;
    if (call > 0) this.perCall.set(id, call);
    else this.perCall.delete(id);
    if (own > 0) this.perAnima.set(anima, own);
    else this.perAnima.delete(anima);
  }
}

const outstandingOf = new WeakMap<ChildLink, Outstanding>();

/**
 * Relays one capability request of a call in a sandbox process: the host runs it inside the call's
 * ledger (its limits), and answers on that very child's channel. The answer is handed over inside the
 * ledger's reservation: a large one is sliced (reply-chunks.ts) or sent as bytes on the bulk pipe, and
 * each part waits for the channel, so its bytes count until they have left the host, or until the call
 * has been over for `ANSWER_UNTAKEN_AFTER_CALL_MS` (then the process is broken). The bytes relayed
 * are added to the request's `relayedBytes` (what the pool weighs when it demotes a busy process).
 *
 * `pending` is the request as the host recorded it (undefined for one that has ended: the answer says so);
 * the caller has checked that it is a call, sent to `child`. Returns the protocol violation when the
 * request is one past what the process's own ledger lets it have in flight (`Outstanding`): nothing is
 * run or answered then, and the caller retires the process (one report, rather than a refusal, and its
 * audit record, for each request of a flood).
 */
export function relayCapability(
  child: ChildLink,
  pending: RelayedRequest | undefined,
  message: Extract<FromSandbox, { type: "capability" }>,
  invoke: CapabilityInvoker,
): string | undefined {
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
    return undefined;
  }
  const context = pending.request.context;
  let outstanding = outstandingOf.get(child);
  if (!outstanding) outstandingOf.set(child, (outstanding = new Outstanding()));
  const breach = outstanding.admit(message.id, context.anima);
  if (breach) return breach;
  const counted = outstanding;
  void ledger
    .run(name, argsJson, async (signal, meter) => {
      const reply = await invoke(context, name, argsJson, signal, meter).catch((): CapabilityReply => ({
        ok: false,
        error: { type: "ExecutionError", fault: "host", message: `${name} failed on the host` },
      }));
      await answer(reply, signal);
      return reply;
    })
    .then((reply) => (answered ? undefined : answer(reply)))
    .finally(() => counted.release(message.id, context.anima));
  return undefined;
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
