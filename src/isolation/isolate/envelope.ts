import { DEFAULT_FAULT, type ErrorInfo } from "../../errors.js";
import { stripStackFrames } from "./ivm-errors.js";
import { boundToolMessage } from "../wire/tool-text.js";
import { boundedResult } from "../wire/result-bounds.js";
import type { BundlePosition, DescribeOutcome, ResultValue } from "../wire/messages.js";
import {
  type CallEnvelope,
  type DescribeEnvelope,
  type FailureEnvelope,
  INVALID_INPUT_ERROR_TYPE,
  MAX_TOOL_MESSAGE_CHARS,
  MAX_TOOL_STACK_CHARS,
} from "../../contract/isolate.js";
import { bundlePositions } from "./tool-frames.js";

/**
 * The decoder of the prelude's envelopes, as the contract declares them (`CallEnvelope`,
 * `DescribeEnvelope` in src/contract/isolate.ts), and what the host makes of them. The text comes from
 * the isolate and is untrusted: every field is checked, and nothing in it can claim more than the tool
 * could do anyway.
 */

/** Longest error message a tool's failure or load error carries out of the sandbox (the contract's). */
export { MAX_TOOL_MESSAGE_CHARS };

export type ParsedCall = ({ ok: true; value: ResultValue } | { ok: false; error: ErrorInfo; toolFrames?: BundlePosition[] }) & {
  /** The prelude asks for its isolate not to serve another call (a budget was used up). */
  recycle: boolean;
};

/**
 * JSON escaping can make a string up to 6 times longer (`\u0001`), and the prelude has already cut the
 * text to `maxResultBytes` characters, so a well-formed result envelope is never longer than this.
 */
function maxEnvelopeChars(maxResultBytes: number): number {
  return maxResultBytes * 6 + 4096;
}

/** The same for a failure, whose message and stack the prelude cut to their own limits. */
const MAX_FAILURE_ENVELOPE_CHARS = (MAX_TOOL_MESSAGE_CHARS + MAX_TOOL_STACK_CHARS) * 6 + 4096;

/** The envelope as a JSON object, or undefined for anything else: the text comes from untrusted code. */
function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

// ---- decoders of the contract's envelopes ----------------------------------------------------------

/**
 * A failure as the tool's isolate framed it. A failure keeps what it can say: a field that is not what
 * the contract declares takes the value the host gives a failure that said nothing (the text came from
 * code that may have corrupted its own prelude).
 */
function decodeFailure(e: Record<string, unknown>, defaultType: string, defaultMessage: string): FailureEnvelope & { recycle: boolean } {
  return {
    ok: false,
    errorType: typeof e["errorType"] === "string" ? e["errorType"] : defaultType,
    message: typeof e["message"] === "string" ? e["message"] : defaultMessage,
    ...(typeof e["stack"] === "string" ? { stack: e["stack"].slice(0, MAX_TOOL_STACK_CHARS) } : {}),
    recycle: e["recycle"] === true,
  };
}

/**
 * `GuestEntry.call`'s answer decoded as the contract's `CallEnvelope`, or undefined when the text is not
 * one (too long for `maxResultBytes`, not JSON, neither a result nor a failure, or a result the prelude
 * would not have framed: result-bounds.ts). Only declared fields are kept; a result's size and cut are
 * measured here.
 */
export function decodeCallEnvelope(text: unknown, maxResultBytes: number): CallEnvelope | undefined {
  const maxChars = maxEnvelopeChars(maxResultBytes);
  const e = typeof text === "string" && text.length <= Math.max(maxChars, MAX_FAILURE_ENVELOPE_CHARS) ? parseObject(text) : undefined;
  if (!e) return undefined;
  if (e["ok"] === false) return decodeFailure(e, "ExecutionError", "the tool failed");
  if (e["ok"] !== true || (text as string).length > maxChars) return undefined;
  const recycle = e["recycle"] === true;
  if (e["kind"] === "none") return { ok: true, kind: "none", recycle };
  if ((e["kind"] === "text" || e["kind"] === "json") && typeof e["text"] === "string") {
    // The prelude's claims are checked as the host checks its sandbox processes' (result-bounds.ts), so
    // that an honest process never passes on what the host would take for its own violation.
    const claimed: ResultValue = {
      kind: e["kind"],
      text: e["text"],
      bytes: typeof e["bytes"] === "number" ? e["bytes"] : Number.NaN,
      truncated: e["truncated"] === true,
    };
    const bounded = boundedResult(claimed, maxResultBytes);
    return bounded.broken === undefined ? { ok: true, ...bounded.value, recycle } : undefined;
  }
  return undefined;
}

/**
 * `GuestEntry.describe`'s answer decoded as the contract's `DescribeEnvelope`, or undefined when the text
 * is not one. Export types that are not strings are left out; schemas and profile stay untrusted JSON.
 */
export function decodeDescribeEnvelope(text: unknown): DescribeEnvelope | undefined {
  const e = typeof text === "string" ? parseObject(text) : undefined;
  if (!e) return undefined;
  if (e["ok"] === false) return decodeFailure(e, "LoadError", "loading failed");
  const exportsInfo = e["exports"];
  if (e["ok"] !== true || typeof exportsInfo !== "object" || exportsInfo === null) return undefined;
  const exports: Record<string, string> = {};
  for (const [name, type] of Object.entries(exportsInfo)) if (typeof type === "string") exports[name] = type;
  return { ok: true, exports, schemas: e["schemas"] ?? null, profile: e["profile"] ?? null };
}

// ---- what the host makes of them --------------------------------------------------------------------

/**
 * A call's envelope as the host's outcome: which failures keep their type, and the message as it may
 * leave. `scriptFilename`: the name the tool's bundle was compiled under, whose frames in a failure's
 * stack become the outcome's `toolFrames` (positions only; see tool-frames.ts).
 */
export function parseCallEnvelope(text: unknown, limits: { maxResultBytes: number }, scriptFilename = ""): ParsedCall {
  const e = decodeCallEnvelope(text, limits.maxResultBytes);
  if (!e) return { ok: false, error: { type: "ExecutionError", fault: "tool", message: "the tool's result could not be read" }, recycle: true };
  const recycle = e.recycle === true;
  if (!e.ok) {
    // No envelope says MemoryLimit or Timeout for the host: those are the host's findings (the isolate
    // disposed at its limit, the prelude's stop request, the deadline: the runner's CallGuard), decided
    // before an envelope is read. A tool that re-labels an error `MemoryLimit` gets its own error, and
    // its isolate is not recycled for it.
    // Types a tool's failure may carry out: its own config error, and host denials it did not catch.
    // A tool's `InvalidInput` can claim the caller's InvalidArguments, and nothing more (src/contract/isolate.ts).
    const type =
      e.errorType === INVALID_INPUT_ERROR_TYPE ? "InvalidArguments" : PASSED_THROUGH.has(e.errorType) ? (e.errorType as "ToolConfigError") : "ExecutionError";
    const message = stripStackFrames(boundToolMessage(e.message));
    const toolFrames = bundlePositions(e.stack, scriptFilename);
    return {
      ok: false,
      error: { type, fault: DEFAULT_FAULT[type], message: message || "the tool failed without a message" },
      ...(toolFrames.length > 0 ? { toolFrames } : {}),
      recycle,
    };
  }
  if (e.kind === "none") return { ok: true, value: { kind: "none" }, recycle };
  return { ok: true, value: { kind: e.kind, text: e.text, bytes: e.bytes, truncated: e.truncated }, recycle };
}

/** A describe envelope as the host's outcome: any failure is a `LoadError`. */
export function parseDescribeEnvelope(text: unknown): DescribeOutcome {
  const e = decodeDescribeEnvelope(text);
  if (!e) return { ok: false, error: { type: "LoadError", fault: "tool", message: "the tool's description could not be read" } };
  if (!e.ok) return { ok: false, error: { type: "LoadError", fault: "tool", message: stripStackFrames(boundToolMessage(e.message)) } };
  return { ok: true, module: { exports: e.exports, schemas: e.schemas, profile: e.profile } };
}

const PASSED_THROUGH: ReadonlySet<string> = new Set(["ToolConfigError", "SandboxViolation", "PermissionDenied"]);
