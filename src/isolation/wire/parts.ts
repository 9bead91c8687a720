import type { ErrorInfo } from "../../errors.js";
import { MAX_FRAME_FROM_SANDBOX_BYTES, PART_CHARS } from "./frames.js";
import type { FromSandbox } from "./messages.js";

/**
 * Strings too large for one frame of a sandbox process (frames.ts): a tool's result text and the
 * arguments of a large capability call (a 10 MiB write). The sandbox process sends them as `part`
 * messages of `PART_CHARS` characters before the message they belong to (`fitToFrames`); the host joins
 * them (`PartAssembler`) within limits it sets, so that no frame and no join costs it unbounded work.
 */

/** Longest log line a sandbox process sends, characters (the host cuts lines far shorter: maxLogLineChars). */
const MAX_LOG_MESSAGE_CHARS = PART_CHARS;
/** Room left in a describe answer's frame for the message around the module's description, bytes. */
const DESCRIBE_FRAME_MARGIN_BYTES = 1024;

/** The sandbox process's side: `message` as the messages that carry it within the frame limit. */
export function fitToFrames(message: FromSandbox): FromSandbox[] {
  if (message.type === "capability" && message.argsJson.length > PART_CHARS) {
    return [...partsOf(message.id, message.argsJson), { ...message, argsJson: "", parted: true }];
  }
  if (message.type === "log" && message.message.length > MAX_LOG_MESSAGE_CHARS)
    return [{ ...message, message: message.message.slice(0, MAX_LOG_MESSAGE_CHARS) }];
  if (message.type !== "response") return [message];
  const outcome = message.outcome;
  if (outcome.ok && "value" in outcome && outcome.value.kind !== "none" && outcome.value.text.length > PART_CHARS) {
    return [...partsOf(message.id, outcome.value.text), { ...message, outcome: { ...outcome, value: { ...outcome.value, text: "" } }, parted: true }];
  }
  if (outcome.ok && "module" in outcome) {
    const bytes = Buffer.byteLength(JSON.stringify(outcome.module));
    if (bytes > MAX_FRAME_FROM_SANDBOX_BYTES - DESCRIBE_FRAME_MARGIN_BYTES) {
      const limit = MAX_FRAME_FROM_SANDBOX_BYTES - DESCRIBE_FRAME_MARGIN_BYTES;
      const error = {
        type: "LoadError" as const,
        fault: "tool" as const,
        message: `the tool's schemas and profile take ${bytes} bytes as JSON, more than the ${limit}-byte limit`,
        hint: "declare fewer or smaller schemas",
      };
      return [{ type: "response", id: message.id, outcome: { ok: false, error } }];
    }
  }
  return [message];
}

function partsOf(id: number, text: string): FromSandbox[] {
  const parts: FromSandbox[] = [];
  for (let start = 0; start < text.length; start += PART_CHARS) parts.push({ type: "part", id, text: text.slice(start, start + PART_CHARS) });
  return parts;
}

/**
 * Characters of parts held against one limit: all the processes of one cordon together (its normal,
 * low-priority, demoted and retiring processes alike), or all the host's processes together. Past
 * either, a part is refused as a shortage, not as the sending process's violation: within a cordon the
 * process whose part crosses may be an honest one, and host-wide it may be another cordon's.
 */
export class HeldChars {
  chars = 0;
  constructor(readonly maxChars: number) {}
}

/** 512 Mi characters (at most 1 GiB of strings): eight of the largest capability arguments at once. */
export const HOST_HELD_PART_CHARS = new HeldChars(512 * 1024 * 1024);

/**
 * What all the processes of one cordon may have the host hold at once, characters: a quarter of the
 * host's budget, so that one cordon (a whole compromised one, however many processes it has alive,
 * demoted or retiring) leaves three quarters of it to the others. An honest process holds the parts of
 * one message at a time (see `PartAssembler`), at most 16 Mi characters (`MAX_CAPABILITY_ARGS_CHARS`)
 * under the default result limit: 128 Mi are eight such processes of one cordon mid-message at once.
 * A count of its own rather than the capability byte budget (call-ledger.ts): parts are held before
 * their message says what they are for, and that budget is per Anima, where a cordon may hold many.
 */
export const MAX_HELD_PART_CHARS_PER_CORDON = HOST_HELD_PART_CHARS.maxChars / 4;

/** The budget of a process not yet given to a cordon (a spare): it may hold nothing. */
const UNCHARGED = new HeldChars(0);

/**
 * What `PartAssembler.add` did: held the part, or which rule it would have broken. `interleaved` and
 * `over-request` are what no honest process does; `over-cordon` and `over-host` are shortages.
 */
export type PartAdded = "held" | "interleaved" | "over-request" | "over-cordon" | "over-host";

/**
 * The host's side: the parts of the message one sandbox process is sending, joined when that message
 * arrives. A process writes a message's parts and the message itself in one go (`fitToFrames`, and the
 * child's outbox writes them in order), so an honest process never has the host hold parts of two
 * requests at once. Invariants: parts of one request only are held at a time (a part of another request
 * before that one's message is `interleaved`); that request holds at most its own limit of characters
 * (`maxChars` of `add`: whatever the parts are for, result or capability arguments, since they share one
 * count); the process's cordon at most its `HeldChars`, the host at most its own; parts are dropped with
 * their request.
 */
export class PartAssembler {
  private open: { id: number; texts: string[]; chars: number } | undefined;
  private cordon: HeldChars = UNCHARGED;

  constructor(private host: HeldChars = HOST_HELD_PART_CHARS) {}

  /**
   * Counts this process's parts against `cordon` (and `host`) from now on. Called when the process is
   * given to a cordon, before it is sent any request: it holds nothing yet.
   */
  chargeTo(cordon: HeldChars, host: HeldChars = this.host): void {
    if (this.open) throw new Error("a process's parts change budgets only while it holds none");
    this.cordon = cordon;
    this.host = host;
  }

  /** Request `id` whose parts are held now, if any (for the report of an interleaved part). */
  get openId(): number | undefined {
    return this.open?.id;
  }

  /** Adds a part of request `id`, unless that would break a rule of `PartAdded` (`maxChars`: the request's own limit). */
  add(id: number, text: string, maxChars: number): PartAdded {
    if (this.open && this.open.id !== id) return "interleaved";
    const held = this.open?.chars ?? 0;
    if (held + text.length > maxChars) return "over-request";
    if (this.cordon.chars + text.length > this.cordon.maxChars) return "over-cordon";
    if (this.host.chars + text.length > this.host.maxChars) return "over-host";
    this.open ??= { id, texts: [], chars: 0 };
    this.open.texts.push(text);
    this.open.chars += text.length;
    this.cordon.chars += text.length;
    this.host.chars += text.length;
    return "held";
  }

  /** Request `id`'s parts joined and forgotten, or undefined when it has none. */
  take(id: number): string | undefined {
    const open = this.open;
    if (!open || open.id !== id) return undefined;
    this.drop(id);
    return open.texts.join("");
  }

  /** Forgets request `id`'s parts (it ended). */
  drop(id: number): void {
    const open = this.open;
    if (!open || open.id !== id) return;
    this.cordon.chars -= open.chars;
    this.host.chars -= open.chars;
    this.open = undefined;
  }
}

/**
 * The failure of a call whose part a shortage refused (its process is told to stop the call). Fault
 * `host`: capacity, which the call's own process may not be the one using (another process of its
 * cordon, or another cordon).
 */
export function heldPartsShortage(refused: "over-cordon" | "over-host"): ErrorInfo {
  const holder = refused === "over-cordon" ? "the sandbox processes of this Anima's cordon hold" : "the host holds";
  return {
    type: "ExecutionError",
    fault: "host",
    message: `${holder} as much of sandbox processes' large strings as they may; this call's was refused`,
    hint: "try again shortly",
  };
}
