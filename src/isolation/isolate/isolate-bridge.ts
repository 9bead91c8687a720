import type { EntryTracker } from "./call-guard.js";
import { classifyIvmError } from "./ivm-errors.js";
import type { ActiveCall, PooledIsolate } from "./pooled-isolate.js";
import type { CallLabel, CapabilityInvoker, CapabilityReply, ToolLogLine } from "../wire/messages.js";
import { TEXT_PIECE_CHARS, TextPieces, textGroups } from "../wire/text-pieces.js";
import { READ_BUFFERS, UndecodedText } from "../wire/bulk-channel.js";
import { type CapabilityAnswerBatch, type HostBridge, MAX_TIMERS_PER_CALL, MAX_TIMER_DELAY_MS } from "../../contract/isolate.js";

/**
 * The host's side of the bridge the prelude calls (`GuestBridge` in src/contract/isolate.ts): what each
 * isolated-vm callback does. The isolate is untrusted: each handler checks its plain arguments, acts only
 * for the call the isolate is serving now (`pooled.active`), and never throws into the isolate (an error
 * would carry host stacks). Timers are counted here against the contract's `MAX_TIMERS_PER_CALL` (the
 * prelude keeps the same limit).
 */

/** What the handlers need of the runner (which knows each call by its label only). */
export interface BridgeHost {
  onLog(line: ToolLogLine<CallLabel>): void;
  entries: EntryTracker;
  invokeCapability: CapabilityInvoker<CallLabel>;
}

/** The bridge's functions as the host implements them: each argument unchecked (see `HostBridge`). */
export type BridgeHandlers = HostBridge;

export function bridgeHandlers(pooled: PooledIsolate, host: BridgeHost): BridgeHandlers {
  return {
    log(level, message) {
      const active = pooled.active;
      if (!active || typeof message !== "string") return;
      const lvl = level === "debug" || level === "info" || level === "warn" || level === "error" ? level : "info";
      for (const line of active.ledger.log(lvl, message)) host.onLog(line);
    },
    setTimer(id, delayMs) {
      const active = pooled.active;
      if (!active || typeof id !== "number" || typeof delayMs !== "number") return;
      // Beyond the limit the timer is never armed (a correct prelude threw before asking).
      if (active.timers.size >= MAX_TIMERS_PER_CALL || active.timers.has(id)) return;
      const delay = Math.min(Math.max(0, delayMs), MAX_TIMER_DELAY_MS);
      const handle = setTimeout(() => {
        active.timers.delete(id);
        if (pooled.active !== active || !pooled.healthy) return;
        host.entries.track(pooled.entry!.fireTimer.apply(undefined, [id])).catch((error: unknown) => {
          if (pooled.active === active) haltAfterFailedEntry(pooled, active, error);
        });
      }, delay);
      active.timers.set(id, handle);
    },
    clearTimer(id) {
      const active = pooled.active;
      if (!active || typeof id !== "number") return;
      const handle = active.timers.get(id);
      if (handle) clearTimeout(handle);
      active.timers.delete(id);
    },
    // The prelude's memory guards ask for the call to end (sandbox/memory-guards.ts). Asynchronous (an
    // `ignored` ivm.Callback), yet it runs before the call's envelope is read: isolated-vm queues it on
    // this thread's task queue (FIFO) before the entry's result, so `guard.stopReason` says MemoryLimit.
    stop(reason) {
      pooled.guard?.halt(reason === "MemoryLimit" ? "MemoryLimit" : "Timeout");
    },
    // Capability calls run on the host (never in the isolate's thread), within the call's ledger; the
    // answers re-enter the isolate in batches (`deliver`).
    capability(id, name, argsJson) {
      const active = pooled.active;
      if (!active || typeof id !== "number" || typeof name !== "string" || typeof argsJson !== "string") return;
      void active.ledger
        .run(name, argsJson, (signal, meter) => host.invokeCapability(active.context, name, argsJson, signal, meter))
        .catch((): CapabilityReply => ({ ok: false, error: { type: "ExecutionError", fault: "host", message: `${name} failed on the host` } }))
        .then((reply) => deliver(host, pooled, active, id, reply));
    },
  };
}

/**
 * Hands a capability answer to the isolate. Answers that arrive while an earlier batch is entering wait
 * and go in together: one entry in flight per isolate, however many calls a tool has in flight.
 */
function deliver(host: BridgeHost, pooled: PooledIsolate, active: ActiveCall, id: number, reply: CapabilityReply): void {
  if (pooled.active !== active || !pooled.healthy) return;
  active.replies.push([id, reply]);
  if (!active.settling) void settleBatch(host, pooled, active);
}

/**
 * Enters the answers waiting. A long text goes first, in pieces (text-pieces.ts), each its own entry, so
 * that this thread never copies more than `TEXT_PIECE_CHARS` at once and the process's other calls are
 * served in between; its answer then says `pieced`.
 */
async function settleBatch(host: BridgeHost, pooled: PooledIsolate, active: ActiveCall): Promise<void> {
  active.settling = true;
  try {
    const batch: CapabilityAnswerBatch = [];
    for (const [id, reply] of active.replies.splice(0)) {
      const pieces = reply.ok ? longTextPieces(reply.value) : undefined;
      if (!pieces) {
        batch.push([id, reply]);
        continue;
      }
      for (const piece of pieces) {
        if (pooled.active !== active || !pooled.healthy) return;
        await host.entries.track(pooled.entry!.receiveText.apply(undefined, [id, piece]));
      }
      batch.push([id, { ok: true, pieced: true }]);
    }
    if (pooled.active !== active || !pooled.healthy) return;
    let batchJson: string;
    try {
      batchJson = JSON.stringify(batch);
    } catch {
      batchJson = JSON.stringify(batch.map(([id]) => [id, { ok: false, error: { type: "ExecutionError", message: "the host's answer could not be sent" } }]));
    }
    await host.entries.track(pooled.entry!.settleCapabilities.apply(undefined, [batchJson]));
  } catch (error) {
    if (pooled.active === active) haltAfterFailedEntry(pooled, active, error);
  } finally {
    active.settling = false;
    if (active.replies.length > 0 && pooled.active === active && pooled.healthy) void settleBatch(host, pooled, active);
  }
}

/**
 * `value` in pieces for the isolate when it is a text too long for one entry (see `settleBatch`): as it
 * arrived in a sandbox process, or decoded a chunk at a time in an in-process host (whose event loop
 * would otherwise decode, escape and copy the whole file in one block).
 */
function longTextPieces(value: unknown): Iterable<string> | undefined {
  if (value instanceof TextPieces) return value.length > TEXT_PIECE_CHARS ? value.groups(TEXT_PIECE_CHARS) : undefined;
  if (value instanceof UndecodedText) return value.byteLength > TEXT_PIECE_CHARS ? textGroups(value.decodeInPieces(READ_BUFFERS), TEXT_PIECE_CHARS) : undefined;
  return typeof value === "string" && value.length > TEXT_PIECE_CHARS ? textGroups([value], TEXT_PIECE_CHARS) : undefined;
}

/**
 * A re-entry into the isolate (a timer, a capability answer) that failed ends the call: at the memory
 * limit, or (isolated-vm's timeout) at the deadline.
 */
function haltAfterFailedEntry(pooled: PooledIsolate, active: ActiveCall, error: unknown): void {
  const memory = classifyIvmError(error) === "MemoryLimit" || pooled.hitMemoryLimit;
  active.guard.halt(memory ? "MemoryLimit" : "Timeout");
}
