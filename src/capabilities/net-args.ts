import { ToolHostError } from "../errors.js";

/**
 * Validation of the fetch capability's arguments. They arrive from a tool as untrusted plain data, so
 * every field is read exactly once, from an own data property (a getter is refused, not called), into
 * a fresh copy; later code only ever sees the copy. Nothing is coerced: wrong types are refused.
 */
export type ResponseType = "text" | "json" | "bytes";

export interface FetchArgs {
  url: URL;
  method: string;
  /** Header names as the tool wrote them; unique case-insensitively. */
  headers: Record<string, string>;
  body: Buffer | undefined;
  timeoutMs: number;
  responseType: ResponseType;
}

export interface ArgLimits {
  timeoutMs: number;
  maxTimeoutMs: number;
  maxRequestBytes: number;
}

/** Longest URL accepted, in characters. */
export const MAX_URL_CHARS = 8_192;
/** Most request headers a tool may set. */
const MAX_HEADERS = 100;
/** Longest header name and value, in characters. */
const MAX_HEADER_NAME_CHARS = 256;
const MAX_HEADER_VALUE_CHARS = 8_192;

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
const INIT_KEYS = new Set(["method", "headers", "body", "bodyEncoding", "timeoutMs", "responseType"]);
const RESPONSE_TYPES = new Set<string>(["text", "json", "bytes"]);
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Headers the host sets itself. Framing and connection headers (Content-Length, Transfer-Encoding,
 * Connection, TE, Upgrade, …) must match what the host actually sends, or requests could be smuggled;
 * Accept-Encoding must name only encodings the host can decode within its size cap; Proxy-* headers
 * are meaningless without a proxy. Host is derived from the URL: overriding it would let a tool reach
 * a different virtual host than the one the policy checked, so it is a SandboxViolation.
 */
const MANAGED_HEADERS = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "content-length",
  "expect",
  "accept-encoding",
]);

export function parseFetchArgs(rawUrl: unknown, rawInit: unknown, limits: ArgLimits): FetchArgs {
  const op = "fetch";
  if (typeof rawUrl !== "string") throw invalid(`${op}: the URL must be a string`);
  if (rawUrl.length > MAX_URL_CHARS) throw invalid(`${op}: the URL is longer than ${MAX_URL_CHARS} characters`);
  let url: URL;
  try {
    // No base: relative URLs are refused. WHATWG parsing canonicalises the host (decimal, octal, hex
    // and short IPv4 forms, IDNA, percent-encoding), so all later checks see one spelling.
    url = new URL(rawUrl);
  } catch {
    throw invalid(`${op}: "${rawUrl.slice(0, 100)}" is not a valid absolute URL`);
  }

  const init = plainCopy(rawInit ?? {}, `${op}: the options`);
  for (const key of Object.keys(init)) {
    if (!INIT_KEYS.has(key)) throw invalid(`${op}: unknown option "${key.slice(0, 40)}" (known: ${[...INIT_KEYS].join(", ")})`);
  }

  const rawMethod = init["method"] ?? "GET";
  if (typeof rawMethod !== "string" || !METHODS.has(rawMethod.toUpperCase())) {
    throw invalid(`${op}: method must be one of ${[...METHODS].join(", ")}`);
  }
  const method = rawMethod.toUpperCase();

  const headers = parseHeaders(init["headers"], op);

  const responseType = init["responseType"] ?? "text";
  if (typeof responseType !== "string" || !RESPONSE_TYPES.has(responseType)) throw invalid(`${op}: responseType must be "text", "json" or "bytes"`);

  const rawTimeout = init["timeoutMs"] ?? limits.timeoutMs;
  if (typeof rawTimeout !== "number" || !Number.isFinite(rawTimeout) || rawTimeout <= 0 || rawTimeout > limits.maxTimeoutMs) {
    throw invalid(`${op}: timeoutMs must be a number of milliseconds above 0 and at most ${limits.maxTimeoutMs}`);
  }

  return {
    url,
    method,
    headers,
    body: parseBody(init["body"], init["bodyEncoding"], method, limits, op),
    timeoutMs: Math.ceil(rawTimeout),
    responseType: responseType as ResponseType,
  };
}

function parseHeaders(raw: unknown, op: string): Record<string, string> {
  const headers = plainCopy(raw ?? {}, `${op}: headers`);
  const entries = Object.entries(headers);
  if (entries.length > MAX_HEADERS) throw invalid(`${op}: more than ${MAX_HEADERS} headers`);
  const seen = new Set<string>();
  const result: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [name, value] of entries) {
    const shownName = JSON.stringify(name.slice(0, 60));
    // CR, LF and NUL are how header injection and request smuggling start: a violation, not a typo.
    if (/[\r\n\0]/.test(name)) throw violation(`${op}: the header name ${shownName} contains CR, LF or NUL`);
    if (name.length > MAX_HEADER_NAME_CHARS || !TOKEN.test(name)) throw invalid(`${op}: ${shownName} is not a valid header name`);
    if (typeof value !== "string") throw invalid(`${op}: the value of header ${shownName} must be a string`);
    if (/[\r\n\0]/.test(value)) throw violation(`${op}: the value of header ${shownName} contains CR, LF or NUL`);
    // Node sends header values as Latin-1: anything else would be silently mangled, so say so instead.
    if (/[\x01-\x08\x0b-\x1f\x7f]|[^\x00-\xff]/.test(value)) throw invalid(`${op}: the value of header ${shownName} has control or non-Latin-1 characters`);
    if (value.length > MAX_HEADER_VALUE_CHARS) throw invalid(`${op}: the value of header ${shownName} is longer than ${MAX_HEADER_VALUE_CHARS} characters`);
    const lower = name.toLowerCase();
    if (lower === "host") throw violation(`${op}: the Host header is derived from the URL and cannot be set`);
    if (MANAGED_HEADERS.has(lower) || lower.startsWith("proxy-")) throw invalid(`${op}: the header ${shownName} is managed by the host and cannot be set`);
    if (seen.has(lower)) throw invalid(`${op}: the header ${shownName} is given twice (header names are case-insensitive)`);
    seen.add(lower);
    result[name] = value;
  }
  return result;
}

function parseBody(raw: unknown, rawEncoding: unknown, method: string, limits: ArgLimits, op: string): Buffer | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== "string") throw invalid(`${op}: body must be a string (text, or base64 with bodyEncoding "base64")`);
  const encoding = rawEncoding ?? "utf8";
  if (encoding !== "utf8" && encoding !== "base64") throw invalid(`${op}: bodyEncoding must be "utf8" or "base64"`);
  if (method === "GET" || method === "HEAD") throw invalid(`${op}: a ${method} request cannot have a body`);
  // Measured before decoding, so an oversized argument is not copied first.
  const size = encoding === "utf8" ? Buffer.byteLength(raw, "utf8") : Math.floor((raw.length * 3) / 4);
  if (size > limits.maxRequestBytes + 2) throw invalid(`${op}: the body is larger than the ${limits.maxRequestBytes}-byte limit`);
  if (encoding === "base64" && !BASE64.test(raw)) throw invalid(`${op}: the body is not valid base64`);
  const bytes = Buffer.from(raw, encoding);
  if (bytes.length > limits.maxRequestBytes) throw invalid(`${op}: the body is larger than the ${limits.maxRequestBytes}-byte limit`);
  return bytes;
}

/** A copy of a plain object's own data properties; accessors, arrays and class instances are refused. */
function plainCopy(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalid(`${what} must be a plain object`);
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) throw invalid(`${what} must be a plain object`);
  const copy: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const key of Reflect.ownKeys(value)) {
    if (typeof key !== "string") throw invalid(`${what} must not have symbol keys`);
    const descriptor = Object.getOwnPropertyDescriptor(value, key);
    if (!descriptor || !("value" in descriptor)) throw invalid(`${what}: "${key.slice(0, 40)}" must be a plain value, not a getter`);
    if (descriptor.value !== undefined) copy[key] = descriptor.value;
  }
  return copy;
}

function invalid(message: string): ToolHostError {
  return new ToolHostError("InvalidArguments", message);
}

function violation(message: string): ToolHostError {
  return new ToolHostError("SandboxViolation", message);
}
