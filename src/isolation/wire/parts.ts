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
 * Characters of parts the host holds for all its sandbox processes at once. Each process is held to its
 * own limit, but a host runs many (one per cordon): several compromised ones each holding their limit
 * would have the host hold gigabytes. Past this, a part is refused as the host's shortage, not as the
 * process's violation: an honest call with a large result may be the one that crosses it.
 */
export class HostHeldChars {
  chars = 0;
  constructor(readonly maxChars: number) {}
}

/** 512 Mi characters (at most 1 GiB of strings): eight of the largest capability arguments at once. */
export const HOST_HELD_PART_CHARS = new HostHeldChars(512 * 1024 * 1024);

/** What `PartAssembler.add` did: held the part, or which limit it would have crossed. */
export type PartAdded = "held" | "over-request" | "over-process" | "over-host";

/**
 * The host's side: the parts of each request of one sandbox process, joined when the message that takes
 * them arrives. Invariants: a request holds at most its own limit of characters, the process at most
 * `maxCharsPerProcess` over all its requests, the host at most `host.maxChars` over all its processes;
 * parts are dropped with their request.
 */
export class PartAssembler {
  private readonly parts = new Map<number, { texts: string[]; chars: number }>();
  private heldChars = 0;

  constructor(
    private readonly maxCharsPerProcess: number,
    private readonly host: HostHeldChars = HOST_HELD_PART_CHARS,
  ) {}

  /** Adds a part of request `id`, unless that would hold more than `maxChars` for it, more than the process may, or more than the host may. */
  add(id: number, text: string, maxChars: number): PartAdded {
    let entry = this.parts.get(id);
    if (!entry) this.parts.set(id, (entry = { texts: [], chars: 0 }));
    if (entry.chars + text.length > maxChars) return "over-request";
    if (this.heldChars + text.length > this.maxCharsPerProcess) return "over-process";
    if (this.host.chars + text.length > this.host.maxChars) return "over-host";
    entry.texts.push(text);
    entry.chars += text.length;
    this.heldChars += text.length;
    this.host.chars += text.length;
    return "held";
  }

  /** Request `id`'s parts joined and forgotten, or undefined when it has none. */
  take(id: number): string | undefined {
    const entry = this.parts.get(id);
    if (!entry) return undefined;
    this.drop(id);
    return entry.texts.join("");
  }

  /** Forgets request `id`'s parts (it ended). */
  drop(id: number): void {
    const entry = this.parts.get(id);
    if (!entry) return;
    this.heldChars -= entry.chars;
    this.host.chars -= entry.chars;
    this.parts.delete(id);
  }

  /** True while request `id` has parts waiting for their message. */
  has(id: number): boolean {
    return this.parts.has(id);
  }
}
