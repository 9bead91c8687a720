import { afterEach, describe, expect, it } from "vitest";
import type { AuditEvent, AuditRecord } from "../../src/audit/audit-log.js";
import { type AnimaLeastPrivilege, animaLeastPrivilege, hostOf, operatorLeastPrivilege } from "../../src/audit/least-privilege.js";
import { credentialInventory, readableBy } from "../../src/credentials/inventory.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

let n = 0;
/** A record at minute `minute` of 2026-01-01. */
function at(minute: number, event: AuditEvent): AuditRecord {
  return { ...event, ts: `2026-01-01T00:${String(minute).padStart(2, "0")}:00.000Z`, seq: ++n };
}
const fetch = (minute: number, target: string, outcome: "ok" | "denied" | "error" = "ok", operation = "fetch") =>
  at(minute, { kind: "capability", anima: "alice", tool: "web", operation, target, outcome });
const lookup = (minute: number, name: string, outcome: "ok" | "missing" | "denied", source?: string) =>
  at(minute, { kind: "credential", anima: "alice", tool: "web", name, outcome, ...(source ? { source } : {}) });
const call = (minute: number) =>
  at(minute, { kind: "call", callId: `c${minute}`, anima: "alice", tool: "web", schema: "web_get", durationMs: 1, outcome: "ok" });

describe("least privilege of one Anima", () => {
  it("puts each allowlist entry beside the fetches it let through (a denial is no use), with the last use", () => {
    const lp = animaLeastPrivilege(
      [
        call(1),
        fetch(2, "https://api.example.com/v1?…"),
        fetch(3, "https://api.example.com/v2"),
        fetch(4, "https://a.b.example.org/x", "error"),
        fetch(5, "https://api.example.com:8443/x", "ok", "fetch.redirect"),
        fetch(6, "https://evil.example.net/", "denied"),
        fetch(7, "https://unused.example.com/", "denied"),
      ],
      {
        network: { mode: "allowlist", hosts: ["api.example.com", "*.example.org", "unused.example.com", "api.example.com:443"] },
        allowInternalHosts: [],
        readable: [],
      },
    );
    expect(lp.network.grants).toEqual([
      { entry: "api.example.com", uses: 3, lastUsed: "2026-01-01T00:05:00.000Z" },
      { entry: "*.example.org", uses: 1, lastUsed: "2026-01-01T00:04:00.000Z" },
      { entry: "unused.example.com", uses: 0 },
      { entry: "api.example.com:443", uses: 2, lastUsed: "2026-01-01T00:03:00.000Z" },
    ]);
    expect(lp.network.hosts.map((h) => [h.host, h.uses])).toEqual([
      ["api.example.com", 3],
      ["a.b.example.org", 1],
    ]);
    expect(lp.unusedGrants).toEqual(["network allowlist entry unused.example.com"]);
  });

  it("flags a public network that an active Anima never used, not an idle one's", () => {
    const input = { network: { mode: "public" as const }, allowInternalHosts: [], readable: [] };
    expect(animaLeastPrivilege([call(1)], input).unusedGrants).toEqual(["network public (no fetch made: `none` would do)"]);
    expect(animaLeastPrivilege([], input).unusedGrants).toEqual([]);
    const used = animaLeastPrivilege([call(1), fetch(2, "https://news.example.net/")], input);
    expect(used.unusedGrants).toEqual([]);
    expect(used.network).toMatchObject({ mode: "public", hostsReached: 1, hosts: [{ host: "news.example.net", uses: 1 }] });
  });

  it("matches the operator's internal hosts by name pattern, address and range, one address family only", () => {
    const lp = animaLeastPrivilege(
      [fetch(1, "http://10.1.2.3:8080/x"), fetch(2, "http://db.corp.example/x"), fetch(3, "http://[::1]:9000/"), fetch(4, "http://[::ffff:127.0.0.1]/")],
      { network: { mode: "public" }, allowInternalHosts: ["10.0.0.0/8", "*.corp.example", "::1", "127.0.0.1", "192.168.0.1"], readable: [] },
    );
    expect(lp.internalHosts.map((g) => [g.entry, g.uses])).toEqual([
      ["10.0.0.0/8", 1],
      ["*.corp.example", 1],
      ["::1", 1],
      ["127.0.0.1", 0],
      ["192.168.0.1", 0],
    ]);
    expect(hostOf("https://API.Example.com./x")).toEqual({ host: "api.example.com", port: 443 });
    expect(hostOf("not a url")).toBeUndefined();
  });

  it("counts only lookups that returned a value as use (missing and denied ones are not)", () => {
    const readable = [
      { name: "slack", source: "config.json" as const, scope: "shared" as const, location: "config.json credentials.slack (api_key)", set: true },
      { name: "github", source: "config.json" as const, scope: "shared" as const, location: "config.json credentials.github (api_key)", set: true },
      { name: "TOKEN__alice", source: "vault.json" as const, scope: "own" as const, location: "vault.json [alice]", set: true },
      { name: "OTHER__alice", source: "shared/credentials.json" as const, scope: "own" as const, location: "shared/credentials.json", set: true },
      { name: "API_TOKEN", source: "environment" as const, scope: "shared" as const, location: "allowed_environment", set: true },
    ];
    const lp = animaLeastPrivilege(
      [
        lookup(1, "slack", "ok", "config.json"),
        lookup(2, "github", "missing"),
        lookup(3, "github", "denied"),
        lookup(4, "OTHER__alice", "missing"),
        lookup(5, "weather", "ok", "environment"),
        lookup(6, "TOKEN__alice", "ok", "vault.json"),
      ],
      { network: { mode: "none" }, allowInternalHosts: [], readable },
    );
    expect(lp.credentials.map((c) => [c.name, c.status, c.uses])).toEqual([
      ["slack", "used", 1],
      ["github", "unused", 0],
      ["TOKEN__alice", "used", 1],
      ["OTHER__alice", "unused", 0],
      // The environment answered a lookup by another name: which variable did is not recorded.
      ["API_TOKEN", "unattributed", 0],
    ]);
    expect(lp.lookups.map((l) => `${l.name} ${l.source} ${l.uses}`)).toEqual(["slack config.json 1", "TOKEN__alice vault.json 1", "weather environment 1"]);
    expect(lp.unusedGrants).toEqual(["credential OTHER__alice (shared/credentials.json)"]);
  });
});

describe("the operator's host-wide grants", () => {
  const lp = (mode: "public" | "none", internal: number, credentials: Array<[string, string, number, boolean?]> = []): AnimaLeastPrivilege => ({
    network: { mode, grants: [], hosts: [], hostsReached: 0 },
    internalHosts: [
      { entry: "10.0.0.0/8", uses: internal, ...(internal ? { lastUsed: "2026-01-01T00:01:00.000Z" } : {}) },
      { entry: "intranet.example", uses: 0 },
    ],
    credentials: credentials.map(([name, source, uses, set]) => ({
      name,
      source: source as "environment",
      scope: "shared",
      location: source,
      set: set ?? true,
      uses,
      status: uses > 0 ? "used" : "unused",
    })),
    lookups: [],
    unusedGrants: [],
  });

  it("flags an internal host never used, and one used by only some of the Animas it applies to", () => {
    const grants = operatorLeastPrivilege(
      [
        { anima: "a", leastPrivilege: lp("public", 2) },
        { anima: "b", leastPrivilege: lp("public", 0) },
        { anima: "c", leastPrivilege: lp("none", 0) },
      ],
      ["10.0.0.0/8", "intranet.example"],
    );
    expect(grants).toEqual([
      {
        setting: "allow_internal_hosts",
        entry: "10.0.0.0/8",
        uses: 2,
        lastUsed: "2026-01-01T00:01:00.000Z",
        usedBy: ["a"],
        appliesTo: 2,
        finding: "over-broad: allowed for every Anima (2), used by 1: a",
      },
      {
        setting: "allow_internal_hosts",
        entry: "intranet.example",
        uses: 0,
        usedBy: [],
        appliesTo: 2,
        finding: "allowed for every Anima, never used in the period: remove it",
      },
    ]);
  });

  it("flags shared credentials and allowed variables used by some, none, or not set; and none used by all", () => {
    const grants = operatorLeastPrivilege(
      [
        {
          anima: "a",
          leastPrivilege: lp("none", 0, [
            ["slack", "config.json", 1],
            ["ALL", "environment", 1],
            ["UNSET", "environment", 0, false],
          ]),
        },
        {
          anima: "b",
          leastPrivilege: lp("none", 0, [
            ["slack", "config.json", 0],
            ["ALL", "environment", 3],
            ["UNSET", "environment", 0, false],
          ]),
        },
      ],
      [],
    );
    expect(grants.map((g) => [g.setting, g.entry, g.usedBy, g.finding])).toEqual([
      ["credential", "slack", ["a"], "over-broad: readable by every Anima (2), used by 1: a"],
      ["allowed_environment", "ALL", ["a", "b"], undefined],
      ["allowed_environment", "UNSET", [], "allowed but not set: nothing can read it; remove it"],
    ]);
  });
});

describe("the credential inventory", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it("lists each readable name and its source from every store, never a value", async () => {
    data = makeDataDir({
      "config.json": JSON.stringify({
        credentials: { slack: { api_key: "xoxb-SECRET-1", keys: { bot: "SECRET-2" } }, bob_only__bob: { api_key: "SECRET-3" }, empty: {} },
      }),
      "vault.json": JSON.stringify({ shared: { SHARED_KEY: "c2VhbGVkLVNFQ1JFVC00" }, alice: { MINE__alice: "c2VhbGVk" }, bob: { HIS: "c2VhbGVk" } }),
      "shared/credentials.json": JSON.stringify({ LEGACY: "SECRET-5", LEGACY__bob: "SECRET-6", BLANK: "" }),
    });
    const inventory = await credentialInventory(data.dir, { allowed: ["API_TOKEN", "UNSET_VAR"], set: { API_TOKEN: "SECRET-7" } });
    expect(inventory.problems).toEqual([]);
    expect(JSON.stringify(inventory)).not.toMatch(/SECRET|c2Vh/);
    const alice = readableBy(inventory, "alice").map((e) => `${e.name} | ${e.source} | ${e.scope} | ${e.location}${e.set ? "" : " | not set"}`);
    expect(alice).toEqual([
      "slack | config.json | shared | config.json credentials.slack (api_key, bot)",
      "SHARED_KEY | vault.json | shared | vault.json [shared]",
      "MINE__alice | vault.json | own | vault.json [alice]",
      "LEGACY | shared/credentials.json | shared | shared/credentials.json",
      "BLANK | shared/credentials.json | shared | shared/credentials.json | not set",
      "API_TOKEN | environment | shared | allowed_environment",
      "UNSET_VAR | environment | shared | allowed_environment | not set",
    ]);
    const bob = readableBy(inventory, "bob").map((e) => e.name);
    expect(bob).toEqual(["slack", "bob_only__bob", "SHARED_KEY", "HIS", "LEGACY", "LEGACY__bob", "BLANK", "API_TOKEN", "UNSET_VAR"]);
  });

  it("reports a store it cannot read without quoting it", async () => {
    data = makeDataDir({ "config.json": '{"credentials": {"slack": {"api_key": "SECRET-8"' });
    const inventory = await credentialInventory(data.dir, { allowed: [], set: {} });
    expect(inventory.problems).toEqual(["config.json is not valid JSON"]);
    expect(JSON.stringify(inventory)).not.toContain("SECRET");
  });
});
