import { ERROR_TYPES, type ErrorInfo, isFault } from "../../errors.js";
import { CAPABILITY_NAMES, LOG_LEVELS } from "../../contract/isolate.js";
import { boundToolMessage } from "./tool-text.js";
import {
  type BundlePosition,
  type CallLabel,
  type CallOutcome,
  type CapabilityReply,
  type DescribeOutcome,
  type FromSandbox,
  MAX_BUNDLE_POSITION,
  MAX_TOOL_FRAMES,
  type ModuleDescription,
  type ResultValue,
  type ToSandbox,
  type ToolBundle,
  type WireRequest,
  type WarmPoolStats,
} from "./messages.js";

/**
 * Decoding of the messages between the host and a sandbox process, both ways, against the unions of
 * messages.ts. Hand-written field checks: they run for every message, on the warm call's path.
 *
 * What a sandbox process sends (`decodeFromSandbox`): a sandbox process runs untrusted code, and after
 * an escape from an isolate it is the adversary itself: every message is checked against the declared
 * union, field by field, before the host acts on it, and only declared fields are kept. `undefined`
 * means a protocol violation (the pool retires the process). Nothing decoded here names an Anima, a
 * directory or a tool: the host attributes a message to the request it sent, by id.
 *
 * What the host sends (`decodeToSandbox`): the host is trusted, and a message that does not decode is a
 * bug of the host's; the sandbox process reports it and drops it (child/main.ts). A call request names
 * whom it is for by its label only (`isLabel`).
 */

const LOG_LEVEL_SET: ReadonlySet<string> = new Set(LOG_LEVELS);
const CAPABILITY_NAME_SET: ReadonlySet<string> = new Set(CAPABILITY_NAMES);
const ERROR_TYPE_SET: ReadonlySet<string> = new Set(ERROR_TYPES);

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isId(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value > 0;
}

/** The figures of a `warmPool` message, each a finite number of 0 or more (every field of `WarmPoolStats`). */
const WARM_POOL_FIGURES = [
  "idleIsolates",
  "idleBytes",
  "maxIdleBytes",
  "evictions",
  "idleInterpreters",
  "spareInterpreters",
  "compactions",
] as const satisfies readonly (keyof WarmPoolStats)[];

/** The fields each message may have: anything more (a `context`, an `anima`) is a violation. */
const FIELDS: Record<string, ReadonlySet<string>> = {
  ready: new Set(["type"]),
  retiring: new Set(["type", "reason"]),
  needBundle: new Set(["type", "id"]),
  log: new Set(["type", "id", "level", "message"]),
  capability: new Set(["type", "capabilityId", "id", "name", "argsJson", "parted"]),
  response: new Set(["type", "id", "outcome", "parted"]),
  part: new Set(["type", "id", "text"]),
  warmPool: new Set(["type", "statsId", ...WARM_POOL_FIGURES]),
};

export function decodeFromSandbox(raw: unknown): FromSandbox | undefined {
  if (!isObject(raw)) return undefined;
  const fields = typeof raw["type"] === "string" && Object.hasOwn(FIELDS, raw["type"]) ? FIELDS[raw["type"]] : undefined;
  if (!fields || Object.keys(raw).some((key) => !fields.has(key))) return undefined;
  switch (raw["type"]) {
    case "ready":
      return { type: "ready" };
    case "retiring":
      return typeof raw["reason"] === "string" ? { type: "retiring", reason: raw["reason"].slice(0, 500) } : undefined;
    case "needBundle":
      return isId(raw["id"]) ? { type: "needBundle", id: raw["id"] } : undefined;
    case "log": {
      const { id, level, message } = raw;
      if (!isId(id) || typeof level !== "string" || !LOG_LEVEL_SET.has(level) || typeof message !== "string") return undefined;
      return { type: "log", id, level: level as "info", message };
    }
    case "capability": {
      const { capabilityId, id, name, argsJson } = raw;
      // A name outside the contract is something the prelude never sends: the process is not running it any more.
      if (!isId(capabilityId) || !isId(id) || typeof name !== "string" || !CAPABILITY_NAME_SET.has(name) || typeof argsJson !== "string") return undefined;
      if (raw["parted"] === undefined) return { type: "capability", capabilityId, id, name, argsJson };
      return raw["parted"] === true && argsJson === "" ? { type: "capability", capabilityId, id, name, argsJson, parted: true } : undefined;
    }
    case "response": {
      if (!isId(raw["id"]) || !isObject(raw["outcome"])) return undefined;
      const outcome = raw["outcome"] as unknown as CallOutcome;
      if (raw["parted"] === undefined) return { type: "response", id: raw["id"], outcome };
      return raw["parted"] === true ? { type: "response", id: raw["id"], outcome, parted: true } : undefined;
    }
    case "part":
      return isId(raw["id"]) && typeof raw["text"] === "string" && raw["text"].length > 0 ? { type: "part", id: raw["id"], text: raw["text"] } : undefined;
    case "warmPool": {
      if (!isId(raw["statsId"]) || !WARM_POOL_FIGURES.every((key) => typeof raw[key] === "number" && Number.isFinite(raw[key]) && raw[key] >= 0))
        return undefined;
      const figures = Object.fromEntries(WARM_POOL_FIGURES.map((key) => [key, raw[key] as number])) as Record<(typeof WARM_POOL_FIGURES)[number], number>;
      return { type: "warmPool", statsId: raw["statsId"], ...figures };
    }
    default:
      return undefined;
  }
}

function decodeError(raw: unknown): ErrorInfo | undefined {
  if (!isObject(raw) || typeof raw["type"] !== "string" || !ERROR_TYPE_SET.has(raw["type"]) || typeof raw["message"] !== "string" || !isFault(raw["fault"]))
    return undefined;
  const info: ErrorInfo = { type: raw["type"] as ErrorInfo["type"], message: boundToolMessage(raw["message"]), fault: raw["fault"] };
  if (typeof raw["hint"] === "string") info.hint = boundToolMessage(raw["hint"]);
  return info;
}

function decodeValue(raw: unknown): ResultValue | undefined {
  if (!isObject(raw)) return undefined;
  if (raw["kind"] === "none") return { kind: "none" };
  if (
    (raw["kind"] === "text" || raw["kind"] === "json") &&
    typeof raw["text"] === "string" &&
    typeof raw["bytes"] === "number" &&
    Number.isFinite(raw["bytes"])
  ) {
    return { kind: raw["kind"], text: raw["text"], bytes: raw["bytes"], truncated: raw["truncated"] === true };
  }
  return undefined;
}

function isPositionNumber(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 1 && value <= MAX_BUNDLE_POSITION;
}

/** At most `MAX_TOOL_FRAMES` positions of two numbers each, copied; anything else is undefined. */
function decodeToolFrames(raw: unknown): BundlePosition[] | undefined {
  if (!Array.isArray(raw) || raw.length > MAX_TOOL_FRAMES) return undefined;
  const frames: BundlePosition[] = [];
  for (const frame of raw as unknown[]) {
    if (!isObject(frame) || !isPositionNumber(frame["line"]) || !isPositionNumber(frame["column"])) return undefined;
    frames.push({ line: frame["line"], column: frame["column"] });
  }
  return frames;
}

/** A call's outcome as the sandbox reported it; its duration is the host's own measurement. */
export function decodeCallOutcome(raw: unknown, durationMs: number): CallOutcome | undefined {
  if (!isObject(raw)) return undefined;
  if (raw["ok"] === true) {
    const value = decodeValue(raw["value"]);
    return value ? { ok: true, value, durationMs } : undefined;
  }
  const error = raw["ok"] === false ? decodeError(raw["error"]) : undefined;
  if (!error) return undefined;
  if (raw["toolFrames"] === undefined) return { ok: false, error, durationMs };
  const toolFrames = decodeToolFrames(raw["toolFrames"]);
  return toolFrames ? { ok: false, error, durationMs, toolFrames } : undefined;
}

export function decodeDescribeOutcome(raw: unknown): DescribeOutcome | undefined {
  if (!isObject(raw)) return undefined;
  if (raw["ok"] === false) {
    const error = decodeError(raw["error"]);
    return error ? { ok: false, error } : undefined;
  }
  const module = raw["module"];
  if (raw["ok"] !== true || !isObject(module) || !isObject(module["exports"])) return undefined;
  const exports: Record<string, string> = {};
  for (const [name, type] of Object.entries(module["exports"])) if (typeof type === "string") exports[name] = type;
  const description: ModuleDescription = { exports, schemas: module["schemas"] ?? null, profile: module["profile"] ?? null };
  return { ok: true, module: description };
}

// ---- what the host sends ---------------------------------------------------------------------------

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0;
}

function isBundle(raw: unknown): raw is ToolBundle {
  return isObject(raw) && typeof raw["hash"] === "string" && typeof raw["code"] === "string" && typeof raw["displayName"] === "string";
}

/**
 * A call's label (messages.ts `CallLabel`): its two fields and nothing else. Unlike the rest of what the
 * host sends, a field more is refused: the host's own record of a call (its folder, call and job ids)
 * never crosses, and a request that carries it is a bug of the host's to be seen, not ignored.
 */
function isLabel(raw: unknown): raw is CallLabel {
  return isObject(raw) && Object.keys(raw).length === 2 && typeof raw["anima"] === "string" && typeof raw["tool"] === "string";
}

function isRequest(raw: unknown): raw is WireRequest {
  if (!isObject(raw) || !isBundle(raw["bundle"]) || !isCount(raw["timeoutMs"]) || !isCount(raw["memoryLimitMb"])) return false;
  if (raw["op"] === "describe") return true;
  return (
    raw["op"] === "call" &&
    isLabel(raw["context"]) &&
    (raw["entry"] === "call" || raw["entry"] === "cli") &&
    typeof raw["schemaName"] === "string" &&
    typeof raw["payloadJson"] === "string" &&
    isCount(raw["maxResultBytes"]) &&
    isCount(raw["maxLogLines"]) &&
    isCount(raw["maxLogLineChars"])
  );
}

function isReply(raw: unknown): raw is CapabilityReply {
  if (!isObject(raw)) return false;
  if (raw["ok"] === true) return true;
  const error = raw["error"];
  return (
    raw["ok"] === false &&
    isObject(error) &&
    typeof error["type"] === "string" &&
    ERROR_TYPE_SET.has(error["type"]) &&
    typeof error["message"] === "string" &&
    (error["hint"] === undefined || typeof error["hint"] === "string")
  );
}

/**
 * A message from the host as messages.ts declares it (`ToSandbox`), or undefined. Checked in place, not
 * copied: the host is trusted, so fields the union does not declare are ignored rather than refused
 * (but in a call's label, `isLabel`), and the code of a bundle or the value of an answer (whatever JSON a capability gives) is not walked.
 */
export function decodeToSandbox(raw: unknown): ToSandbox | undefined {
  if (!isObject(raw)) return undefined;
  switch (raw["type"]) {
    case "request":
      return isId(raw["id"]) && isRequest(raw["request"]) ? (raw as ToSandbox) : undefined;
    case "capabilityReply": {
      const { joinSlicesInto, bulkBytes } = raw;
      const valid =
        isId(raw["capabilityId"]) &&
        isReply(raw["reply"]) &&
        (joinSlicesInto === undefined || joinSlicesInto === "value" || joinSlicesInto === "body") &&
        (bulkBytes === undefined || (isCount(bulkBytes) && Number.isSafeInteger(bulkBytes)));
      return valid ? (raw as ToSandbox) : undefined;
    }
    case "capabilityReplyPart":
      return isId(raw["capabilityId"]) && typeof raw["text"] === "string" ? (raw as ToSandbox) : undefined;
    case "abort":
      return isId(raw["id"]) ? (raw as ToSandbox) : undefined;
    case "forget":
      return typeof raw["anima"] === "string" ? (raw as ToSandbox) : undefined;
    case "stats":
      return isId(raw["statsId"]) ? (raw as ToSandbox) : undefined;
    case "shutdown":
      return raw as ToSandbox;
    default:
      return undefined;
  }
}
