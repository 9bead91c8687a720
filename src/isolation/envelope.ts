import type { ErrorInfo } from "../errors.js";
import { ivmErrorInfo, stripStackFrames } from "./ivm-errors.js";
import type { DescribeOutcome, ResultValue } from "./protocol.js";

/**
 * Parsing of the prelude's envelopes (sandbox/prelude.ts). The text comes from the isolate and is
 * untrusted: every field is checked, and nothing in it can claim more than the tool could do anyway.
 */

/**
 * Longest error message a tool's failure or load error carries out of the sandbox, in characters. The
 * text is the tool's own, and goes on to the audit log, the terminal, MCP clients and other processes.
 */
export const MAX_TOOL_MESSAGE_CHARS = 4_000;

/**
 * A tool's message, at most `MAX_TOOL_MESSAGE_CHARS` long with the note of how much was dropped. A cut
 * message fits the limit, so cutting it again (the prelude, the sandbox process and the host each do)
 * keeps the first note and its count. The prelude cuts the same way (sandbox/prelude.ts `failure`).
 */
export function boundToolMessage(message: string): string {
  if (message.length <= MAX_TOOL_MESSAGE_CHARS) return message;
  // The note's length with a count of as many digits as the whole length: the real count has no more.
  const kept = MAX_TOOL_MESSAGE_CHARS - `… [cut: ${message.length} more characters]`.length;
  return `${message.slice(0, kept)}… [cut: ${message.length - kept} more characters]`;
}

export type ParsedCall = ({ ok: true; value: ResultValue } | { ok: false; error: ErrorInfo }) & {
  /** The prelude asks for its isolate not to serve another call (a budget was used up). */
  recycle: boolean;
};

/**
 * JSON escaping can make a string up to 6 times longer (`\u0001`), and the prelude has already cut the
 * text to `maxResultBytes` characters, so a well-formed envelope is never longer than this.
 */
function maxEnvelopeChars(maxResultBytes: number): number {
  return maxResultBytes * 6 + 4096;
}

/** The envelope as a JSON object, or undefined for anything else: the text comes from untrusted code. */
function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export function parseCallEnvelope(text: unknown, limits: { maxResultBytes: number; timeoutMs: number; memoryLimitMb: number }): ParsedCall {
  const bad: ParsedCall = { ok: false, error: { type: "ExecutionError", message: "the tool's result could not be read" }, recycle: true };
  const e = typeof text === "string" && text.length <= maxEnvelopeChars(limits.maxResultBytes) ? parseObject(text) : undefined;
  if (!e) return bad;
  const recycle = e["recycle"] === true;
  if (e["ok"] === false) {
    if (e["errorType"] === "MemoryLimit") return { ok: false, error: ivmErrorInfo(undefined, limits, "MemoryLimit"), recycle: true };
    // Types a tool's failure may carry out: its own config error, and host denials it did not catch.
    const type = PASSED_THROUGH.has(e["errorType"] as string) ? (e["errorType"] as "ToolConfigError") : "ExecutionError";
    const message = typeof e["message"] === "string" ? stripStackFrames(boundToolMessage(e["message"])) : "the tool failed";
    return { ok: false, error: { type, message: message || "the tool failed without a message" }, recycle };
  }
  if (e["ok"] !== true) return bad;
  if (e["kind"] === "none") return { ok: true, value: { kind: "none" }, recycle };
  if ((e["kind"] === "text" || e["kind"] === "json") && typeof e["text"] === "string") {
    const bytes = typeof e["bytes"] === "number" && Number.isFinite(e["bytes"]) ? e["bytes"] : Buffer.byteLength(e["text"]);
    return { ok: true, value: { kind: e["kind"], text: e["text"], bytes, truncated: e["truncated"] === true }, recycle };
  }
  return bad;
}

export function parseDescribeEnvelope(text: unknown): DescribeOutcome {
  const bad: DescribeOutcome = { ok: false, error: { type: "LoadError", message: "the tool's description could not be read" } };
  const e = typeof text === "string" ? parseObject(text) : undefined;
  if (!e) return bad;
  if (e["ok"] === false) {
    return { ok: false, error: { type: "LoadError", message: typeof e["message"] === "string" ? stripStackFrames(boundToolMessage(e["message"])) : "loading failed" } };
  }
  const exportsInfo = e["exports"];
  if (e["ok"] !== true || typeof exportsInfo !== "object" || exportsInfo === null) return bad;
  const exports: Record<string, string> = {};
  for (const [name, type] of Object.entries(exportsInfo)) if (typeof type === "string") exports[name] = type;
  return { ok: true, module: { exports, schemas: e["schemas"] ?? null, profile: e["profile"] ?? null } };
}

const PASSED_THROUGH = new Set(["ToolConfigError", "SandboxViolation", "PermissionDenied"]);
