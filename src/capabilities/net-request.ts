import type { LookupAddress } from "node:dns";
import http, { type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import type { Transform } from "node:stream";
import zlib from "node:zlib";
import { ToolHostError } from "../errors.js";
import type { AnswerMeter, BudgetShortfall } from "../isolation/wire/messages.js";
import { BodyBlocks } from "./net-body.js";
import type { CheckedTarget, ResolvedAddress } from "./net-target.js";

/**
 * One HTTP exchange of the fetch capability, to an already-checked target. The connection is pinned:
 * the `lookup` handed to http(s).request ignores the name and answers with the checked addresses, so
 * the name is not resolved again (no DNS rebinding between check and connect), while the Host header
 * and TLS SNI/certificate checks still use the name. Each request gets its own agent (no socket reuse
 * across checks). Bodies are capped both as received and after decoding; decoding is streamed, so a
 * decompression bomb stops at the cap instead of being inflated into memory. Every chunk of a body is
 * charged to the call's capability byte budgets (`meter`) before it is kept, so that many fetches at
 * once hold no more than those budgets, whatever each one's cap.
 */
export interface HopRequest {
  url: URL;
  target: CheckedTarget;
  method: string;
  headers: Record<string, string>;
  body: Buffer | undefined;
  /** Aborted when the fetch's total time runs out; its reason becomes the error. */
  signal: AbortSignal;
  /** Time from sending the request to its response headers, in ms. */
  headerTimeoutMs: number;
  /** Longest pause between two body chunks, in ms. */
  bodyIdleTimeoutMs: number;
  /** Largest body, in bytes, received and decoded. */
  maxResponseBytes: number;
  /** Where the body's bytes are charged before they are kept (the call's ledger); none: not charged. */
  meter: AnswerMeter | undefined;
  /** Trusted CA certificates (PEM) replacing Node's bundled roots; undefined keeps the roots. */
  ca: string | Buffer | Array<string | Buffer> | undefined;
  /** Prefix of error messages: names the URL as the tool may see it. */
  label: string;
}

export interface HopResponse {
  status: number;
  statusText: string;
  headers: IncomingHttpHeaders;
  /** Reads the whole (decoded) body, within the caps and timeouts. Call once, or `discard`. */
  readBody(): Promise<Buffer>;
  /** Drops the body and closes the connection (redirects, errors). */
  discard(): void;
}

/** Longest response header section accepted, in bytes (Node's own default, made explicit). */
const MAX_HEADER_BYTES = 16 * 1024;

export function sendRequest(hop: HopRequest): Promise<HopResponse> {
  return new Promise<HopResponse>((resolve, reject) => {
    const { url, target, label } = hop;
    // The total time may have run out while the target was being checked: no connection then.
    if (hop.signal.aborted) return reject(hop.signal.reason as Error);
    const secure = url.protocol === "https:";
    const options: https.RequestOptions = {
      protocol: url.protocol,
      hostname: target.host,
      port: target.port,
      path: `${url.pathname}${url.search}`,
      method: hop.method,
      headers: hop.headers,
      agent: secure ? new https.Agent({ keepAlive: false }) : new http.Agent({ keepAlive: false }),
      lookup: pinnedLookup(target.addresses),
      maxHeaderSize: MAX_HEADER_BYTES,
      insecureHTTPParser: false,
      setHost: true,
    };
    // Certificates are always verified, whatever the environment of whoever started this host says: Node
    // reads NODE_TLS_REJECT_UNAUTHORIZED=0 as "verify nothing" for requests that do not say, and a shared
    // daemon started by one caller's shell would then accept forged certificates on every Anima's fetches.
    if (secure) options.rejectUnauthorized = true;
    // SNI carries names only; for an IP literal the certificate is checked against the IP.
    if (secure && isIP(target.host) === 0) options.servername = target.host;
    if (secure && hop.ca !== undefined) options.ca = hop.ca;

    let settled = false;
    let failBody: ((error: ToolHostError) => void) | undefined;
    const request = (secure ? https : http).request(options);
    const headerTimer = setTimeout(() => {
      request.destroy(new ToolHostError("Timeout", `${label}: no response headers within ${hop.headerTimeoutMs} ms`));
    }, hop.headerTimeoutMs);
    const onAbort = () => request.destroy(hop.signal.reason as Error);
    hop.signal.addEventListener("abort", onAbort, { once: true });
    const cleanup = () => {
      clearTimeout(headerTimer);
      hop.signal.removeEventListener("abort", onAbort);
    };

    // Errors after the headers arrived belong to the body reader, if one is running.
    request.on("error", (error) => {
      const mapped = networkError(error, label);
      if (!settled) {
        settled = true;
        cleanup();
        reject(mapped);
      } else failBody?.(mapped);
    });
    request.on("response", (response) => {
      clearTimeout(headerTimer);
      settled = true;
      resolve({
        status: response.statusCode ?? 0,
        statusText: response.statusMessage ?? "",
        headers: response.headers,
        readBody: () =>
          readBody(response, hop, (fail) => {
            failBody = fail;
          }).finally(cleanup),
        discard: () => {
          cleanup();
          response.destroy();
          request.destroy();
        },
      });
    });
    request.end(hop.body);
  });
}

/**
 * The pinned resolver. Node calls it with `all: true` when it races address families (Happy Eyeballs)
 * and without when it does not; both get only the checked addresses.
 */
function pinnedLookup(addresses: readonly ResolvedAddress[]) {
  return (
    _hostname: string,
    options: { all?: boolean; family?: number | string },
    callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ): void => {
    const family = options.family === "IPv4" ? 4 : options.family === "IPv6" ? 6 : Number(options.family ?? 0);
    const usable = addresses.filter((a) => family === 0 || a.family === family);
    const first = usable[0];
    if (!first) {
      const error: NodeJS.ErrnoException = new Error("no checked address of the requested family");
      error.code = "ENOTFOUND";
      callback(error, "", 0);
    } else if (options.all)
      callback(
        null,
        usable.map((a) => ({ address: a.address, family: a.family })),
      );
    else callback(null, first.address, first.family);
  };
}

/**
 * The error of a fetch whose body (or what it becomes) found no room in a capability byte budget: the
 * tool's when its own call or Anima holds the budget, the host's when all Animas together do.
 */
export function overBudgetError(label: string, shortfall: BudgetShortfall): ToolHostError {
  const whose = shortfall.scope === "call" ? "this call's" : shortfall.scope === "anima" ? "this Anima's" : "the host's";
  const message = `${label}: the response body does not fit in ${whose} ${shortfall.limitBytes}-byte budget of capability bytes in flight`;
  return shortfall.scope === "host"
    ? new ToolHostError("ExecutionError", message, "retry later: the host holds other Animas' answers now", "host")
    : new ToolHostError("ExecutionError", message, "fetch fewer large bodies at once: each counts until the tool has it", "tool");
}

/** Responses that have no body whatever their Content-Length says (RFC 9110 §6.4.1). */
function hasNoBody(method: string, status: number | undefined): boolean {
  return method === "HEAD" || status === 204 || status === 304;
}

function readBody(response: IncomingMessage, hop: HopRequest, setFailer: (fail: (error: ToolHostError) => void) => void): Promise<Buffer> {
  const { label, maxResponseBytes: cap } = hop;
  return new Promise<Buffer>((resolve, reject) => {
    const tooLarge = () => new ToolHostError("ExecutionError", `${label}: the response body is larger than the ${cap}-byte limit`);
    /** Charges `heldBytes` in all for this body; the error to fail with when a budget has no room. */
    const charge = (heldBytes: number): ToolHostError | undefined => {
      const shortfall = hop.meter?.hold(heldBytes);
      return shortfall ? overBudgetError(label, shortfall) : undefined;
    };
    let body: BodyBlocks | undefined;
    let received = 0;
    let done = false;
    let idleTimer: NodeJS.Timeout | undefined;
    let decoder: Transform | undefined | null;

    const fail = (error: ToolHostError) => {
      if (done) return;
      done = true;
      clearTimeout(idleTimer);
      hop.signal.removeEventListener("abort", onAbort);
      decoder?.destroy();
      response.destroy();
      body?.clear();
      hop.meter?.hold(0);
      reject(error);
    };
    const onAbort = () => fail(hop.signal.reason as ToolHostError);
    const resetIdle = () => {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(
        () => fail(new ToolHostError("Timeout", `${label}: the response body stalled for ${hop.bodyIdleTimeoutMs} ms`)),
        hop.bodyIdleTimeoutMs,
      );
    };
    // Each chunk is charged (with the block it may need) before it is kept, and copied into the body's blocks.
    const keep = (chunk: Buffer) => {
      if (done || !body) return;
      if (body.bytes + chunk.length > cap) return fail(tooLarge());
      const overBudget = charge(body.allocatedWith(chunk.length));
      if (overBudget) return fail(overBudget);
      body.add(chunk);
    };
    const finish = () => {
      if (done || !body) return;
      // Joining several blocks copies them: both are held until the blocks are let go.
      const overBudget = charge(body.bytesWhileJoining);
      if (overBudget) return fail(overBudget);
      done = true;
      clearTimeout(idleTimer);
      hop.signal.removeEventListener("abort", onAbort);
      const joined = body.join();
      charge(joined.heldBytes); // no more than charged: never refused
      resolve(joined.body);
    };

    setFailer(fail);
    if (hop.signal.aborted) return fail(hop.signal.reason as ToolHostError);
    hop.signal.addEventListener("abort", onAbort, { once: true });

    // A HEAD, 204 or 304 response may declare the length of a body it does not carry.
    const declared = hasNoBody(hop.method, response.statusCode) ? Number.NaN : Number(response.headers["content-length"]);
    if (Number.isFinite(declared) && declared > cap) return fail(tooLarge());

    const encoding = String(response.headers["content-encoding"] ?? "identity")
      .trim()
      .toLowerCase();
    decoder = decoderFor(encoding);
    if (decoder === null)
      return fail(new ToolHostError("ExecutionError", `${label}: the response uses an unsupported content-encoding "${encoding.slice(0, 40)}"`));
    // The declared length sizes the body's first block only where it is the length of what is kept.
    body = new BodyBlocks(cap, !decoder && Number.isSafeInteger(declared) && declared >= 0 ? declared : undefined);

    resetIdle();
    response.on("data", (chunk: Buffer) => {
      received += chunk.length;
      if (received > cap) return fail(tooLarge());
      resetIdle();
      if (!decoder) keep(chunk);
    });
    if (decoder) {
      const active = decoder;
      // pipe() applies backpressure: the socket is paused while the decoder is busy, and the decoder
      // emits bounded chunks that are counted one by one, so a bomb is cut off at the cap.
      response.pipe(active);
      active.on("data", keep);
      active.on("end", finish);
      active.on("error", () => fail(new ToolHostError("ExecutionError", `${label}: the response body is not valid ${encoding} data`)));
    } else {
      response.on("end", finish);
    }
    // An 'error' (Node: "aborted") or a 'close' before the message completed: the body was cut short.
    const cutShort = () => fail(new ToolHostError("ExecutionError", `${label}: the connection was lost before the response body was complete`));
    response.on("error", cutShort);
    response.on("close", () => {
      if (!response.complete) cutShort();
    });
  });
}

/** undefined: no decoding needed; null: an encoding we cannot decode. */
function decoderFor(encoding: string): Transform | undefined | null {
  switch (encoding) {
    case "":
    case "identity":
      return undefined;
    case "gzip":
    case "x-gzip":
      return zlib.createGunzip();
    case "deflate":
      return zlib.createInflate();
    case "br":
      return zlib.createBrotliDecompress();
    default:
      return null;
  }
}

const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH)/;

/** A tool-facing error for a connection failure. Node's own messages are not passed on: they name the
 *  connected IP address and port, which the tool did not necessarily give. */
export function networkError(error: unknown, label: string): ToolHostError {
  if (error instanceof ToolHostError) return error;
  const code = String((error as NodeJS.ErrnoException | undefined)?.code ?? "");
  const what =
    code === "ECONNREFUSED"
      ? "the connection was refused"
      : code === "ECONNRESET" || code === "EPIPE"
        ? "the connection was reset"
        : code === "ETIMEDOUT"
          ? "the connection timed out"
          : code === "ENETUNREACH" || code === "EHOSTUNREACH"
            ? "the host is unreachable"
            : TLS_CODE.test(code)
              ? `the TLS connection could not be verified (${code})`
              : code.startsWith("HPE_")
                ? `the response is not valid HTTP (${code})`
                : `the request failed (${code || "error"})`;
  return new ToolHostError("ExecutionError", `${label}: ${what}`);
}
