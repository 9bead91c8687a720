import dns from "node:dns";
import http from "node:http";
import net from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { FetchCapability, type FetchAuditEvent, type FetchHostOptions, nonPublicReason } from "../../src/capabilities/fetch.js";
import { ToolHostError } from "../../src/errors.js";
import type { SandboxPolicy } from "../../src/policy/permissions.js";

/*
 * Address policy of the fetch capability. The only server is the one below, on 127.0.0.1, reached only
 * through `allowInternalHosts: ["127.0.0.1"]` (or a stubbed name resolving there). For every refusal
 * the socket layer is rigged to throw, so a refusal that came too late could not send a byte anywhere;
 * and the real resolver is rigged too: no test ever queries real DNS.
 */
const PUBLIC: SandboxPolicy = { network: { mode: "public" } };
const CTX = { anima: "alice", tool: "probe" };

let server: http.Server;
let port: number;
const seen: Array<{ url: string; host: string | undefined; remote: string | undefined }> = [];
let connectSpy: ReturnType<typeof vi.spyOn>;
const realConnect = net.Socket.prototype.connect;
let audit: FetchAuditEvent[];
let lookups: string[];
/** Stubbed DNS: name (with or without the trailing dot) → answers; a function answers per call. */
let dnsTable: Record<string, string[] | ((call: number) => string[])>;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    seen.push({ url: req.url ?? "", host: req.headers.host, remote: req.socket.remoteAddress });
    const to = new URL(req.url ?? "/", "http://x").searchParams.get("to");
    if (to) res.writeHead(302, { location: to }).end();
    else res.writeHead(200, { "content-type": "text/plain" }).end("hello from 127.0.0.1");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as net.AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  seen.length = 0;
  audit = [];
  lookups = [];
  dnsTable = {};
  connectSpy = vi.spyOn(net.Socket.prototype, "connect");
  vi.spyOn(dns, "lookup").mockImplementation(() => {
    throw new Error("the real resolver must never be used");
  });
});
afterEach(() => vi.restoreAllMocks());

function stubLookup(name: string): Promise<Array<{ address: string; family: number }>> {
  lookups.push(name);
  const entry = dnsTable[name.replace(/\.$/, "")];
  const calls = lookups.filter((n) => n === name).length;
  const answers = typeof entry === "function" ? entry(calls) : entry;
  if (!answers) return Promise.reject(Object.assign(new Error("not found"), { code: "ENOTFOUND" }));
  return Promise.resolve(answers.map((address) => ({ address, family: net.isIP(address) })));
}

function capability(options: FetchHostOptions = {}): FetchCapability {
  return new FetchCapability({ lookup: stubLookup, onAudit: (event) => audit.push(event), ...options });
}

/** Makes any connection attempt fail loudly: a refusal must come before the socket layer. */
function forbidConnections(): void {
  connectSpy.mockImplementation(() => {
    throw new Error("a connection was attempted");
  });
}

/** Lets the first `count` connections through (to the test server), then fails any further attempt. */
function allowConnections(count: number): void {
  let made = 0;
  connectSpy.mockImplementation(function (this: net.Socket, ...args: unknown[]) {
    if (++made > count) throw new Error("a connection was attempted");
    return Reflect.apply(realConnect, this, args) as net.Socket;
  });
}

async function refused(promise: Promise<unknown>, type = "SandboxViolation"): Promise<ToolHostError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, "expected a refusal").toBeInstanceOf(ToolHostError);
  expect((error as ToolHostError).type, (error as ToolHostError).message).toBe(type);
  return error as ToolHostError;
}

describe("fetch: addresses in every spelling are refused by default, before any connection", () => {
  const literals = [
    "http://127.0.0.1/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://0x7f.1/",
    "http://0x7f000001/",
    "http://127.1/",
    "http://127.0.0.1./",
    "http://evil@127.0.0.1/",
    "http://①②⑦.0.0.1/",
    "http://127。0。0。1/",
    "http://%31%32%37.0.0.1/",
    "https://127.0.0.1/",
    "http://0/",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[0:0:0:0:0:ffff:7f00:1]/",
    "http://[::127.0.0.1]/",
    "http://[64:ff9b::10.0.0.1]/",
    "http://[64:ff9b::127.0.0.1]/",
    "http://[2002:a00:1::1]/",
    "http://[2002:7f00:1::1]/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.0.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/",
    "http://100.64.0.1/",
    "http://100.100.100.200/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "http://240.0.0.1/",
    "http://192.0.2.1/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://[ff02::1]/",
    "http://[2001::1]/",
    "http://[::ffff:169.254.169.254]/",
  ];
  it.each(literals)("%s", async (url) => {
    forbidConnections();
    await refused(capability().fetch(CTX, url, {}, PUBLIC));
    expect(connectSpy).not.toHaveBeenCalled();
    expect(lookups).toEqual([]);
  });

  it("refuses local and metadata names without asking DNS", async () => {
    forbidConnections();
    for (const url of [
      "http://localhost/",
      "http://LOCALHOST./",
      "http://api.localhost/",
      "http://metadata.google.internal/computeMetadata/v1/",
      "http://metadata.google.internal./",
      "http://metadata/",
      "http://printer.local/",
      "http://router.home.arpa/",
      "http://metadata.goog/",
    ]) {
      await refused(capability().fetch(CTX, url, {}, PUBLIC));
    }
    expect(lookups).toEqual([]);
    expect(connectSpy).not.toHaveBeenCalled();
  });

  it("refuses names whose answers include any non-public address, without naming the address", async () => {
    forbidConnections();
    dnsTable = {
      "internal.example": ["10.0.0.5"],
      "mixed.example": ["93.184.215.14", "127.0.0.1"],
      "mapped.example": ["::ffff:127.0.0.1"],
      "meta.example": ["169.254.169.254"],
      "ula.example": ["fd12:3456::1"],
    };
    for (const name of Object.keys(dnsTable)) {
      const error = await refused(capability().fetch(CTX, `http://${name}/`, {}, PUBLIC));
      expect(error.message).toContain(name);
      expect(error.message).not.toMatch(/10\.0\.0\.5|127\.0\.0\.1|169\.254|fd12|93\.184/);
    }
    // Looked up once each, as absolute names (no search-domain expansion).
    expect(lookups).toEqual(Object.keys(dnsTable).map((n) => `${n}.`));
    expect(connectSpy).not.toHaveBeenCalled();
  });

  it("refuses other schemes and non-HTTP ports", async () => {
    forbidConnections();
    for (const url of [
      "file:///etc/passwd",
      "ftp://example.com/",
      "gopher://127.0.0.1:70/",
      "data:text/plain,hi",
      "ws://example.com/",
      "http://example.com:25/",
    ]) {
      await refused(capability().fetch(CTX, url, {}, PUBLIC));
    }
    expect(lookups).toEqual([]);
  });

  it("classifies public addresses as public (pure check, no traffic)", () => {
    for (const address of ["8.8.8.8", "93.184.215.14", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1"]) {
      expect(nonPublicReason(address), address).toBeUndefined();
    }
    expect(nonPublicReason("0x7f.1")).toBe("not a valid IP address"); // never re-interpreted
  });
});

describe("fetch: operator and Anima policy", () => {
  it("reaches 127.0.0.1 only when the operator allows it, and audits both outcomes", async () => {
    await refused(capability().fetch(CTX, `http://127.0.0.1:${port}/`, {}, PUBLIC));
    expect(seen).toEqual([]);
    const result = await capability({ allowInternalHosts: ["127.0.0.1"] }).fetch(CTX, `http://127.0.0.1:${port}/a?token=secret`, {}, PUBLIC);
    expect(result.body).toBe("hello from 127.0.0.1");
    expect(seen).toHaveLength(1);
    expect(audit.map((e) => [e.operation, e.outcome, e.status])).toEqual([
      ["fetch", "denied", undefined],
      ["fetch", "ok", 200],
    ]);
    expect(audit[1]?.target).toBe(`http://127.0.0.1:${port}/a?…`); // the query (a secret) is never audited
  });

  it('"none" refuses everything, even operator-allowed hosts', async () => {
    forbidConnections();
    const error = await refused(capability({ allowInternalHosts: ["127.0.0.1"] }).fetch(CTX, `http://127.0.0.1:${port}/`, {}, { network: { mode: "none" } }));
    expect(error.message).toContain("none");
  });

  it("an allowlist narrows: exact names and *.wildcards (subdomains, not the apex)", async () => {
    dnsTable = { "pinned.test": ["127.0.0.1"], "a.b.allowed.test": ["127.0.0.1"], "allowed.test": ["127.0.0.1"], "other.test": ["127.0.0.1"] };
    const fetcher = capability({ allowInternalHosts: ["127.0.0.1"] });
    const policy: SandboxPolicy = { network: { mode: "allowlist", hosts: ["pinned.test", "*.allowed.test"] } };
    expect((await fetcher.fetch(CTX, `http://pinned.test:${port}/`, {}, policy)).status).toBe(200);
    expect((await fetcher.fetch(CTX, `http://a.b.allowed.test:${port}/`, {}, policy)).status).toBe(200);
    for (const url of [`http://allowed.test:${port}/`, `http://other.test:${port}/`, `http://127.0.0.1:${port}/`]) {
      expect((await refused(fetcher.fetch(CTX, url, {}, policy))).message).toContain("allowlist");
    }
    expect(seen.map((s) => s.host)).toEqual([`pinned.test:${port}`, `a.b.allowed.test:${port}`]);
  });

  it("an allowlist entry with a port allows only that port; a bare name any port but the refused ones", async () => {
    dnsTable = { "pinned.test": ["127.0.0.1"] };
    const fetcher = capability({ allowInternalHosts: ["127.0.0.1"] });
    const pinned: SandboxPolicy = { network: { mode: "allowlist", hosts: [`pinned.test:${port}`] } };
    expect((await fetcher.fetch(CTX, `http://pinned.test:${port}/`, {}, pinned)).status).toBe(200);
    const otherPort: SandboxPolicy = { network: { mode: "allowlist", hosts: [`pinned.test:${port === 65_535 ? 1 : port + 1}`] } };
    expect((await refused(fetcher.fetch(CTX, `http://pinned.test:${port}/`, {}, otherPort))).message).toMatch(/allowlist/);
    const bare: SandboxPolicy = { network: { mode: "allowlist", hosts: ["pinned.test"] } };
    expect((await fetcher.fetch(CTX, `http://pinned.test:${port}/`, {}, bare)).status).toBe(200);
    expect((await refused(fetcher.fetch(CTX, "http://pinned.test:25/", {}, bare))).message).toMatch(/port 25 is refused/);
  });

  it("an allowlisted name is still held to the public-address rule", async () => {
    forbidConnections();
    dnsTable = { "intranet.example": ["10.1.2.3"] };
    await refused(capability().fetch(CTX, "http://intranet.example/", {}, { network: { mode: "allowlist", hosts: ["intranet.example"] } }));
  });

  it("operator-allowed names, and metadata addresses that need their exact entry", async () => {
    dnsTable = { localhost: ["127.0.0.1"] };
    const byName = capability({ allowInternalHosts: ["localhost"] });
    expect((await byName.fetch(CTX, `http://localhost:${port}/`, {}, PUBLIC)).status).toBe(200);
    expect(lookups).toEqual(["localhost"]); // operator names are looked up as written
    forbidConnections();
    await refused(capability({ allowInternalHosts: ["169.254.0.0/16"] }).fetch(CTX, "http://169.254.169.254/", {}, PUBLIC));
    dnsTable = { "meta.corp.example": ["169.254.169.254"] };
    await refused(capability({ allowInternalHosts: ["*.corp.example"] }).fetch(CTX, "http://meta.corp.example/", {}, PUBLIC));
  });

  it("a metadata address in an IPv6 form is a metadata address: no operator name or range opens it (mapped_metadata_address)", async () => {
    forbidConnections();
    // 169.254.169.254 IPv4-mapped (both spellings), compatible, translated, NAT64 (well-known and local-use), 6to4, Teredo (client).
    const forms = ["::ffff:169.254.169.254", "::ffff:a9fe:a9fe", "::169.254.169.254", "::a9fe:a9fe", "::ffff:0:a9fe:a9fe", "64:ff9b::a9fe:a9fe"];
    forms.push("64:ff9b:1::a9fe:a9fe", "64:ff9b:1:a9fe:a9:fe00::", "2002:a9fe:a9fe::1", "2001:0:4136:e378:8000:63bf:5601:5601");
    const byName = capability({ allowInternalHosts: ["*.corp.example"] });
    for (const form of forms) {
      expect(nonPublicReason(form), form).toBe("cloud metadata");
      dnsTable = { "meta.corp.example": [form] };
      expect((await refused(byName.fetch(CTX, "http://meta.corp.example/", {}, PUBLIC))).message, form).toContain("cloud metadata");
    }
    for (const [range, literal] of [
      ["::ffff:0:0/96", "[::ffff:169.254.169.254]"],
      ["::/96", "[::a9fe:a9fe]"],
      ["64:ff9b::/96", "[64:ff9b::169.254.169.254]"],
      ["2002::/16", "[2002:a9fe:a9fe::1]"],
    ]) {
      await refused(capability({ allowInternalHosts: [range as string] }).fetch(CTX, `http://${literal}/`, {}, PUBLIC));
    }
    expect(connectSpy).not.toHaveBeenCalled();
    // What such a range, or an operator name, still opens: addresses that embed no metadata address.
    dnsTable = { "nat64.corp.example": ["64:ff9b::a00:1"] };
    const internal = capability({ allowInternalHosts: ["64:ff9b::/96", "*.corp.example"] });
    const reached: string[] = [];
    connectSpy.mockImplementation(function (this: net.Socket) {
      reached.push("connect");
      throw new Error("stopped before any packet");
    });
    await refused(internal.fetch(CTX, "http://[64:ff9b::10.0.0.1]/", {}, PUBLIC), "ExecutionError");
    await refused(internal.fetch(CTX, "http://nat64.corp.example/", {}, PUBLIC), "ExecutionError");
    expect(reached).toHaveLength(2);
  });

  it("rejects a malformed operator list at construction", () => {
    for (const entry of ["10.0.0.0/33", "not a host", ""]) {
      expect(() => new FetchCapability({ allowInternalHosts: [entry] })).toThrow(ToolHostError);
    }
  });
});

describe("fetch: DNS is asked once and the connection is pinned to the checked answer", () => {
  it("a resolver that turns private after the check cannot redirect the connection", async () => {
    dnsTable = { "rebind.test": (call) => (call === 1 ? ["127.0.0.1"] : ["10.0.0.9"]) };
    const fetcher = capability({ allowInternalHosts: ["127.0.0.1"] });
    const result = await fetcher.fetch(CTX, `http://rebind.test:${port}/first`, {}, PUBLIC);
    expect(result.body).toBe("hello from 127.0.0.1");
    // One lookup, by us; Node's own resolver (rigged to throw) was never consulted.
    expect(lookups).toEqual(["rebind.test."]);
    expect(dns.lookup).not.toHaveBeenCalled();
    expect(seen).toEqual([{ url: "/first", host: `rebind.test:${port}`, remote: "127.0.0.1" }]);
    // The next fetch resolves afresh, sees the private answer, and is refused before connecting.
    forbidConnections();
    await refused(fetcher.fetch(CTX, `http://rebind.test:${port}/second`, {}, PUBLIC));
    expect(seen).toHaveLength(1);
  });

  it("an unknown name is an ExecutionError", async () => {
    forbidConnections();
    const error = await refused(capability().fetch(CTX, "http://nowhere.example/", {}, PUBLIC), "ExecutionError");
    expect(error.message).toContain("not found");
  });
});

describe("fetch: every redirect hop is checked like the first request", () => {
  it("a redirect from an allowed server to an internal address is refused at the hop", async () => {
    const fetcher = capability({ allowInternalHosts: ["127.0.0.1"] });
    // 2130706434 is 127.0.0.2: the operator allowed 127.0.0.1 exactly, not the loopback range.
    for (const to of ["http://169.254.169.254/latest/meta-data/", "http://[::1]/", "http://2130706434/", "http://localhost/", "file:///etc/passwd"]) {
      seen.length = 0;
      audit = [];
      connectSpy.mockClear();
      allowConnections(1); // the first hop, to the test server; the refused hop must not get one
      const error = await refused(fetcher.fetch(CTX, `http://127.0.0.1:${port}/r?to=${encodeURIComponent(to)}`, {}, PUBLIC));
      expect(error.message).toContain("redirect 1");
      expect(connectSpy).toHaveBeenCalledTimes(1);
      expect(seen).toHaveLength(1);
      expect(audit.map((e) => [e.operation, e.outcome])).toEqual([
        ["fetch", "ok"],
        ["fetch.redirect", "denied"],
      ]);
    }
  });

  it("a redirect to a name resolving privately is refused; to an allowed one it is followed", async () => {
    dnsTable = { "evil.example": ["192.168.1.1"], "pinned.test": ["127.0.0.1"] };
    const fetcher = capability({ allowInternalHosts: ["127.0.0.1"] });
    allowConnections(1);
    await refused(fetcher.fetch(CTX, `http://127.0.0.1:${port}/r?to=${encodeURIComponent("http://evil.example/")}`, {}, PUBLIC));
    connectSpy.mockRestore();
    const result = await fetcher.fetch(CTX, `http://127.0.0.1:${port}/r?to=${encodeURIComponent(`http://pinned.test:${port}/end`)}`, {}, PUBLIC);
    expect(result.url).toBe(`http://pinned.test:${port}/end`);
    expect(result.redirected).toBe(true);
  });

  it("a redirect leaving the Anima's allowlist is refused", async () => {
    dnsTable = { "pinned.test": ["127.0.0.1"], "elsewhere.test": ["127.0.0.1"] };
    const policy: SandboxPolicy = { network: { mode: "allowlist", hosts: ["pinned.test"] } };
    const url = `http://pinned.test:${port}/r?to=${encodeURIComponent(`http://elsewhere.test:${port}/`)}`;
    expect((await refused(capability({ allowInternalHosts: ["127.0.0.1"] }).fetch(CTX, url, {}, policy))).message).toContain("allowlist");
    expect(seen).toHaveLength(1);
  });
});

describe("fetch: who must act on a refusal (#35 item 4)", () => {
  it("a refusal only the operator's policy lifts is the host's, with the setting that lifts it; one no setting lifts is the tool's", async () => {
    forbidConnections();
    const loopback = await refused(capability().fetch(CTX, "http://127.0.0.1/", {}, PUBLIC));
    expect([loopback.fault, loopback.hint]).toEqual(["host", expect.stringContaining('"allow_internal_hosts"')]);
    const off = await refused(capability().fetch(CTX, "http://example.com/", {}, { network: { mode: "none" } }));
    expect([off.fault, off.hint]).toEqual(["host", expect.stringContaining('"sandbox.network" to "public"')]);
    const unlisted = await refused(capability().fetch(CTX, "http://example.com/", {}, { network: { mode: "allowlist", hosts: ["api.test"] } }));
    expect([unlisted.fault, unlisted.hint]).toEqual(["host", expect.stringMatching(/add "example\.com" to "sandbox\.network".*permissions\.json/)]);
    for (const url of ["http://example.com:25/", "file:///etc/passwd"]) {
      const error = await refused(capability().fetch(CTX, url, {}, PUBLIC));
      expect([error.fault, error.hint], url).toEqual(["tool", undefined]);
    }
    expect(lookups).toEqual([]);
  });
});
