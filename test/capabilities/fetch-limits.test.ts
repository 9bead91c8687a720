import http from "node:http";
import type { AddressInfo } from "node:net";
import zlib from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FetchCapability, type FetchHostOptions } from "../../src/capabilities/fetch.js";
import { ToolHostError } from "../../src/errors.js";
import type { BudgetShortfall } from "../../src/isolation/wire/messages.js";
import type { SandboxPolicy } from "../../src/policy/permissions.js";
import { waitFor } from "../helpers/data-dir.js";

/*
 * Size caps and timeouts of the fetch capability, against a server started here on 127.0.0.1 (reached
 * through `allowInternalHosts`). Slow routes hold their responses until the fetch gives up; every wait
 * is bounded by the capability's own (short) limits or by waitFor's deadline.
 */
const PUBLIC: SandboxPolicy = { network: { mode: "public" } };
const CTX = { anima: "alice", tool: "probe" };
const MiB = 1024 * 1024;

let server: http.Server;
let base: string;
/** Routes record here when the client went away (the fetch stopped reading). */
const closed = new Set<string>();
/** One gzip member of 16 MiB of zeros (~16 KiB); members concatenate into one valid gzip stream. */
const gzipMember = zlib.gzipSync(Buffer.alloc(16 * MiB), { level: 9 });
/** 1 GiB of zeros as brotli (a few hundred KiB). Built once, streaming, so the test itself stays small. */
let brotliBomb: Buffer;

async function makeBrotliBomb(): Promise<Buffer> {
  const compressor = zlib.createBrotliCompress({ params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 1 } });
  const out: Buffer[] = [];
  compressor.on("data", (c: Buffer) => out.push(c));
  const done = new Promise((resolve) => compressor.on("end", resolve));
  const zeros = Buffer.alloc(MiB);
  for (let i = 0; i < 1024; i++) if (!compressor.write(zeros)) await new Promise((resolve) => compressor.once("drain", resolve));
  compressor.end();
  await done;
  return Buffer.concat(out);
}

/** Writes `chunk` until the client leaves (respecting backpressure) or `times` is reached. */
function stream(res: http.ServerResponse, name: string, chunk: Buffer, times = Number.POSITIVE_INFINITY): void {
  let sent = 0;
  const pump = () => {
    while (sent < times && !res.destroyed) {
      sent++;
      if (!res.write(chunk)) return void res.once("drain", pump);
    }
    if (!res.destroyed) res.end();
  };
  res.on("close", () => closed.add(name));
  pump();
}

function route(req: http.IncomingMessage, res: http.ServerResponse): void {
  const name = new URL(req.url ?? "/", "http://x").pathname.slice(1);
  res.on("close", () => closed.add(name));
  switch (name) {
    case "endless":
      res.writeHead(200);
      return stream(res, name, Buffer.alloc(64 * 1024, 97));
    case "declared":
      res.writeHead(200, { "content-length": String(1024 * MiB) });
      return void res.write("a little");
    case "gzip-bomb":
      res.writeHead(200, { "content-encoding": "gzip" });
      return stream(res, name, gzipMember, 64);
    case "br-bomb":
      res.writeHead(200, { "content-encoding": "br" });
      return void res.end(brotliBomb);
    case "slow-headers":
      return; // never answers
    case "slow-body":
      res.writeHead(200);
      return void res.write("first chunk, then nothing");
    case "drip": {
      res.writeHead(200);
      const timer = setInterval(() => res.write("."), 20);
      return void res.on("close", () => clearInterval(timer));
    }
    case "sized": {
      // `kib` KiB of ASCII, with its Content-Length when `declare` is given, else chunked.
      const params = new URL(req.url ?? "/", "http://x").searchParams;
      const bytes = Number(params.get("kib") ?? 0) * 1024;
      res.writeHead(200, params.has("declare") ? { "content-length": String(bytes) } : {});
      return stream(res, name, Buffer.alloc(16 * 1024, 97), bytes / (16 * 1024));
    }
    case "no-body": {
      // A HEAD, 204 or 304 response with the Content-Length of a body larger than any cap.
      const status = Number(new URL(req.url ?? "/", "http://x").searchParams.get("status") ?? 200);
      return void res.writeHead(status, { "content-length": String(1024 * MiB) }).end();
    }
    case "truncated":
      res.writeHead(200, { "content-length": "100" });
      res.write("only ten b");
      return void setImmediate(() => res.socket?.destroy());
    default:
      res.writeHead(200).end("ok");
  }
}

beforeAll(async () => {
  brotliBomb = await makeBrotliBomb();
  server = http.createServer(route);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

function capability(options: FetchHostOptions = {}): FetchCapability {
  return new FetchCapability({ allowInternalHosts: ["127.0.0.1"], lookup: async () => [{ address: "127.0.0.1", family: 4 }], ...options });
}

async function fails(promise: Promise<unknown>, type: string): Promise<ToolHostError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, "expected an error").toBeInstanceOf(ToolHostError);
  expect((error as ToolHostError).type, (error as ToolHostError).message).toBe(type);
  return error as ToolHostError;
}

/** Runs `work` while sampling memory; returns the largest growth seen, in bytes. */
async function peakGrowth(work: () => Promise<unknown>): Promise<number> {
  const start = process.memoryUsage();
  let peak = 0;
  const sample = () => {
    const now = process.memoryUsage();
    peak = Math.max(peak, now.rss - start.rss, now.arrayBuffers - start.arrayBuffers);
  };
  const timer = setInterval(sample, 5);
  try {
    await work();
  } finally {
    clearInterval(timer);
    sample();
  }
  return peak;
}

describe("fetch: response size caps", () => {
  it("stops an endless body at the cap and closes the connection", async () => {
    const error = await fails(capability({ limits: { maxResponseBytes: 256 * 1024 } }).fetch(CTX, `${base}/endless`, {}, PUBLIC), "ExecutionError");
    expect(error.message).toContain("262144-byte limit");
    await waitFor(() => closed.has("endless"));
  });

  it("refuses a declared Content-Length over the cap without reading the body", async () => {
    await fails(capability({ limits: { maxResponseBytes: MiB } }).fetch(CTX, `${base}/declared`, {}, PUBLIC), "ExecutionError");
    await waitFor(() => closed.has("declared"));
  });

  it("stops decompression bombs (gzip 1 GiB, brotli 1 GiB) at the cap, counted after decoding, without inflating them", async () => {
    const fetcher = capability({ limits: { maxResponseBytes: 4 * MiB } });
    for (const bomb of ["gzip-bomb", "br-bomb"]) {
      const growth = await peakGrowth(async () => {
        const error = await fails(fetcher.fetch(CTX, `${base}/${bomb}`, {}, PUBLIC), "ExecutionError");
        expect(error.message).toContain(`${4 * MiB}-byte limit`);
      });
      // Inflating the whole bomb would take 1 GiB; the cap plus stream buffers is a few MiB.
      expect(growth, bomb).toBeLessThan(128 * MiB);
      await waitFor(() => closed.has(bomb));
    }
  });

  it("head_large_resource: a HEAD, 204 or 304 response declaring a body over the cap is answered, since it has none", async () => {
    const fetcher = capability({ limits: { maxResponseBytes: MiB } });
    const head = await fetcher.fetch(CTX, `${base}/no-body`, { method: "HEAD" }, PUBLIC);
    expect(head).toMatchObject({ status: 200, body: "", headers: { "content-length": String(1024 * MiB) } });
    for (const status of [204, 304]) expect(await fetcher.fetch(CTX, `${base}/no-body?status=${status}`, {}, PUBLIC)).toMatchObject({ status, body: "" });
    // A GET whose response declares as much is still refused before its body is read.
    await fails(fetcher.fetch(CTX, `${base}/declared`, {}, PUBLIC), "ExecutionError");
  });

  it("a body cut short is an error, not a silently truncated answer", async () => {
    expect((await fails(capability().fetch(CTX, `${base}/truncated`, {}, PUBLIC), "ExecutionError")).message).toContain(
      "before the response body was complete",
    );
  });
});

/** A stand-in for the call's ledger (`AnswerMeter`) with room for `limitBytes`; records what it was charged. */
function budgetMeter(limitBytes: number, scope: BudgetShortfall["scope"] = "call") {
  const meter = {
    heldBytes: 0,
    mostBytes: 0,
    hold(bytes: number): BudgetShortfall | undefined {
      if (bytes > limitBytes) return { scope, limitBytes };
      meter.heldBytes = bytes;
      meter.mostBytes = Math.max(meter.mostBytes, bytes);
      return undefined;
    },
  };
  return meter;
}

describe("fetch: capability byte budgets", () => {
  it("charges a body before holding it, then what it becomes, which stays charged (the answer's size)", async () => {
    for (const declare of ["&declare", ""]) {
      const meter = budgetMeter(32 * MiB);
      const answer = await capability().fetch(CTX, `${base}/sized?kib=2048${declare}`, { responseType: "bytes" }, PUBLIC, undefined, meter);
      expect(answer.body.length).toBe(4 * Math.ceil((2 * MiB) / 3));
      // The body and its base64 together, at most (the body joined from blocks: the blocks and their copy first).
      expect(meter.mostBytes, declare).toBeGreaterThanOrEqual(2 * MiB + answer.body.length);
      expect(meter.mostBytes, declare).toBeLessThanOrEqual(2 * MiB + answer.body.length + 2 * MiB);
      // Until the answer has left the host: its text and a frame of it.
      expect(meter.heldBytes, declare).toBeGreaterThanOrEqual(answer.body.length);
      expect(meter.heldBytes, declare).toBeLessThan(answer.body.length + MiB);
    }
  });

  it("a body past the budget fails with its error: the tool's fault for its call's or Anima's budget, the host's for the host's", async () => {
    for (const scope of ["call", "anima", "host"] as const) {
      const meter = budgetMeter(MiB, scope);
      const error = await fails(capability().fetch(CTX, `${base}/sized?kib=2048`, {}, PUBLIC, undefined, meter), "ExecutionError");
      expect(error.message).toMatch(new RegExp(`does not fit in (this call's|this Anima's|the host's) ${MiB}-byte budget of capability bytes in flight$`));
      expect(error.fault, scope).toBe(scope === "host" ? "host" : "tool");
      // Nothing stays charged.
      expect(meter.heldBytes).toBe(0);
      expect(meter.mostBytes).toBeLessThanOrEqual(MiB);
    }
  });
});

describe("fetch: timeouts", () => {
  it("gives up waiting for response headers", async () => {
    const fetcher = capability({ limits: { headerTimeoutMs: 150 } });
    expect((await fails(fetcher.fetch(CTX, `${base}/slow-headers`, {}, PUBLIC), "Timeout")).message).toContain("no response headers within 150 ms");
    await waitFor(() => closed.has("slow-headers"));
  });

  it("gives up on a body that stalls", async () => {
    const fetcher = capability({ limits: { bodyIdleTimeoutMs: 150 } });
    expect((await fails(fetcher.fetch(CTX, `${base}/slow-body`, {}, PUBLIC), "Timeout")).message).toContain("stalled for 150 ms");
    await waitFor(() => closed.has("slow-body"));
  });

  it("bounds the whole fetch, even a body that trickles forever, by the tool's timeoutMs", async () => {
    const fetcher = capability({ limits: { bodyIdleTimeoutMs: 5_000 } });
    expect((await fails(fetcher.fetch(CTX, `${base}/drip`, { timeoutMs: 300 }, PUBLIC), "Timeout")).message).toContain("within 300 ms");
    await waitFor(() => closed.has("drip"));
  });

  it("bounds name resolution too", async () => {
    const hanging = capability({ lookup: () => new Promise(() => {}) });
    await fails(hanging.fetch(CTX, "http://hangs.example/", { timeoutMs: 150 }, PUBLIC), "Timeout");
  });

  it("a refused connection is an ExecutionError that does not echo Node's address details", async () => {
    const probe = http.createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve)); // a port this test owned, now closed
    const error = await fails(capability().fetch(CTX, `http://127.0.0.1:${port}/`, {}, PUBLIC), "ExecutionError");
    expect(error.message).toContain("refused");
    expect(error.message).not.toContain("ECONNREFUSED 127.0.0.1");
  });

  it("rejects invalid host limits at construction", () => {
    for (const limits of [{ timeoutMs: 0 }, { maxResponseBytes: -1 }, { maxRedirects: 1.5 }, { headerTimeoutMs: Number.NaN }]) {
      expect(() => capability({ limits })).toThrow(ToolHostError);
    }
  });
});
