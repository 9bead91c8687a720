import { isAscii } from "node:buffer";
import { TextDecoder } from "node:util";
import type { FetchAnswer } from "../contract/isolate.js";
import { truncateForAudit } from "../audit/audit-log.js";
import { ToolHostError } from "../errors.js";
import type { AnswerMeter, CallContext } from "../isolation/wire/messages.js";
import { REPLY_SLICE_CHARS } from "../isolation/wire/reply-chunks.js";
import type { SandboxPolicy } from "../policy/permissions.js";
import { InternalAllowList } from "./net-address.js";
import { type FetchArgs, type ResponseType, parseFetchArgs } from "./net-args.js";
import { type HopResponse, overBudgetError, sendRequest } from "./net-request.js";
import { type ResolverSettings, SystemResolver } from "./net-resolve.js";
import { type HostLookup, LookupShares, checkTarget } from "./net-target.js";

export type { ResponseType } from "./net-args.js";
export type { HostLookup } from "./net-target.js";
export { nonPublicReason } from "./net-address.js";

/**
 * The `fetch` capability, host side (docs/design.md §3, §9): one HTTP(S) request on behalf of a tool.
 *
 * `fetch(context, url, init, sandbox)` fits `NetworkRequester` in service.ts. `init` is
 * `{ method, headers, body, bodyEncoding, timeoutMs, responseType }`, all untrusted (net-args.ts);
 * the answer is plain data, `body` being text, JSON text or base64 (responseType text/json/bytes).
 *
 * Who may be reached (net-target.ts, net-address.ts): http and https only; the Anima's
 * `sandbox.network` (`public`, `none`, or an allowlist) decides which hosts, and every address must be
 * public unicast unless the operator's `allowInternalHosts` names it (that option never widens an
 * Anima's own policy). Names are resolved once (net-resolve.ts: cancellable, off libuv's threadpool, at
 * most `maxLookupsPerAnima` outstanding per Anima), every answer is checked, and the connection is
 * pinned to the checked answers (net-request.ts). Redirects are followed here, by hand, and every hop
 * is checked like the first request.
 *
 * Error types: `InvalidArguments` (bad input), `SandboxViolation` (refused by policy, address, port,
 * scheme, a Host header or a CR/LF/NUL in a header, an Anima's share of name lookups), `Busy` (the host's
 * name lookups), `Timeout` (total, header or body-idle time),
 * `ExecutionError` (connection or TLS failure, undecodable body, too many redirects, a body over the
 * size cap: the response was allowed, it is just too big for the tool to receive; and a body that does
 * not fit in the capability byte budgets, below).
 *
 * Memory: what a fetch holds on the host is charged to the call's `AnswerMeter` (the call's, the
 * Anima's and the host's capability byte budgets, isolation/call-ledger.ts) before it is held: the body
 * chunk by chunk as it arrives (net-request.ts), its joined copy, the text it becomes and the frame that
 * carries that text to a sandbox process (`encodeBody`). It stays charged until the answer has left the
 * host. A fetch that finds no room fails; it never waits with bytes in hand.
 */
export interface FetchLimits {
  /** Total time of one fetch (all redirects and the body included) when the tool sets no timeoutMs, in ms. Default: 30,000. */
  timeoutMs: number;
  /** Largest timeoutMs a tool may ask for, in ms. Default: 120,000. */
  maxTimeoutMs: number;
  /** Time from sending a request to its response headers, per hop, in ms. Default: 15,000. */
  headerTimeoutMs: number;
  /** Longest pause between two chunks of a response body, in ms. Default: 10,000. */
  bodyIdleTimeoutMs: number;
  /** Largest response body, in bytes, both as received and after decompression. Default: 10 MiB. */
  maxResponseBytes: number;
  /** Largest request body, in bytes (after base64 decoding). Default: 10 MiB. */
  maxRequestBytes: number;
  /** Redirects followed before the fetch fails. Default: 5. */
  maxRedirects: number;
  /** Time one DNS query waits for its answer before it is sent again, in ms. Default: 5,000 (glibc's). */
  dnsQueryTimeoutMs: number;
  /** Times a DNS query is sent before the name counts as unresolvable. Default: 2 (glibc's). */
  dnsTries: number;
  /** Name lookups one Anima may have outstanding, those of fetches that ended included. Default: 16. */
  maxLookupsPerAnima: number;
  /** Name lookups outstanding on the host, all Animas together (each holds a socket while it waits). Default: 256. */
  maxLookupsPerHost: number;
}

export const DEFAULT_FETCH_LIMITS: Readonly<FetchLimits> = Object.freeze({
  timeoutMs: 30_000,
  maxTimeoutMs: 120_000,
  headerTimeoutMs: 15_000,
  bodyIdleTimeoutMs: 10_000,
  maxResponseBytes: 10 * 1024 * 1024,
  maxRequestBytes: 10 * 1024 * 1024,
  maxRedirects: 5,
  dnsQueryTimeoutMs: 5_000,
  dnsTries: 2,
  maxLookupsPerAnima: 16,
  maxLookupsPerHost: 256,
});

/** Limits that count things (not ms or bytes): whole numbers. */
const COUNT_LIMITS = new Set<string>(["maxRedirects", "dnsTries", "maxLookupsPerAnima", "maxLookupsPerHost"]);

/** One HTTP request (a hop) or a refusal, for the audit trail. Shapes like the `capability` audit event. */
export interface FetchAuditEvent {
  anima: string;
  tool: string;
  callId?: string;
  /** `fetch` for the tool's own request, `fetch.redirect` for each redirect hop. */
  operation: "fetch" | "fetch.redirect";
  /** The URL without credentials and query (`?…` marks one), truncated. */
  target: string;
  outcome: "ok" | "denied" | "error";
  /** Error type and message, when refused or failed. */
  reason?: string;
  /** HTTP status, when a response arrived. */
  status?: number;
}

/** Operator options of the host (not the tool's). */
export interface FetchHostOptions {
  /** Host names (`intranet.example`, `*.corp.example`), IPs and CIDRs reachable even though not public.
   *  Default: none. Metadata addresses need their exact IP here, a covering range is not enough. */
  allowInternalHosts?: readonly string[];
  /** Partial overrides of DEFAULT_FETCH_LIMITS. */
  limits?: Partial<FetchLimits>;
  /** Name resolution. Default: the hosts file, then DNS through c-ares (net-resolve.ts). Tests inject a stub. */
  lookup?: HostLookup;
  /** Where the default resolution looks: DNS servers, hosts file, resolv.conf. Default: the system's. Tests point it at stand-ins. */
  dns?: Pick<ResolverSettings, "servers" | "hostsFile" | "resolvConf">;
  /** CA certificates (PEM) trusted for https, REPLACING Node's bundled roots. Default: the bundled roots. */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Called for every hop and every refusal. Must not throw (errors are swallowed). */
  onAudit?: (event: FetchAuditEvent) => void;
}

/** What a fetch answers: the contract's `FetchAnswer` (text: the decoded text; json: the JSON text, verified to parse). */
export type FetchResult = FetchAnswer;

type Context = Pick<CallContext, "anima" | "tool" | "callId">;

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Headers describing a request body, dropped when a redirect turns the request into a GET. */
const BODY_HEADERS = new Set(["content-type", "content-encoding", "content-language", "content-location"]);
/** Credentials that must not follow a redirect to another origin (as WHATWG fetch). */
const CREDENTIAL_HEADERS = new Set(["authorization", "cookie"]);

export class FetchCapability {
  private readonly limits: FetchLimits;
  private readonly internal: InternalAllowList;
  private readonly lookup: HostLookup;
  private readonly lookups: LookupShares;

  constructor(private readonly options: FetchHostOptions = {}) {
    this.limits = { ...DEFAULT_FETCH_LIMITS, ...options.limits };
    for (const [key, value] of Object.entries(this.limits)) {
      const whole = COUNT_LIMITS.has(key);
      const ok =
        typeof value === "number" && Number.isFinite(value) && (!whole || Number.isInteger(value)) && (key === "maxRedirects" ? value >= 0 : value > 0);
      if (!ok)
        throw new ToolHostError(
          "InvalidArguments",
          `fetch limits: ${key} must be a positive ${whole ? "whole " : ""}number`,
          "fix the fetch capability's host options",
        );
    }
    this.internal = new InternalAllowList(options.allowInternalHosts ?? []);
    this.lookup =
      options.lookup ??
      new SystemResolver({
        ...options.dns,
        queryTimeoutMs: this.limits.dnsQueryTimeoutMs,
        tries: this.limits.dnsTries,
        // Only operator names are looked up as written, so only they can be found in the hosts file.
        hostsNames: (name) => this.internal.allowsName(name),
      }).lookup;
    this.lookups = new LookupShares(this.limits.maxLookupsPerAnima, this.limits.maxLookupsPerHost);
  }

  /**
   * `callSignal` aborts when the call that asked ends: the fetch (lookup, connection, body) stops then.
   * `meter`: where the body is charged before it is held (the call's ledger); none: not charged.
   */
  async fetch(context: Context, url: unknown, init: unknown, sandbox: SandboxPolicy, callSignal?: AbortSignal, meter?: AnswerMeter): Promise<FetchResult> {
    let args: FetchArgs;
    try {
      args = parseFetchArgs(url, init, this.limits);
    } catch (error) {
      throw this.audit(context, "fetch", typeof url === "string" ? url : "(not a string)", error)!;
    }
    const controller = new AbortController();
    const timer = setTimeout(() => {
      controller.abort(new ToolHostError("Timeout", `fetch ${display(args.url)}: no complete response within ${args.timeoutMs} ms`));
    }, args.timeoutMs);
    const callEnded = () =>
      controller.abort(new ToolHostError("ExecutionError", `fetch ${display(args.url)}: the call ended before the response was complete`));
    if (callSignal?.aborted) callEnded();
    else callSignal?.addEventListener("abort", callEnded, { once: true });
    try {
      return await this.follow(context, args, sandbox.network, controller.signal, meter);
    } finally {
      clearTimeout(timer);
      callSignal?.removeEventListener("abort", callEnded);
      // Anything still open (a lookup, a socket) stops now: the tool has its answer or its error.
      if (!controller.signal.aborted) controller.abort(new ToolHostError("ExecutionError", "fetch ended"));
    }
  }

  private async follow(
    context: Context,
    args: FetchArgs,
    network: SandboxPolicy["network"],
    signal: AbortSignal,
    meter: AnswerMeter | undefined,
  ): Promise<FetchResult> {
    let current = args.url;
    let method = args.method;
    let headers = args.headers;
    let body = args.body;
    const rules = { network, internal: this.internal, lookup: this.lookup, signal, anima: context.anima, lookups: this.lookups };
    for (let hop = 0; ; hop++) {
      const operation = hop === 0 ? "fetch" : "fetch.redirect";
      const label = hop === 0 ? `fetch ${display(current)}` : `fetch (redirect ${hop}) ${display(current)}`;
      let response: HopResponse;
      try {
        const target = await checkTarget(current, rules, label);
        response = await sendRequest({
          url: current,
          target,
          method,
          headers: withFraming(headers, body),
          body,
          signal,
          headerTimeoutMs: this.limits.headerTimeoutMs,
          bodyIdleTimeoutMs: this.limits.bodyIdleTimeoutMs,
          maxResponseBytes: this.limits.maxResponseBytes,
          meter,
          ca: this.options.ca,
          label,
        });
      } catch (error) {
        throw this.audit(context, operation, current.href, error)!;
      }

      const location = response.headers.location;
      if (!REDIRECT_STATUSES.has(response.status) || typeof location !== "string" || location === "") {
        try {
          const bytes = await response.readBody();
          const result: FetchResult = {
            status: response.status,
            statusText: response.statusText,
            headers: flattenHeaders(response.headers),
            url: current.href,
            redirected: hop > 0,
            body: encodeBody(bytes, args.responseType, response.headers["content-type"], label, meter),
          };
          this.audit(context, operation, current.href, undefined, response.status);
          return result;
        } catch (error) {
          response.discard();
          throw this.audit(context, operation, current.href, error, response.status)!;
        }
      }

      response.discard();
      const next = hop < this.limits.maxRedirects ? parseLocation(location, current) : undefined;
      if (!next) {
        const why =
          hop < this.limits.maxRedirects
            ? `${label}: the redirect points to an invalid URL`
            : `fetch ${display(args.url)}: more than ${this.limits.maxRedirects} redirects`;
        throw this.audit(context, operation, current.href, new ToolHostError("ExecutionError", why), response.status)!;
      }
      this.audit(context, operation, current.href, undefined, response.status);
      // WHATWG fetch: 303 (except for HEAD), and 301/302 after a POST, continue as a body-less GET.
      if ((response.status === 303 && method !== "HEAD") || ((response.status === 301 || response.status === 302) && method === "POST")) {
        method = "GET";
        body = undefined;
        headers = without(headers, BODY_HEADERS);
      }
      if (next.origin !== current.origin) headers = without(headers, CREDENTIAL_HEADERS);
      current = next;
    }
  }

  /**
   * Reports one hop or refusal to onAudit, and returns the error as a ToolHostError (an unexpected
   * one becomes a plain ExecutionError: its message could hold host details) for `throw this.audit(…)`.
   */
  private audit(context: Context, operation: FetchAuditEvent["operation"], url: string, error?: unknown, status?: number): ToolHostError | undefined {
    const info =
      error === undefined ? undefined : error instanceof ToolHostError ? error : new ToolHostError("ExecutionError", `${operation} failed unexpectedly`);
    if (!this.options.onAudit) return info;
    const event: FetchAuditEvent = {
      anima: context.anima,
      tool: context.tool,
      ...(context.callId !== undefined ? { callId: context.callId } : {}),
      operation,
      target: auditTarget(url),
      outcome: info === undefined ? "ok" : info.type === "SandboxViolation" || info.type === "PermissionDenied" ? "denied" : "error",
      ...(info ? { reason: truncateForAudit(`${info.type}: ${info.message}`) } : {}),
      ...(status !== undefined ? { status } : {}),
    };
    try {
      this.options.onAudit(event);
    } catch {
      // An audit sink failing must not change what the tool gets.
    }
    return info;
  }
}

function parseLocation(location: string, base: URL): URL | undefined {
  try {
    return new URL(location, base);
  } catch {
    return undefined;
  }
}

/** The URL for messages: scheme, host and path, no credentials, no query or fragment (they may carry secrets). */
function display(url: URL): string {
  const text = shownUrl(url);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/**
 * Not `origin + pathname`: the origin of file:, data: … is "null" (`fetch null/etc/passwd`), and a
 * blob:'s is its inner URL's, whose path is the whole inner URL again. A URL with a host or a path
 * (http, file, ws …) is shown as `scheme://host/path`; a blob: as its inner http(s) URL is shown; any
 * other opaque URL (data:, javascript:, mailto:) by its scheme only, as its text may be anything.
 */
function shownUrl(url: URL): string {
  const query = url.search ? "?…" : "";
  if (url.host !== "" || url.pathname.startsWith("/")) return `${url.protocol}//${url.host}${url.pathname}${query}`;
  const inner = url.protocol === "blob:" ? URL.parse(url.pathname) : null;
  if (inner && (inner.protocol === "http:" || inner.protocol === "https:")) return `blob:${shownUrl(inner)}${query}`;
  return `${url.protocol}…`;
}

function auditTarget(url: string): string {
  const parsed = URL.parse(url);
  return truncateForAudit(parsed ? display(parsed) : (url.split("?")[0] ?? ""));
}

/** The tool's headers plus the framing the host owns: Content-Length for a body, Accept-Encoding. */
function withFraming(headers: Record<string, string>, body: Buffer | undefined): Record<string, string> {
  const framed: Record<string, string> = { ...headers, "Accept-Encoding": "gzip, deflate, br" };
  if (body !== undefined) framed["Content-Length"] = String(body.length);
  return framed;
}

function without(headers: Record<string, string>, names: ReadonlySet<string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !names.has(name.toLowerCase())));
}

function flattenHeaders(headers: NodeJS.Dict<string | string[]>): Record<string, string> {
  // fromEntries defines own properties: a header named __proto__ stays a header.
  return Object.fromEntries(
    Object.entries(headers).flatMap(([name, value]) => (value === undefined ? [] : [[name, Array.isArray(value) ? value.join(", ") : value]])),
  );
}

/**
 * The body as the tool gets it: base64 (bytes), or text decoded by its charset (text, json). Before the
 * text exists, `meter` is charged for the most it and the body hold together, and for the most the text
 * and one frame of it hold while the answer is sent; then for what the text holds, which stays charged
 * until the answer has left the host. A V8 string takes one byte a character when every character is
 * below U+0100, else two: base64 is always one; decoded text is counted at two unless every byte of the
 * body was ASCII (then it holds at most the body's size, in any charset: a character takes at least one
 * byte, and two-byte characters at least two). A frame escapes a character into up to 6 bytes of JSON
 * (`\u0000`), and carries at most `REPLY_SLICE_CHARS` of them (isolation/wire/reply-chunks.ts).
 * `JSON.parse`, which checks a json body, is not charged: it runs to its end in one turn of the event
 * loop, so at most one such check is alive in the host at a time, and what it builds is garbage after.
 */
function encodeBody(bytes: Buffer, type: ResponseType, contentType: string | undefined, label: string, meter: AnswerMeter | undefined): string {
  const ascii = type !== "bytes" && isAscii(bytes);
  const mostChars = type === "bytes" ? 4 * Math.ceil(bytes.length / 3) : bytes.length;
  const mostTextBytes = type === "bytes" || ascii ? mostChars : 2 * mostChars;
  const frameBytes = (chars: number) => Math.min(chars, REPLY_SLICE_CHARS) * (type === "bytes" ? 1 : 6);
  const shortfall = meter?.hold(mostTextBytes + Math.max(bytes.length, frameBytes(mostChars)));
  if (shortfall) throw overBudgetError(label, shortfall);
  const text = decodeBody(bytes, type, contentType, label);
  // Fewer bytes than charged above: never refused.
  meter?.hold((type === "bytes" ? text.length : ascii ? bytes.length : 2 * text.length) + frameBytes(text.length));
  return text;
}

function decodeBody(bytes: Buffer, type: ResponseType, contentType: string | undefined, label: string): string {
  if (type === "bytes") return bytes.toString("base64");
  if (type === "json") {
    // JSON is UTF-8 (RFC 8259) whatever the charset says.
    const text = new TextDecoder("utf-8").decode(bytes);
    if (text.trim() === "") return "null";
    try {
      JSON.parse(text);
    } catch {
      throw new ToolHostError("ExecutionError", `${label}: the response is not valid JSON`);
    }
    return text;
  }
  const charset = /charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? "")?.[1];
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset ?? "utf-8");
  } catch {
    decoder = new TextDecoder("utf-8"); // an unknown charset label: UTF-8, as browsers fall back
  }
  return decoder.decode(bytes);
}
