import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import zlib from "node:zlib";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FetchCapability, type FetchAuditEvent, type FetchHostOptions } from "../../src/capabilities/fetch.js";
import { ToolHostError } from "../../src/errors.js";
import type { SandboxPolicy } from "../../src/policy/permissions.js";

/*
 * The fetch capability's ordinary behaviour: arguments, round trips, response types, headers,
 * redirects, audit, TLS. Only servers started here on 127.0.0.1 are contacted, through the operator
 * option `allowInternalHosts: ["127.0.0.1"]`; names are answered by a stub resolver.
 */
const PUBLIC: SandboxPolicy = { network: { mode: "public" } };
const CTX = { anima: "alice", tool: "probe" };

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}
const seen: Seen[] = [];
let audit: FetchAuditEvent[];
let base: string;
let server: http.Server;

function route(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer): void {
  const url = new URL(req.url ?? "/", "http://x");
  const text = "compressed text";
  switch (url.pathname) {
    case "/echo":
      res.setHeader("x-multi", ["one", "two"]);
      res.setHeader("set-cookie", ["a=1", "b=2"]);
      res.writeHead(201, "Made", { "content-type": "application/json" });
      return void res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: body.toString("base64") }));
    case "/text":
      return void res.writeHead(200, { "content-type": "text/plain; charset=utf-8" }).end("héllo wörld ✓");
    case "/latin1":
      return void res.writeHead(200, { "content-type": "text/plain; charset=ISO-8859-1" }).end(Buffer.from("café", "latin1"));
    case "/json":
      return void res.writeHead(200, { "content-type": "application/json" }).end('{"a":[1,2]}');
    case "/notjson":
      return void res.writeHead(200).end("<html>");
    case "/empty":
      return void res.writeHead(204).end();
    case "/bytes":
      return void res.writeHead(200).end(Buffer.from([0, 1, 2, 255, 254]));
    case "/gzip":
      return void res.writeHead(200, { "content-encoding": "gzip" }).end(zlib.gzipSync(text));
    case "/deflate":
      return void res.writeHead(200, { "content-encoding": "deflate" }).end(zlib.deflateSync(text));
    case "/br":
      return void res.writeHead(200, { "content-encoding": "br" }).end(zlib.brotliCompressSync(text));
    case "/zstd":
      return void res.writeHead(200, { "content-encoding": "zstd" }).end("??");
    case "/r": {
      const status = Number(url.searchParams.get("status") ?? 302);
      return void res.writeHead(status, { location: url.searchParams.get("to") ?? "/echo" }).end("moved");
    }
    case "/loop":
      return void res.writeHead(302, { location: "/loop" }).end();
    default:
      res.writeHead(404).end("no such route");
  }
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      route(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  seen.length = 0;
  audit = [];
});

const names: Record<string, string> = { "pinned.test": "127.0.0.1", "other.test": "127.0.0.1" };
function capability(options: FetchHostOptions = {}): FetchCapability {
  return new FetchCapability({
    allowInternalHosts: ["127.0.0.1"],
    lookup: async (name) => {
      const address = names[name.replace(/\.$/, "")];
      if (!address) throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
      return [{ address, family: 4 }];
    },
    onAudit: (event) => audit.push(event),
    ...options,
  });
}
const fetcher = capability();

async function fails(promise: Promise<unknown>, type: string): Promise<ToolHostError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, "expected an error").toBeInstanceOf(ToolHostError);
  expect((error as ToolHostError).type, (error as ToolHostError).message).toBe(type);
  return error as ToolHostError;
}

function echoed(body: string): { method: string; url: string; headers: Record<string, string>; body: string } {
  return JSON.parse(body) as { method: string; url: string; headers: Record<string, string>; body: string };
}

describe("fetch: requests and responses round-trip", () => {
  it("sends method, headers and a text body; returns status, headers and the final URL", async () => {
    const result = await fetcher.fetch(
      CTX,
      `${base}/echo?q=1`,
      { method: "post", headers: { "X-Test": "yes", "Content-Type": "text/plain" }, body: "hé" },
      PUBLIC,
    );
    expect(result).toMatchObject({ status: 201, statusText: "Made", url: `${base}/echo?q=1`, redirected: false });
    expect(result.headers["content-type"]).toBe("application/json");
    expect(result.headers["x-multi"]).toBe("one, two");
    expect(result.headers["set-cookie"]).toBe("a=1, b=2");
    const echo = echoed(result.body);
    expect(echo.method).toBe("POST");
    expect(echo.url).toBe("/echo?q=1");
    expect(echo.headers).toMatchObject({ "x-test": "yes", "content-type": "text/plain", "content-length": "3", "accept-encoding": "gzip, deflate, br" });
    expect(echo.headers["host"]).toBe(base.slice("http://".length));
    expect(Buffer.from(echo.body, "base64").toString()).toBe("hé");
  });

  it("sends a base64 body as bytes; supports HEAD, PUT, PATCH, DELETE and OPTIONS", async () => {
    const bytes = Buffer.from([0, 255, 10, 13, 128]);
    const put = await fetcher.fetch(CTX, `${base}/echo`, { method: "PUT", body: bytes.toString("base64"), bodyEncoding: "base64" }, PUBLIC);
    expect(Buffer.from(echoed(put.body).body, "base64")).toEqual(bytes);
    for (const method of ["PATCH", "DELETE", "OPTIONS"])
      expect(echoed((await fetcher.fetch(CTX, `${base}/echo`, { method }, PUBLIC)).body).method).toBe(method);
    const head = await fetcher.fetch(CTX, `${base}/text`, { method: "HEAD" }, PUBLIC);
    expect([head.status, head.body]).toEqual([200, ""]);
  });

  it("returns text (by charset), JSON text and base64 bytes", async () => {
    expect((await fetcher.fetch(CTX, `${base}/text`, {}, PUBLIC)).body).toBe("héllo wörld ✓");
    expect((await fetcher.fetch(CTX, `${base}/latin1`, { responseType: "text" }, PUBLIC)).body).toBe("café");
    expect(JSON.parse((await fetcher.fetch(CTX, `${base}/json`, { responseType: "json" }, PUBLIC)).body)).toEqual({ a: [1, 2] });
    expect((await fetcher.fetch(CTX, `${base}/empty`, { responseType: "json" }, PUBLIC)).body).toBe("null");
    await fails(fetcher.fetch(CTX, `${base}/notjson`, { responseType: "json" }, PUBLIC), "ExecutionError");
    expect((await fetcher.fetch(CTX, `${base}/bytes`, { responseType: "bytes" }, PUBLIC)).body).toBe(Buffer.from([0, 1, 2, 255, 254]).toString("base64"));
  });

  it("decodes gzip, deflate and br; refuses encodings it cannot decode", async () => {
    for (const encoding of ["gzip", "deflate", "br"]) expect((await fetcher.fetch(CTX, `${base}/${encoding}`, {}, PUBLIC)).body).toBe("compressed text");
    expect((await fails(fetcher.fetch(CTX, `${base}/zstd`, {}, PUBLIC), "ExecutionError")).message).toContain("content-encoding");
  });
});

describe("fetch: untrusted arguments are validated before anything is sent", () => {
  it("refuses CR, LF and NUL in header names and values, and a Host override, as violations", async () => {
    for (const headers of [
      { "X-A": "1\r\nX-Injected: 1" },
      { "X-A": "1\nx" },
      { "X-A": "a\0b" },
      { "X-A\r\nX-B": "1" },
      { Host: "internal.admin" },
      { host: "x" },
    ]) {
      await fails(fetcher.fetch(CTX, `${base}/echo`, { headers }, PUBLIC), "SandboxViolation");
    }
    expect(seen).toEqual([]);
  });

  it("refuses managed, duplicate, malformed and non-string headers", async () => {
    let getterCalled = false;
    const withGetter = Object.defineProperty({}, "X-A", { enumerable: true, get: () => ((getterCalled = true), "v") });
    for (const headers of [
      { "Transfer-Encoding": "chunked" },
      { "content-length": "1" },
      { Connection: "upgrade" },
      { Upgrade: "websocket" },
      { TE: "trailers" },
      { "Proxy-Authorization": "x" },
      { "Accept-Encoding": "zstd" },
      { "X-A": "1", "x-a": "2" },
      { "X A": "1" },
      { "": "1" },
      { "X-A": 1 },
      { "X-A": ["1"] },
      { "X-A": "\u0001" },
      { "X-A": "✓" },
      [["X-A", "1"]],
      "X-A: 1",
      withGetter,
    ]) {
      await fails(fetcher.fetch(CTX, `${base}/echo`, { headers }, PUBLIC), "InvalidArguments");
    }
    expect(getterCalled).toBe(false);
    expect(seen).toEqual([]);
  });

  it("refuses bad URLs, methods, bodies, timeouts, response types and unknown options", async () => {
    const bad: Array<[unknown, unknown]> = [
      [42, {}],
      [{ href: `${base}/echo` }, {}],
      [new URL(`${base}/echo`), {}],
      ["/echo", {}],
      [`${base}/${"a".repeat(9000)}`, {}],
      [`${base}/echo`, { method: "TRACE" }],
      [`${base}/echo`, { method: "CONNECT" }],
      [`${base}/echo`, { method: "GET\r\nX: 1" }],
      [`${base}/echo`, { method: 1 }],
      [`${base}/echo`, { body: "x" }],
      [`${base}/echo`, { method: "POST", body: 5 }],
      [`${base}/echo`, { method: "POST", body: { a: 1 } }],
      [`${base}/echo`, { method: "POST", body: "x", bodyEncoding: "hex" }],
      [`${base}/echo`, { method: "POST", body: "not base64!", bodyEncoding: "base64" }],
      [`${base}/echo`, { timeoutMs: 0 }],
      [`${base}/echo`, { timeoutMs: -1 }],
      [`${base}/echo`, { timeoutMs: "100" }],
      [`${base}/echo`, { timeoutMs: 1e9 }],
      [`${base}/echo`, { timeoutMs: Number.NaN }],
      [`${base}/echo`, { responseType: "blob" }],
      [`${base}/echo`, { redirect: "manual" }],
      [`${base}/echo`, []],
      [`${base}/echo`, "GET"],
      [`${base}/echo`, Object.defineProperty({}, "method", { enumerable: true, get: () => "GET" })],
    ];
    for (const [url, init] of bad) await fails(fetcher.fetch(CTX, url, init, PUBLIC), "InvalidArguments");
    const small = capability({ limits: { maxRequestBytes: 10 } });
    await fails(small.fetch(CTX, `${base}/echo`, { method: "POST", body: "x".repeat(11) }, PUBLIC), "InvalidArguments");
    expect(seen).toEqual([]);
  });

  it("never puts the query string (often a secret) into messages or audit records", async () => {
    const error = await fails(fetcher.fetch(CTX, `${base}/echo?api_key=SECRET`, {}, { network: { mode: "none" } }), "SandboxViolation");
    expect(error.message).not.toContain("SECRET");
    expect(JSON.stringify(audit)).not.toContain("SECRET");
    expect(audit).toEqual([{ ...CTX, operation: "fetch", target: `${base}/echo?…`, outcome: "denied", reason: expect.stringContaining("SandboxViolation") }]);
  });

  it("names a refused scheme's URL as written, without credentials, query or opaque text (scheme_display)", async () => {
    const shown: Array<[string, string]> = [
      ["file:///etc/passwd", "file:///etc/passwd"], // was "null/etc/passwd": the origin of file: is "null"
      ["blob:http://u:p@example.com/x?k=SECRET", "blob:http://example.com/x?…"], // was "http://example.comhttp://u:p@example.com/x"
      ["ftp://u:p@example.com/pub?k=SECRET", "ftp://example.com/pub?…"],
      ["data:text/plain,SECRET", "data:…"],
      ["javascript:alert('SECRET')", "javascript:…"],
    ];
    for (const [url, display] of shown) {
      audit = [];
      const error = await fails(fetcher.fetch(CTX, url, {}, PUBLIC), "SandboxViolation");
      expect(error.message).toBe(`fetch ${display}: the scheme "${new URL(url).protocol.slice(0, -1)}" is not allowed (only http and https)`);
      expect(audit.map((event) => event.target)).toEqual([display]);
    }
  });
});

describe("fetch: redirects", () => {
  const via = (to: string, status = 302) => `${base}/r?status=${status}&to=${encodeURIComponent(to)}`;

  it("follows relative and absolute redirects, auditing every hop", async () => {
    const result = await fetcher.fetch(CTX, via(via("/echo?end=1", 301), 308), {}, PUBLIC);
    expect(result).toMatchObject({ status: 201, url: `${base}/echo?end=1`, redirected: true });
    expect(audit.map((e) => [e.operation, e.outcome, e.status])).toEqual([
      ["fetch", "ok", 308],
      ["fetch.redirect", "ok", 301],
      ["fetch.redirect", "ok", 201],
    ]);
  });

  it("303 (and 301/302 after POST) continue as a body-less GET; 307/308 keep method and body", async () => {
    const post = { method: "POST", body: "payload", headers: { "Content-Type": "text/plain", "X-Keep": "1" } };
    for (const status of [301, 302, 303]) {
      const echo = echoed((await fetcher.fetch(CTX, via("/echo", status), post, PUBLIC)).body);
      expect([echo.method, echo.body, echo.headers["content-type"], echo.headers["x-keep"]]).toEqual(["GET", "", undefined, "1"]);
    }
    for (const status of [307, 308]) {
      const echo = echoed((await fetcher.fetch(CTX, via("/echo", status), post, PUBLIC)).body);
      expect([echo.method, Buffer.from(echo.body, "base64").toString(), echo.headers["content-type"]]).toEqual(["POST", "payload", "text/plain"]);
    }
  });

  it("drops Authorization and Cookie when a redirect changes origin, keeps them otherwise", async () => {
    const headers = { Authorization: "Bearer t", Cookie: "c=1", "X-Other": "o" };
    const same = echoed((await fetcher.fetch(CTX, via("/echo"), { headers }, PUBLIC)).body);
    expect([same.headers["authorization"], same.headers["cookie"]]).toEqual(["Bearer t", "c=1"]);
    const port = new URL(base).port;
    const cross = echoed((await fetcher.fetch(CTX, via(`http://pinned.test:${port}/echo`), { headers }, PUBLIC)).body);
    expect([cross.headers["authorization"], cross.headers["cookie"], cross.headers["x-other"], cross.headers["host"]]).toEqual([
      undefined,
      undefined,
      "o",
      `pinned.test:${port}`,
    ]);
  });

  it("stops after maxRedirects, and at an unparsable Location", async () => {
    expect((await fails(fetcher.fetch(CTX, `${base}/loop`, {}, PUBLIC), "ExecutionError")).message).toContain("more than 5 redirects");
    expect(seen).toHaveLength(6);
    expect(audit.map((e) => e.outcome)).toEqual(["ok", "ok", "ok", "ok", "ok", "error"]);
    await fails(capability({ limits: { maxRedirects: 0 } }).fetch(CTX, via("/echo"), {}, PUBLIC), "ExecutionError");
    expect((await fails(fetcher.fetch(CTX, via("http://[bad"), {}, PUBLIC), "ExecutionError")).message).toContain("invalid URL");
  });
});

// A self-signed certificate made offline by openssl at test time; without openssl the TLS tests skip.
function makeCertificate(): { key: string; cert: string } | undefined {
  const dir = mkdtempSync(join(tmpdir(), "awt-tls-"));
  try {
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=pinned.test",
        "-addext",
        "subjectAltName=DNS:pinned.test,IP:127.0.0.1",
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
      ],
      { stdio: "ignore", timeout: 10_000 },
    );
    return { key: readFileSync(join(dir, "key.pem"), "utf8"), cert: readFileSync(join(dir, "cert.pem"), "utf8") };
  } catch {
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
const tls = makeCertificate();

describe.skipIf(!tls)("fetch: https", () => {
  let secure: https.Server;
  let port: number;
  const serverNames: Array<string | false | null> = [];
  beforeAll(async () => {
    secure = https.createServer({ key: tls?.key, cert: tls?.cert }, (req, res) => res.end(`tls ok ${req.headers.host}`));
    secure.on("secureConnection", (socket: TLSSocket) => serverNames.push(socket.servername));
    await new Promise<void>((resolve) => secure.listen(0, "127.0.0.1", resolve));
    port = (secure.address() as AddressInfo).port;
  });
  afterAll(async () => {
    secure.closeAllConnections();
    await new Promise((resolve) => secure.close(resolve));
  });

  it("verifies the certificate against the name while connecting to the pinned address", async () => {
    const trusting = capability({ ca: tls?.cert });
    expect((await trusting.fetch(CTX, `https://pinned.test:${port}/`, {}, PUBLIC)).body).toBe(`tls ok pinned.test:${port}`);
    expect(serverNames.at(-1)).toBe("pinned.test"); // SNI is the name, not the address
    expect((await trusting.fetch(CTX, `https://127.0.0.1:${port}/`, {}, PUBLIC)).body).toBe(`tls ok 127.0.0.1:${port}`);
    // other.test also resolves to 127.0.0.1, but the certificate does not name it.
    expect((await fails(trusting.fetch(CTX, `https://other.test:${port}/`, {}, PUBLIC), "ExecutionError")).message).toContain("TLS");
    // Without the CA the self-signed certificate is not trusted.
    expect((await fails(capability().fetch(CTX, `https://pinned.test:${port}/`, {}, PUBLIC), "ExecutionError")).message).toContain("TLS");
  });

  it("verifies certificates even when the host's environment says not to (tls_reject_unauthorized_env)", async () => {
    // A daemon inherits the environment of the caller that started it: NODE_TLS_REJECT_UNAUTHORIZED=0
    // there must not make every Anima's fetches accept a forged certificate.
    const before = process.env["NODE_TLS_REJECT_UNAUTHORIZED"];
    process.env["NODE_TLS_REJECT_UNAUTHORIZED"] = "0";
    try {
      expect((await fails(capability().fetch(CTX, `https://pinned.test:${port}/`, {}, PUBLIC), "ExecutionError")).message).toContain("TLS");
    } finally {
      if (before === undefined) delete process.env["NODE_TLS_REJECT_UNAUTHORIZED"];
      else process.env["NODE_TLS_REJECT_UNAUTHORIZED"] = before;
    }
  });
});
