import type { EntryTracker } from "./call-guard.js";
import { classifyIvmError } from "./ivm-errors.js";
import type { ActiveCall, PooledIsolate } from "./pooled-isolate.js";
import type { CapabilityInvoker, CapabilityReply, ToolLogLine } from "./protocol.js";
import { type CapabilityAnswerBatch, type HostBridge, MAX_TIMERS_PER_CALL, MAX_TIMER_DELAY_MS } from "../contract/isolate.js";

/**
 * The host's side of the bridge the prelude calls (`GuestBridge` in src/contract/isolate.ts): what each
 * isolated-vm callback does. The isolate is untrusted: each handler checks its plain arguments, acts only
 * for the call the isolate is serving now (`pooled.active`), and never throws into the isolate (an error
 * would carry host stacks). Timers are counted here against the contract's `MAX_TIMERS_PER_CALL` (the
 * prelude keeps the same limit).
 */

/** What the handlers need of the runner. */
export interface BridgeHost {
  onLog(line: ToolLogLine): void;
  entries: EntryTracker;
  invokeCapability: CapabilityInvoker;
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
    // The prelude's memory guards ask for the call to end (sandbox/memory-guards.ts).
    stop(reason) {
      pooled.guard?.halt(reason === "MemoryLimit" ? "MemoryLimit" : "Timeout");
    },
    // Capability calls run on the host (never in the isolate's thread), within the call's ledger; the
    // answers re-enter the isolate in batches (`deliver`).
    capability(id, name, argsJson) {
      const active = pooled.active;
      if (!active || typeof id !== "number" || typeof name !== "string" || typeof argsJson !== "string") return;
      void active.ledger
        .run(name, argsJson, (signal) => host.invokeCapability(active.context, name, argsJson, signal))
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
  if (!active.settling) settleBatch(host, pooled, active);
}

function settleBatch(host: BridgeHost, pooled: PooledIsolate, active: ActiveCall): void {
  const batch: CapabilityAnswerBatch = active.replies.splice(0);
  let batchJson: string;
  try {
    batchJson = JSON.stringify(batch);
  } catch {
    batchJson = JSON.stringify(batch.map(([id]) => [id, { ok: false, error: { type: "ExecutionError", message: "the host's answer could not be sent" } }]));
  }
  active.settling = true;
  host.entries
    .track(pooled.entry!.settleCapabilities.apply(undefined, [batchJson]))
    .catch((error: unknown) => {
      if (pooled.active === active) haltAfterFailedEntry(pooled, active, error);
    })
    .finally(() => {
      active.settling = false;
      if (active.replies.length > 0 && pooled.active === active && pooled.healthy) settleBatch(host, pooled, active);
    });
}

/**
 * A re-entry into the isolate (a timer, a capability answer) that failed ends the call: at the memory
 * limit, or (isolated-vm's timeout) at the deadline.
 */
function haltAfterFailedEntry(pooled: PooledIsolate, active: ActiveCall, error: unknown): void {
  const memory = classifyIvmError(error) === "MemoryLimit" || pooled.hitMemoryLimit;
  active.guard.halt(memory ? "MemoryLimit" : "Timeout");
}

