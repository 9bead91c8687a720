import ipaddr from "ipaddr.js";
import type { CredentialEntry } from "../credentials/inventory.js";
import type { SandboxPolicy } from "../policy/permissions.js";
import type { AuditRecord } from "./audit-log.js";

/**
 * Least privilege (`audit`): each grant an Anima holds beside its use over the period read, so that an
 * operator can take back what is not used. Grants: its network policy (allowlist entries, or `public`),
 * the operator's `allow_internal_hosts`, and every credential name it can read (credentials/inventory.ts:
 * config.json, vault.json, shared/credentials.json, `allowed_environment`). Use: fetch records the policy
 * let through (outcome ok or error; a denial is no use) and credential lookups that returned a value
 * (missing and denied lookups are no use).
 *
 * What the records cannot tell: a credential record names what the tool asked for and the source that
 * answered, not the key that answered, so a lookup through a variable-style name (vault, shared file,
 * environment) is attributed to an entry only when the tool asked by that very name; other lookups of
 * that source are `unattributed` (neither used nor unused). And fetch records hold URLs, not addresses:
 * an internal host reached through a name that resolved into an allowed range is not seen as its use.
 */
export interface Use {
  uses: number;
  /** The newest use in the period. */
  lastUsed?: string;
}

export type GrantUse = Use & { entry: string };
export type HostUse = Use & { host: string };
export type CredentialGrant = CredentialEntry & Use & { status: "used" | "unused" | "unattributed" };

export interface AnimaLeastPrivilege {
  network: {
    /** `unknown` when the permissions file is broken. */
    mode: SandboxPolicy["network"]["mode"] | "unknown";
    /** Allowlist entries and their use (none for `public` and `none`). */
    grants: GrantUse[];
    /** Hosts reached, most used first (at most `MAX_HOSTS`); `hostsReached` counts them all. */
    hosts: HostUse[];
    hostsReached: number;
  };
  /** The operator's `allow_internal_hosts` entries, as this Anima used them. */
  internalHosts: GrantUse[];
  /** Every credential name this Anima can read (never a value), beside its use. */
  credentials: CredentialGrant[];
  /** What its lookups returned, by the name asked and the source that answered. */
  lookups: Array<Use & { name: string; source: string }>;
  /** Its own grants it did not use in the period (allowlist entries, an unused `public`, its own credentials), as phrases. */
  unusedGrants: string[];
}

const MAX_HOSTS = 20;
const NETWORK_OPERATIONS = new Set(["fetch", "fetch.redirect"]);

export interface LeastPrivilegeInput {
  network: SandboxPolicy["network"] | undefined;
  allowInternalHosts: readonly string[];
  /** The credential entries the Anima can read (credentials/inventory.ts `readableBy`). */
  readable: readonly CredentialEntry[];
}

export function animaLeastPrivilege(records: readonly AuditRecord[], input: LeastPrivilegeInput): AnimaLeastPrivilege {
  const use = new PrivilegeUse(input);
  for (const record of records) use.see(record);
  return use.result();
}

/** `animaLeastPrivilege` one record at a time, for a reader that gives the event loop turns between them (report.ts). */
export class PrivilegeUse {
  private readonly grants: GrantUse[];
  private readonly internalHosts: GrantUse[];
  private readonly hosts = new Map<string, HostUse>();
  private readonly lookups = new Map<string, Use & { name: string; source: string }>();
  private calls = 0;

  constructor(private readonly input: LeastPrivilegeInput) {
    const network = input.network;
    this.grants = network?.mode === "allowlist" ? network.hosts.map((entry) => ({ entry, uses: 0 })) : [];
    this.internalHosts = input.allowInternalHosts.map((entry) => ({ entry, uses: 0 }));
  }

  see(record: AuditRecord): void {
    if (record.kind === "call") this.calls++;
    if (record.kind === "capability" && NETWORK_OPERATIONS.has(record.operation) && record.outcome !== "denied") {
      const target = hostOf(record.target);
      if (target === undefined) return;
      touch(this.hosts.get(target.host) ?? setNew(this.hosts, target.host, { host: target.host, uses: 0 }), record.ts);
      for (const grant of this.grants) if (allowEntryMatches(target.host, target.port, grant.entry)) touch(grant, record.ts);
      for (const grant of this.internalHosts) if (internalEntryMatches(target.host, grant.entry)) touch(grant, record.ts);
    } else if (record.kind === "credential" && record.outcome === "ok") {
      const key = `${record.source ?? ""}\0${record.name}`;
      touch(this.lookups.get(key) ?? setNew(this.lookups, key, { name: record.name, source: record.source ?? "(unknown)", uses: 0 }), record.ts);
    }
  }

  result(): AnimaLeastPrivilege {
    const { input, grants, internalHosts, hosts, lookups, calls } = this;
    const network = input.network;
    const credentials = input.readable.map((entry) => credentialUse(entry, input.readable, [...lookups.values()]));
    const unusedGrants = [
      ...grants.filter((g) => g.uses === 0).map((g) => `network allowlist entry ${g.entry}`),
      ...(network?.mode === "public" && hosts.size === 0 && calls > 0 ? ["network public (no fetch made: `none` would do)"] : []),
      ...credentials.filter((c) => c.scope === "own" && c.status === "unused").map((c) => `credential ${c.name} (${c.location})`),
    ];
    const reached = [...hosts.values()].sort((a, b) => b.uses - a.uses || a.host.localeCompare(b.host));
    return {
      network: { mode: network?.mode ?? "unknown", grants, hosts: reached.slice(0, MAX_HOSTS), hostsReached: reached.length },
      internalHosts,
      credentials,
      lookups: [...lookups.values()].sort((a, b) => a.name.localeCompare(b.name) || a.source.localeCompare(b.source)),
      unusedGrants,
    };
  }
}

function credentialUse(entry: CredentialEntry, readable: readonly CredentialEntry[], lookups: Array<Use & { name: string; source: string }>): CredentialGrant {
  const exact = lookups.filter((l) => l.source === entry.source && l.name === entry.name);
  if (exact.length > 0) {
    const lastUsed = exact
      .map((l) => l.lastUsed ?? "")
      .sort()
      .at(-1);
    return { ...entry, uses: exact.reduce((n, l) => n + l.uses, 0), ...(lastUsed ? { lastUsed } : {}), status: "used" };
  }
  // config.json lookups always name their entry; another source's lookup by a name none of its entries has was answered by one we cannot tell.
  const known = new Set(readable.filter((e) => e.source === entry.source).map((e) => e.name));
  const unattributed = entry.source !== "config.json" && lookups.some((l) => l.source === entry.source && !known.has(l.name));
  return { ...entry, uses: 0, status: unattributed ? "unattributed" : "unused" };
}

/** One operator setting that holds for every Anima, beside which Animas used it. */
export interface OperatorGrant extends Use {
  setting: "allow_internal_hosts" | "allowed_environment" | "credential";
  entry: string;
  /** For credentials: where it is kept. */
  location?: string;
  usedBy: string[];
  /** Animas it applies to (for internal hosts: those with network at all). */
  appliesTo: number;
  finding?: string;
}

/**
 * The operator's host-wide grants (allowed internal hosts, allowed environment variables, shared
 * credentials) beside their use by every Anima: one never used, or used by only some of the Animas it
 * applies to, is over-broad (the setting cannot be narrowed per Anima, but an Anima's allowlist or a
 * per-Anima credential `NAME__anima` can). Meaningful only over every Anima of the data dir.
 */
export function operatorLeastPrivilege(
  reports: ReadonlyArray<{ anima: string; leastPrivilege: AnimaLeastPrivilege }>,
  allowInternalHosts: readonly string[],
): OperatorGrant[] {
  const grants: OperatorGrant[] = [];
  for (const entry of allowInternalHosts) {
    const reach = reports.filter((r) => r.leastPrivilege.network.mode !== "none");
    const uses = reach.map((r) => ({ anima: r.anima, use: r.leastPrivilege.internalHosts.find((g) => g.entry === entry) }));
    grants.push(operatorGrant("allow_internal_hosts", entry, undefined, reach.length, uses, false));
  }
  const shared = new Map<string, CredentialEntry>();
  for (const r of reports) for (const c of r.leastPrivilege.credentials) if (c.scope === "shared") shared.set(`${c.source}\0${c.name}`, c);
  for (const entry of shared.values()) {
    const uses = reports.map((r) => ({
      anima: r.anima,
      use: r.leastPrivilege.credentials.find((c) => c.source === entry.source && c.name === entry.name),
    }));
    const unattributed = uses.some((u) => u.use?.status === "unattributed");
    const setting = entry.source === "environment" ? "allowed_environment" : "credential";
    const grant = operatorGrant(setting, entry.name, entry.location, reports.length, uses, unattributed);
    if (!entry.set) grant.finding = `${entry.source === "environment" ? "allowed but not set" : "empty"}: nothing can read it; remove it`;
    grants.push(grant);
  }
  return grants;
}

function operatorGrant(
  setting: OperatorGrant["setting"],
  entry: string,
  location: string | undefined,
  appliesTo: number,
  uses: Array<{ anima: string; use: Use | undefined }>,
  unattributed: boolean,
): OperatorGrant {
  const usedBy = uses.filter((u) => (u.use?.uses ?? 0) > 0);
  const lastUsed = usedBy
    .map((u) => u.use?.lastUsed ?? "")
    .sort()
    .at(-1);
  const grant: OperatorGrant = {
    setting,
    entry,
    ...(location !== undefined ? { location } : {}),
    uses: usedBy.reduce((n, u) => n + (u.use?.uses ?? 0), 0),
    ...(lastUsed ? { lastUsed } : {}),
    usedBy: usedBy.map((u) => u.anima),
    appliesTo,
  };
  const what = setting === "allow_internal_hosts" ? "allowed for every Anima" : "readable by every Anima";
  if (unattributed) return grant; // some use could be this one's: no finding either way
  if (appliesTo > 0 && usedBy.length === 0) grant.finding = `${what}, never used in the period: remove it`;
  else if (usedBy.length > 0 && usedBy.length < appliesTo) {
    grant.finding = `over-broad: ${what} (${appliesTo}), used by ${usedBy.length}: ${shortList(grant.usedBy, 5)}`;
  }
  return grant;
}

/** `a, b, c (+N more)`. */
export function shortList(names: readonly string[], max: number): string {
  return names.length <= max ? names.join(", ") : `${names.slice(0, max).join(", ")} (+${names.length - max} more)`;
}

function touch(use: Use, ts: string): void {
  use.uses++;
  if (use.lastUsed === undefined || ts > use.lastUsed) use.lastUsed = ts;
}

function setNew<K, V>(map: Map<K, V>, key: K, value: V): V {
  map.set(key, value);
  return value;
}

/** The host (lower case, IPv6 without brackets) and port a fetch record's target names. */
export function hostOf(target: string): { host: string; port: number } | undefined {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return undefined;
  }
  if (url.hostname === "") return undefined;
  const port = url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
  return {
    host: url.hostname
      .toLowerCase()
      .replace(/^\[(.*)\]$/, "$1")
      .replace(/\.$/, ""),
    port,
  };
}

// The two matchers follow capabilities/net-address.ts (`allowEntryMatches`, `InternalAllowList`), which
// the audit layer cannot import (capabilities records into the audit log).

/** `api.example.com` matches itself; `*.example.org` every name under example.org; `:443` only that port. */
function allowEntryMatches(host: string, port: number, entry: string): boolean {
  const colon = entry.lastIndexOf(":");
  if (colon < 0) return hostMatches(host, entry);
  return Number(entry.slice(colon + 1)) === port && hostMatches(host, entry.slice(0, colon));
}

function hostMatches(host: string, pattern: string): boolean {
  return pattern.startsWith("*.") ? host.endsWith(pattern.slice(1)) : host === pattern;
}

/** An `allow_internal_hosts` entry (a name pattern, an IP address or a CIDR range) against a URL's host; same address family only. */
function internalEntryMatches(host: string, raw: string): boolean {
  const entry = raw
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, "$1")
    .replace(/\.$/, "");
  if (!isIp(host)) return !entry.includes("/") && !isIp(entry) && hostMatches(host, entry);
  try {
    const address = ipaddr.parse(host);
    if (entry.includes("/")) {
      const [base, bits] = ipaddr.parseCIDR(entry);
      return base.kind() === address.kind() && address.match(base, bits);
    }
    return isIp(entry) && ipaddr.parse(entry).toString() === address.toString();
  } catch {
    return false;
  }
}

/** A dotted-quad IPv4 or an IPv6 address (not ipaddr's classful forms such as `127.1`, which URLs never keep). */
function isIp(text: string): boolean {
  return ipaddr.IPv4.isValidFourPartDecimal(text) || ipaddr.IPv6.isValid(text);
}

/** The text report's least-privilege lines of one Anima (lists cut at 20; `--json` has them all). */
export function formatLeastPrivilege(lp: AnimaLeastPrivilege): string[] {
  const use = (u: Use) => (u.uses > 0 ? `×${u.uses} (last ${u.lastUsed})` : "UNUSED");
  const cut = <T>(items: readonly T[], show: (item: T) => string) =>
    `${items.slice(0, 20).map(show).join("; ")}${items.length > 20 ? `; … ${items.length - 20} more (--json)` : ""}`;
  const n = lp.network;
  const lines = ["  least privilege (grants beside their use in the period)"];
  if (n.mode === "allowlist") lines.push(`    network allowlist: ${cut(n.grants, (g) => `${g.entry} ${use(g)}`) || "(empty)"}`);
  else
    lines.push(
      `    network ${n.mode}${n.mode === "none" ? "" : `: ${n.hostsReached} hosts reached`}${n.hosts.length ? `: ${cut(n.hosts, (h) => `${h.host} ${use(h)}`)}` : ""}`,
    );
  if (lp.internalHosts.length > 0 && n.mode !== "none")
    lines.push(`    allow_internal_hosts (operator): ${cut(lp.internalHosts, (g) => `${g.entry} ${use(g)}`)}`);
  const status = (c: CredentialGrant) => (!c.set ? "NOT SET" : c.status === "unattributed" ? "? (its source answered lookups by other names)" : use(c));
  lines.push(
    `    credentials readable: ${cut(lp.credentials, (c) => `${c.name} [${c.location}${c.scope === "own" ? ", own" : ""}] ${status(c)}`) || "(none)"}`,
  );
  if (lp.lookups.length > 0) lines.push(`    lookups answered: ${cut(lp.lookups, (l) => `${l.name} from ${l.source} ${use(l)}`)}`);
  if (lp.unusedGrants.length > 0) lines.push(`    unused grants: ${lp.unusedGrants.join("; ")}`);
  return lines;
}

/** The operator's host-wide grants with a finding (over-broad, unused, unset), one line each. */
export function formatOperatorFindings(grants: readonly OperatorGrant[]): string[] {
  return grants
    .filter((g) => g.finding !== undefined)
    .map((g) => `  ${g.setting} ${g.entry}${g.location && g.setting === "credential" ? ` [${g.location}]` : ""}: ${g.finding}`);
}
