import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost, sandboxOf } from "../../src/host.js";
import { DEFAULT_CAPABILITY_LIMITS } from "../../src/isolation/call-ledger.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";
import { expectOk } from "./harness.js";

/*
 * Fetched bodies count against the capability byte budgets as they arrive. They once did not: a fetch
 * reserved 1 MiB whatever its body, and the host held ≈ 20× what the budget counted (one call of 32
 * fetches of 9.9 MiB bodies: host RSS 778 MB, and its sandbox process killed by the watchdog). Here one
 * Anima's call starts many fetches of large bodies at once against a server started here on 127.0.0.1
 * (reached through the operator's allow_internal_hosts); the server holds each body after its first
 * chunk until the test lets it go, so that every fetch has begun its body before any can end. Measured
 * on the host's own counts (`sandboxOf(host).capabilityBytes()`), never on RSS.
 */
const MiB = 1024 * 1024;
const BODY_MIB = 8;
const FLOOD = 12; // 12 × 8 MiB asked for at once: three times the Anima's 32 MiB budget
const ANIMA_BUDGET = DEFAULT_CAPABILITY_LIMITS.maxBytesInFlightPerAnima;
const FIRST_CHUNK_BYTES = 64 * 1024;

let server: http.Server;
let base: string;
/** Requests of /held that got their first chunk, and the release of the rest of their bodies. */
let heldArrivals = 0;
let releaseHeld: () => void = () => {};
const held = new Promise<void>((resolve) => (releaseHeld = resolve));

/** Writes `total` bytes of `a` (after `from`), respecting backpressure, until done or the client leaves. */
function pump(res: http.ServerResponse, from: number, total: number): void {
  const chunk = Buffer.alloc(FIRST_CHUNK_BYTES, 0x61);
  let sent = from;
  const more = () => {
    while (sent < total && !res.destroyed) {
      const part = chunk.subarray(0, Math.min(chunk.length, total - sent));
      sent += part.length;
      if (!res.write(part)) return void res.once("drain", more);
    }
    if (!res.destroyed) res.end();
  };
  more();
}

function route(req: http.IncomingMessage, res: http.ServerResponse): void {
  const url = new URL(req.url ?? "/", "http://x");
  const total = Number(url.searchParams.get("mib") ?? 0) * MiB;
  res.on("error", () => {});
  res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(total) });
  if (url.pathname !== "/held") return pump(res, 0, total);
  res.write(Buffer.alloc(FIRST_CHUNK_BYTES, 0x61), () => heldArrivals++);
  void held.then(() => pump(res, FIRST_CHUNK_BYTES, total));
}

const FLOOD_TOOL = `
import { fetch } from "@animaworks/tool";
export function get_tool_schemas() {
  return [{ name: "flood_run", description: "fetches many URLs at once",
    input_schema: { type: "object", properties: { urls: { type: "array", items: { type: "string" } } }, required: ["urls"] } }];
}
export async function dispatch(_name: string, args: { urls: string[] }) {
  const settled = await Promise.allSettled(args.urls.map((url) => fetch(url, { responseType: "bytes" })));
  return settled.map((s) =>
    s.status === "fulfilled"
      ? { ok: true, bytes: (s.value.body as Uint8Array).length }
      : { ok: false, type: (s.reason as { type?: string }).type, message: String((s.reason as Error).message) },
  );
}
`;

type Outcome = { ok: true; bytes: number } | { ok: false; type: string; message: string };

describe("fetch bodies and the capability byte budgets (process isolation)", () => {
  let data: TempDataDir;
  let host: ToolHost;

  beforeAll(async () => {
    server = http.createServer(route);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    data = makeDataDir({ "animas/mallory/tools/flood.ts": FLOOD_TOOL, "animas/victim/tools/flood.ts": FLOOD_TOOL });
    host = createHost({ dataDir: data.dir, isolation: "process", allowInternalHosts: ["127.0.0.1"], timeoutMs: 60_000, onLog: () => {} });
  });
  afterAll(async () => {
    releaseHeld();
    await host?.close();
    data?.cleanup();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("fetch_bodies_past_budget: one Anima's fetches hold at most its budget, the rest fail with the budget error; another Anima's fetch succeeds meanwhile, and the host keeps serving", async () => {
    const bytes = () => sandboxOf(host)!.capabilityBytes()!;
    const call = (anima: string, urls: string[]) => host.call(anima, "flood_run", { urls });
    // The victim's tool is loaded first: its call below must not wait for a build.
    expect(JSON.parse(expectOk(await call("victim", [`${base}/plain?mib=0`])))).toEqual([{ ok: true, bytes: 0 }]);

    const flood = call(
      "mallory",
      Array.from({ length: FLOOD }, (_, i) => `${base}/held?mib=${BODY_MIB}&n=${i}`),
    );
    // Every body has begun; the fetches that fit hold room for theirs (the declared 8 MiB each), the others failed.
    await waitFor(() => heldArrivals === FLOOD, 30_000);
    await waitFor(() => bytes().answerBytes >= 3 * BODY_MIB * MiB, 10_000).catch(() => {});
    expect(bytes().answerBytes, "the bodies begun are charged to the budgets").toBeGreaterThanOrEqual(3 * BODY_MIB * MiB);
    expect(bytes().peakAnimaBytes).toBeLessThanOrEqual(ANIMA_BUDGET);

    // Another Anima, its own budget: a large body while mallory's are held.
    expect(JSON.parse(expectOk(await call("victim", [`${base}/plain?mib=4`])))).toEqual([{ ok: true, bytes: 4 * MiB }]);

    releaseHeld();
    const outcomes = JSON.parse(expectOk(await flood)) as Outcome[];
    expect(outcomes).toHaveLength(FLOOD);
    const failures = outcomes.filter((o) => !o.ok);
    // At most three 8 MiB bodies fit in 32 MiB at once; every other fetch failed, with the budget's error.
    expect(failures.length).toBeGreaterThanOrEqual(FLOOD - 3);
    for (const failure of failures)
      expect(failure).toEqual({
        ok: false,
        type: "ExecutionError",
        message: expect.stringMatching(new RegExp(`does not fit in this call's ${ANIMA_BUDGET}-byte budget of capability bytes in flight$`)),
      });
    for (const success of outcomes.filter((o) => o.ok)) expect(success).toEqual({ ok: true, bytes: BODY_MIB * MiB });
    // Never more in flight for the Anima (requests and bodies) than its budget, and all of it given back.
    expect(bytes().peakAnimaBytes).toBeLessThanOrEqual(ANIMA_BUDGET);
    await waitFor(() => bytes().inFlightBytes === 0 && bytes().answerBytes === 0, 10_000);

    // The host keeps serving: the same Anima's one large fetch, alone, fits.
    expect(JSON.parse(expectOk(await call("mallory", [`${base}/plain?mib=${BODY_MIB}`])))).toEqual([{ ok: true, bytes: BODY_MIB * MiB }]);
  }, 90_000);
});
