import { isIP } from "node:net";
import ipaddr from "ipaddr.js";
import { ToolHostError } from "../errors.js";

/**
 * Address and host-name rules of the fetch capability (docs/design.md §9: a tool cannot reach private,
 * loopback or metadata addresses unless policy allows). Parsing and ranges come from ipaddr.js; this
 * file only decides which ranges count as "public". The input is always canonical: a WHATWG URL host
 * (which already turned `2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1` into `127.0.0.1`) or a resolver
 * answer; anything `net.isIP` does not accept as written is refused rather than re-interpreted.
 */

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** Cloud metadata endpoints. They sit in non-public ranges anyway; naming them gives clearer refusals,
 *  and a covering operator CIDR (say 169.254.0.0/16) does not open them: only the exact address does.
 *  An IPv6 address that embeds one of the IPv4 ones (`embeddedIPv4`) is a metadata address too. */
const METADATA_ADDRESSES = new Set(["169.254.169.254", "169.254.170.2", "169.254.170.23", "100.100.100.200", "fd00:ec2::254", "fd00:ec2::23"]);

/** Names refused before any DNS query (the suffix itself or any name under it): they only ever mean
 *  this machine or a private network, and metadata services answer to some of them. */
const BLOCKED_NAME_SUFFIXES = ["localhost", "localdomain", "local", "internal", "intranet", "lan", "home.arpa", "metadata.goog"];

const IPV4_LABELS: Record<string, string> = {
  unspecified: "unspecified",
  broadcast: "broadcast",
  multicast: "multicast",
  linkLocal: "link-local",
  loopback: "loopback",
  carrierGradeNat: "shared (CGNAT)",
  private: "private",
  reserved: "reserved",
  as112: "reserved (AS112)",
  amt: "reserved (AMT)",
  benchmarking: "reserved (benchmarking)",
};

/**
 * Why `address` is not a public unicast address, or undefined when it is. Public means: IPv4 that
 * ipaddr.js calls plain `unicast`; IPv6 in global unicast 2000::/3 that ipaddr.js calls `unicast`, or
 * a NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address whose embedded IPv4 address is itself public.
 * Always refused: IPv4-mapped and IPv4-compatible IPv6 (the IPv4 form works; the mapped forms exist
 * mostly to slip past filters), Teredo, local-use NAT64 (64:ff9b:1::/48) and every other special range.
 */
export function nonPublicReason(address: string): string | undefined {
  const parsed = parseCanonical(address);
  if (!parsed) return "not a valid IP address";
  if (isMetadata(parsed)) return "cloud metadata";
  if (parsed.kind() === "ipv4") {
    const range = (parsed as ipaddr.IPv4).range();
    return range === "unicast" ? undefined : (IPV4_LABELS[range] ?? `special (${range})`);
  }
  const v6 = parsed as ipaddr.IPv6;
  const range: string = v6.range(); // ipaddr.js knows more range names than its types list
  const parts = v6.parts;
  switch (range) {
    case "unicast":
      if (parts.slice(0, 6).every((p) => p === 0)) return "IPv4-compatible IPv6";
      // Outside 2000::/3 nothing is globally routed (::/8, 100::/8, 4000::/2 … are unassigned or special).
      return ((parts[0] ?? 0) & 0xe000) === 0x2000 ? undefined : "reserved";
    case "rfc6052": {
      if (parts[2] !== 0) return "local-use NAT64";
      const inner = embeddedReason(parts[6], parts[7]);
      return inner === undefined ? undefined : `NAT64 with an embedded ${inner} IPv4 address`;
    }
    case "6to4": {
      const inner = embeddedReason(parts[1], parts[2]);
      return inner === undefined ? undefined : `6to4 with an embedded ${inner} IPv4 address`;
    }
    case "ipv4Mapped":
    case "rfc6145":
      return "IPv4-mapped IPv6";
    case "uniqueLocal":
      return "unique-local";
    case "linkLocal":
      return "link-local";
    case "deprecatedSiteLocal":
      return "site-local";
    case "loopback":
    case "unspecified":
    case "multicast":
    case "teredo":
      return range === "teredo" ? "Teredo" : range;
    default:
      return range === "reserved" ? "reserved" : `reserved (${range})`;
  }
}

function embeddedReason(high: number | undefined, low: number | undefined): string | undefined {
  const v4 = new ipaddr.IPv4([(high ?? 0) >> 8, (high ?? 0) & 0xff, (low ?? 0) >> 8, (low ?? 0) & 0xff]);
  return nonPublicReason(v4.toString());
}

/** Parses only what `net.isIP` accepts (dotted-quad IPv4, standard IPv6): no octal/hex/short forms. */
function parseCanonical(address: string): Address | undefined {
  if (isIP(address) === 0) return undefined;
  try {
    return ipaddr.parse(address);
  } catch {
    return undefined;
  }
}

/**
 * The IPv4 addresses an IPv6 address leads to: through this host's own IPv4 stack (IPv4-mapped
 * ::ffff:0:0/96, IPv4-translated ::ffff:0:0:0/96, IPv4-compatible ::/96; ipaddr.js reads `::a.b.c.d` as
 * mapped, which embeds the same IPv4) or through a translator or tunnel (NAT64 64:ff9b::/96; local-use
 * NAT64 64:ff9b:1::/48, whose prefix may be /48, /56, /64 or /96, so every RFC 6052 position counts;
 * 6to4 2002::/16; Teredo's server and, bit-inverted, client). Empty for any other address.
 */
function embeddedIPv4(v6: ipaddr.IPv6): ipaddr.IPv4[] {
  const p = v6.toByteArray();
  const at = (...indices: number[]) => new ipaddr.IPv4(indices.map((index) => p[index] ?? 0));
  switch (v6.range() as string) {
    case "ipv4Mapped":
    case "rfc6145":
      return [at(12, 13, 14, 15)];
    case "unicast":
      return p.slice(0, 12).every((byte) => byte === 0) ? [at(12, 13, 14, 15)] : [];
    case "rfc6052":
      // Bits 64–71 (byte 8) are RFC 6052's reserved "u" octet, never part of the IPv4 address.
      return v6.parts[2] === 0 ? [at(12, 13, 14, 15)] : [at(6, 7, 9, 10), at(7, 9, 10, 11), at(9, 10, 11, 12), at(12, 13, 14, 15)];
    case "6to4":
      return [at(2, 3, 4, 5)];
    case "teredo":
      return [at(4, 5, 6, 7), new ipaddr.IPv4([12, 13, 14, 15].map((index) => ~(p[index] ?? 0) & 0xff))];
    default:
      return [];
  }
}

/** A metadata address, or an IPv6 address leading to one: every form of it is refused alike. */
function isMetadata(parsed: Address): boolean {
  if (METADATA_ADDRESSES.has(parsed.toString())) return true;
  return parsed.kind() === "ipv6" && embeddedIPv4(parsed as ipaddr.IPv6).some((v4) => METADATA_ADDRESSES.has(v4.toString()));
}

export function isMetadataAddress(address: string): boolean {
  const parsed = parseCanonical(address);
  return parsed !== undefined && isMetadata(parsed);
}

/** Why a host name is refused before any DNS query, or undefined. `host` is lower case, no trailing dot. */
export function blockedNameReason(host: string): string | undefined {
  if (!host.includes(".")) return "a single-label name (it would resolve through local search domains)";
  const suffix = BLOCKED_NAME_SUFFIXES.find((s) => host === s || host.endsWith(`.${s}`));
  return suffix === undefined ? undefined : `a local or internal name (*.${suffix})`;
}

/** `api.example.com` matches itself only; `*.example.org` matches every name under example.org (any
 *  depth), not example.org itself. Both sides lower case. */
export function hostMatches(host: string, pattern: string): boolean {
  return pattern.startsWith("*.") ? host.endsWith(pattern.slice(1)) : host === pattern;
}

/** An Anima's allowlist entry: `name`, `*.name`, or either with `:port` (then only that port). */
export function allowEntryMatches(host: string, port: number, entry: string): boolean {
  const colon = entry.lastIndexOf(":");
  if (colon < 0) return hostMatches(host, entry);
  return Number(entry.slice(colon + 1)) === port && hostMatches(host, entry.slice(0, colon));
}

const NAME_PATTERN = /^(\*\.)?[a-z0-9-]+(\.[a-z0-9-]+)*$/;

/**
 * The operator's `allowInternalHosts`: host names (`intranet.example`, `*.corp.example`, `localhost`),
 * IP addresses (`127.0.0.1`, `::1`) and CIDR ranges (`10.0.0.0/8`, `fd00::/8`) that may be reached even
 * though they are not public. An allowed name may resolve to any address, except a metadata address
 * (in any IPv6 form that embeds it too), which needs its exact IP entry. The list never widens an Anima's own policy (`none`, allowlist).
 */
export class InternalAllowList {
  private readonly names: string[] = [];
  private readonly ranges: Array<[Address, number]> = [];
  private readonly exact = new Set<string>();

  constructor(entries: readonly string[] = []) {
    if (!Array.isArray(entries)) throw configError("allowInternalHosts must be an array of strings");
    for (const raw of entries) {
      if (typeof raw !== "string" || raw.trim() === "") throw configError("allowInternalHosts entries must be non-empty strings");
      const entry = raw
        .trim()
        .toLowerCase()
        .replace(/^\[(.*)\]$/, "$1");
      if (entry.includes("/")) {
        if (!ipaddr.isValidCIDR(entry)) throw configError(`allowInternalHosts: "${raw}" is not a valid CIDR range`);
        const [base, bits] = ipaddr.parseCIDR(entry);
        this.ranges.push([base, bits]);
        if (bits === (base.kind() === "ipv4" ? 32 : 128)) this.exact.add(base.toString());
      } else if (isIP(entry) !== 0) {
        const address = ipaddr.parse(entry);
        this.ranges.push([address, address.kind() === "ipv4" ? 32 : 128]);
        this.exact.add(address.toString());
      } else if (NAME_PATTERN.test(entry.replace(/\.$/, ""))) {
        this.names.push(entry.replace(/\.$/, ""));
      } else {
        throw configError(`allowInternalHosts: "${raw}" is neither a host name, an IP address nor a CIDR range`);
      }
    }
  }

  allowsName(host: string): boolean {
    return this.names.some((pattern) => hostMatches(host, pattern));
  }

  /**
   * Same address family only: allowing 127.0.0.1 does not allow ::ffff:127.0.0.1. A metadata address,
   * in any form (`isMetadata`: ::ffff:169.254.169.254, 64:ff9b::a9fe:a9fe …), only by its exact entry:
   * a range such as ::ffff:0:0/96 or 64:ff9b::/96 covers it but does not open it.
   */
  allowsAddress(address: string): boolean {
    const parsed = parseCanonical(address);
    if (!parsed) return false;
    if (isMetadata(parsed)) return this.exact.has(parsed.toString());
    return this.ranges.some(([base, bits]) => base.kind() === parsed.kind() && parsed.match(base, bits));
  }

  /** True for metadata addresses unless listed exactly: even an allowed name may not lead to them. */
  blocksMetadata(address: string): boolean {
    return isMetadataAddress(address) && !this.allowsAddress(address);
  }
}

function configError(message: string): ToolHostError {
  return new ToolHostError("InvalidArguments", message, "fix the fetch capability's host options");
}

/** Ports the WHATWG fetch standard refuses ("bad ports"): services that parse HTTP-ish bytes in
 *  dangerous ways (SMTP, IRC, SIP, X11 …). Refused for every host, internal or not. */
export const BAD_PORTS = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137,
  139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049,
  3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);
