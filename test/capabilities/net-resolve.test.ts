import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FetchCapability } from "../../src/capabilities/fetch.js";
import { type ResolverSettings, SystemResolver } from "../../src/capabilities/net-resolve.js";
import { parseHostsFile, parseResolvConf } from "../../src/capabilities/net-system-files.js";
import { ToolHostError } from "../../src/errors.js";
import type { SandboxPolicy } from "../../src/policy/permissions.js";
import { type DnsStandIn, type ZoneEntry, startDnsStandIn } from "../helpers/dns-stand-in.js";

/*
 * The fetch capability's resolver (net-resolve.ts): what getaddrinfo did for it before, kept without
 * glibc — the hosts file for names looked up as written, resolv.conf's search domains, A and AAAA
 * answers — and what it did not: queries that stop when their fetch does. DNS is a stand-in server on
 * 127.0.0.1 (test/helpers/dns-stand-in.ts); the hosts file and resolv.conf are the test's own.
 */
const PUBLIC: SandboxPolicy = { network: { mode: "public" } };
const CTX = { anima: "alice", tool: "probe" };

const ZONE: Record<string, ZoneEntry> = {
  "dual.test": ["127.0.0.1", "::1"],
  "v6only.test": ["::1"],
  "shadowed.test": ["127.0.0.1"],
  "gone.test": "nxdomain",
  "gone.test.corp.test": "nxdomain",
  "api.corp.test": ["127.0.0.1"],
  api: "nxdomain",
  "mixed.test": ["93.184.215.14", "10.0.0.1"],
};

let dns: DnsStandIn;
let dir: string;
let server: http.Server;
let port: number;

beforeAll(async () => {
  dns = await startDnsStandIn((name) => ZONE[name]);
  dir = mkdtempSync(join(tmpdir(), "awt-resolve-"));
  writeFileSync(join(dir, "hosts"), "# comment\n127.0.0.1 intranet Intranet-Alias # trailing comment\n::1\tintranet\n10.9.9.9 shadowed.test\n");
  writeFileSync(join(dir, "resolv.conf"), "nameserver 192.0.2.1\nsearch corp.test\noptions ndots:1 timeout:1\n");
  server = http.createServer((_req, res) => res.end("ok"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await dns.close();
  rmSync(dir, { recursive: true, force: true });
});

function resolver(settings: Partial<ResolverSettings> = {}): SystemResolver {
  return new SystemResolver({
    servers: [dns.address],
    hostsFile: join(dir, "hosts"),
    resolvConf: join(dir, "resolv.conf"),
    queryTimeoutMs: 5_000,
    tries: 2,
    ...settings,
  });
}

const lookup = (name: string, settings: Partial<ResolverSettings> = {}, signal?: AbortSignal) => resolver(settings).lookup(name, signal);
const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error as NodeJS.ErrnoException,
  );

function capability(allowInternalHosts: string[]): FetchCapability {
  return new FetchCapability({ allowInternalHosts, dns: { servers: [dns.address], hostsFile: join(dir, "hosts"), resolvConf: join(dir, "resolv.conf") } });
}

describe("fetch's resolver: DNS through c-ares", () => {
  it("answers A and AAAA, IPv4 first; a name without addresses is not found", async () => {
    expect(await lookup("dual.test.")).toEqual([
      { address: "127.0.0.1", family: 4 },
      { address: "::1", family: 6 },
    ]);
    expect(await lookup("v6only.test.")).toEqual([{ address: "::1", family: 6 }]);
    expect((await failure(lookup("gone.test.")))?.code).toBe("ENOTFOUND");
  });

  it("every answer is checked, of both families, and the connection is pinned to them", async () => {
    const v4Only = await failure(capability(["127.0.0.1"]).fetch(CTX, `http://dual.test:${port}/`, {}, PUBLIC));
    expect(v4Only).toBeInstanceOf(ToolHostError);
    expect((v4Only as unknown as ToolHostError).message).toContain("resolves to a loopback address");
    expect((await capability(["127.0.0.1", "::1"]).fetch(CTX, `http://dual.test:${port}/`, {}, PUBLIC)).body).toBe("ok");
    expect((await failure(capability([]).fetch(CTX, "http://mixed.test/", {}, PUBLIC)))?.message).toContain("resolves to a private address");
    expect((await failure(capability([]).fetch(CTX, "http://gone.test/", {}, PUBLIC)))?.message).toContain('"gone.test" was not found');
  });

  it("stops at once when its signal aborts; a query nobody answers fails after its timeout", async () => {
    const controller = new AbortController();
    const started = performance.now();
    const pending = failure(lookup("silent.test.", {}, controller.signal));
    setTimeout(() => controller.abort(new Error("the fetch ended")), 20);
    expect(await pending).toBeDefined();
    expect(performance.now() - started).toBeLessThan(2_000); // the query's own timeout is 2 × 5 s
    expect((await failure(lookup("silent.test.", { queryTimeoutMs: 100, tries: 1 })))?.code).toBe("ETIMEOUT");
  });
});

describe("fetch's resolver: what getaddrinfo did, without it", () => {
  it("finds names looked up as written in the hosts file, any case, with every address; absolute names skip it", async () => {
    const intranet = [
      { address: "127.0.0.1", family: 4 },
      { address: "::1", family: 6 },
    ];
    expect(await lookup("intranet")).toEqual(intranet);
    expect(await lookup("INTRANET-alias")).toEqual([intranet[0]]);
    expect(await lookup("shadowed.test")).toEqual([{ address: "10.9.9.9", family: 4 }]);
    expect(await lookup("shadowed.test.")).toEqual([{ address: "127.0.0.1", family: 4 }]);
    // Through fetch: an operator name from the hosts file; a public name is absolute, so DNS answers it.
    expect((await capability(["intranet", "127.0.0.1"]).fetch(CTX, `http://intranet:${port}/`, {}, PUBLIC)).body).toBe("ok");
    expect((await capability(["127.0.0.1"]).fetch(CTX, `http://shadowed.test:${port}/`, {}, PUBLIC)).body).toBe("ok");
  });

  it("searches resolv.conf's domains for names looked up as written, as glibc does with ndots", async () => {
    dns.queries.length = 0;
    expect(await lookup("api")).toEqual([{ address: "127.0.0.1", family: 4 }]);
    expect(dns.queries.map((q) => q.name)).toEqual(["api.corp.test", "api.corp.test"]); // A and AAAA
    dns.queries.length = 0;
    expect((await failure(lookup("gone.test")))?.code).toBe("ENOTFOUND");
    expect([...new Set(dns.queries.map((q) => q.name))]).toEqual(["gone.test", "gone.test.corp.test"]); // 1 dot ≥ ndots: as written first
    expect((await failure(lookup("api.")))?.code).toBe("ENOTFOUND"); // absolute: never searched
    expect((await capability(["api", "127.0.0.1"]).fetch(CTX, `http://api:${port}/`, {}, PUBLIC)).body).toBe("ok");
  });

  it("a hosts file that is a FIFO, missing or too odd to parse neither blocks nor fails a lookup", async () => {
    const fifo = join(dir, "hosts.fifo");
    execFileSync("mkfifo", [fifo]);
    expect(await lookup("dual.test", { hostsFile: fifo })).toHaveLength(2);
    expect(await lookup("dual.test", { hostsFile: join(dir, "missing") })).toHaveLength(2);
    expect(parseHostsFile("not-an-ip name\n300.1.1.1 x\n\n  \n127.0.0.1\n", () => true).size).toBe(0);
    expect(parseResolvConf("domain Example.COM.\nsearch a b c d e f g\noptions rotate ndots:99\n")).toEqual({
      search: ["a", "b", "c", "d", "e", "f"],
      ndots: 15,
    });
  });
});
