import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FetchCapability } from "../../src/capabilities/fetch.js";
import { ToolHostError } from "../../src/errors.js";
import type { SandboxPolicy } from "../../src/policy/permissions.js";
import { type DnsStandIn, startDnsStandIn } from "../helpers/dns-stand-in.js";

/*
 * One Anima's name lookups must not hold up another's (red team finding: getaddrinfo on libuv's
 * threadpool, uncancellable, let a tool's abandoned lookups stall every Anima's fetch for ~10–60 s).
 * The fetch capability resolves with its own resolver, pointed here at a stand-in DNS server on
 * 127.0.0.1 that answers the victim's name and never answers the attacker's (an unresponsive
 * authoritative server), and at a hosts file of the test's own. The only HTTP server is on 127.0.0.1.
 */
const PUBLIC: SandboxPolicy = { network: { mode: "public" } };
const MALLORY = { anima: "mallory", tool: "probe" };
const VICTIM = { anima: "victim", tool: "probe" };
/** A stall would take the resolver's full timeout (≥ 10 s) or more; a prompt answer takes milliseconds. */
const PROMPT_MS = 5_000;

let dns: DnsStandIn;
let server: http.Server;
let port: number;
let dir: string;

beforeAll(async () => {
  dns = await startDnsStandIn((name) => (name === "victim.test" ? ["127.0.0.1"] : "silent"));
  server = http.createServer((_req, res) => res.end("victim-ok"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
  dir = mkdtempSync(join(tmpdir(), "awt-dns-"));
  writeFileSync(join(dir, "hosts"), "127.0.0.1 intranet\n");
  writeFileSync(join(dir, "resolv.conf"), "");
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await dns.close();
  rmSync(dir, { recursive: true, force: true });
});

function capability(): FetchCapability {
  return new FetchCapability({
    allowInternalHosts: ["127.0.0.1", "intranet"],
    dns: { servers: [dns.address], hostsFile: join(dir, "hosts"), resolvConf: join(dir, "resolv.conf") },
  });
}

async function outcome(promise: Promise<unknown>): Promise<ToolHostError | "ok"> {
  return promise.then(
    () => "ok" as const,
    (error: unknown) => {
      expect(error).toBeInstanceOf(ToolHostError);
      return error as ToolHostError;
    },
  );
}

/** The victim fetches a name DNS answers and a name of the hosts file; both must answer promptly. */
async function victimFetches(fetcher: FetchCapability): Promise<void> {
  const started = performance.now();
  const results = await Promise.all(
    [`http://victim.test:${port}/`, `http://intranet:${port}/`].map((url) => fetcher.fetch(VICTIM, url, { timeoutMs: 60_000 }, PUBLIC)),
  );
  expect(results.map((r) => [r.status, r.body])).toEqual([
    [200, "victim-ok"],
    [200, "victim-ok"],
  ]);
  expect(performance.now() - started).toBeLessThan(PROMPT_MS);
}

describe("fetch: name lookups of one Anima do not hold up another's", () => {
  it("an attacker's unanswered lookups, abandoned or outstanding, leave the victim's fetches prompt (dns_threadpool_starvation)", async () => {
    const fetcher = capability();
    await victimFetches(fetcher);

    // A dozen names whose server never answers, each fetch given up after 50 ms (red team 07) …
    const dozen = await Promise.all(
      Array.from({ length: 12 }, (_, i) => outcome(fetcher.fetch(MALLORY, `http://r${i}.attacker.test/`, { timeoutMs: 50 }, PUBLIC))),
    );
    expect(dozen.map((o) => (o === "ok" ? o : o.type))).toEqual(Array(12).fill("Timeout"));
    // … and a hundred, one after another, each given up after 1 ms (07b).
    for (let i = 0; i < 100; i++) {
      expect(await outcome(fetcher.fetch(MALLORY, `http://l${i}.attacker.test/`, { timeoutMs: 1 }, PUBLIC))).not.toBe("ok");
    }
    await victimFetches(fetcher);

    // Forty at once, each waiting 2 s: 16 (its share) are looked up, the rest refused at once as the tool's doing.
    const flood = Array.from({ length: 40 }, (_, i) => outcome(fetcher.fetch(MALLORY, `http://f${i}.attacker.test/`, { timeoutMs: 2_000 }, PUBLIC)));
    await victimFetches(fetcher); // while the attacker's lookups are outstanding
    const flooded = await Promise.all(flood);
    const refusals = flooded.filter((o): o is ToolHostError => o !== "ok" && o.type === "SandboxViolation");
    expect(refusals).toHaveLength(40 - 16);
    expect(refusals.every((e) => e.fault === "tool" && /16 name lookups outstanding/.test(e.message))).toBe(true);
    expect(flooded.filter((o) => o !== "ok" && o.type === "Timeout")).toHaveLength(16);

    // Lookups stop with their fetches (the resolver reports a cancel on the next turn of the event loop):
    // the attacker has its whole share again, and the victim is still served.
    expect(dns.queries.filter((q) => q.name.endsWith(".attacker.test")).length).toBeGreaterThan(0);
    await new Promise((resolve) => setImmediate(resolve));
    const again = await outcome(fetcher.fetch(MALLORY, "http://again.attacker.test/", { timeoutMs: 50 }, PUBLIC));
    expect(again !== "ok" && again.type).toBe("Timeout");
    await victimFetches(fetcher);
  }, 30_000);

  it("a lookup that outlives its fetch holds its place until it settles, per Anima and on the host (lookup_share_held)", async () => {
    const pending: Array<() => void> = [];
    const fetcher = new FetchCapability({
      lookup: () => new Promise((resolve) => pending.push(() => resolve([{ address: "93.184.215.14", family: 4 }]))),
      limits: { maxLookupsPerAnima: 2, maxLookupsPerHost: 3 },
    });
    const fetchAs = (context: typeof MALLORY) => outcome(fetcher.fetch(context, "http://slow.example/", { timeoutMs: 20 }, PUBLIC));
    expect([await fetchAs(MALLORY), await fetchAs(MALLORY)].map((o) => o !== "ok" && o.type)).toEqual(["Timeout", "Timeout"]);
    const overShare = await fetchAs(MALLORY);
    expect(overShare !== "ok" && [overShare.type, overShare.fault]).toEqual(["SandboxViolation", "tool"]);
    expect(overShare !== "ok" && overShare.message).toMatch(/already has 2 name lookups outstanding/);
    expect((await fetchAs(VICTIM)) !== "ok").toBe(true); // the host's third place
    const hostFull = await fetchAs(VICTIM);
    expect(hostFull !== "ok" && [hostFull.type, hostFull.fault]).toEqual(["Busy", "host"]);
    expect(pending).toHaveLength(3); // refused fetches started no lookup

    for (const settle of pending.splice(0)) settle();
    await new Promise((resolve) => setImmediate(resolve));
    const afterwards = await fetchAs(MALLORY);
    expect(afterwards !== "ok" && afterwards.type).toBe("Timeout"); // looked up again, not refused
    expect(pending).toHaveLength(1);
  });

  it("rejects limits on lookups that are not whole positive numbers", () => {
    for (const limits of [{ maxLookupsPerAnima: 0 }, { maxLookupsPerHost: 1.5 }, { dnsTries: 0 }, { dnsQueryTimeoutMs: -1 }]) {
      expect(() => new FetchCapability({ limits })).toThrow(ToolHostError);
    }
    expect(() => new FetchCapability({ dns: { servers: ["not an address"] } })).toThrow(ToolHostError);
  });
});
