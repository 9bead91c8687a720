import { getDefaultResultOrder, promises as dnsPromises } from "node:dns";
import { ToolHostError } from "../errors.js";
import { type HostsTable, type SearchRules, SystemFile } from "./net-system-files.js";
import type { HostLookup, ResolvedAddress } from "./net-target.js";

/**
 * The fetch capability's name resolution: the hosts file, then DNS through c-ares (node:dns's
 * `Resolver`), never glibc's getaddrinfo (`dns.lookup`).
 *
 * Why not getaddrinfo: it runs on libuv's threadpool, which lets slow lookups like it take only 2 of
 * its 4 threads, for the whole host, and it cannot be cancelled: a tool that fetched a dozen names whose
 * nameserver never answers held both threads for ~10 s each after its call had ended, and every other
 * Anima's fetch (and the host's own lookups) waited behind them (test dns_threadpool_starvation). c-ares
 * queries are sockets on the event loop, as many as are asked, each with its own timeout, and
 * `Resolver.cancel()` ends them at once: a lookup stops when its fetch does (its signal aborts).
 *
 * What getaddrinfo did that c-ares does not, kept here (net-system-files.ts): names looked up as
 * written (the operator's, see net-target.ts) are first looked up in the hosts file, and then searched
 * through resolv.conf's search domains as glibc does (`ndots`). Names with a trailing dot (every other
 * name) are absolute: DNS only, never searched, and not in the hosts file, as under glibc. Answers
 * come IPv4 first (IPv6 first under `--dns-result-order=ipv6first`); the connection tries both families
 * (Node's Happy Eyeballs) among the checked answers only.
 */
export interface ResolverSettings {
  /** DNS servers (`"10.0.0.53"`, `"127.0.0.1:5353"`, `"[::1]:53"`) replacing resolv.conf's. Default: resolv.conf's. */
  servers?: readonly string[];
  /** Default: /etc/hosts. */
  hostsFile?: string;
  /** Read for its search domains and ndots (c-ares reads the system's for its servers). Default: /etc/resolv.conf. */
  resolvConf?: string;
  /** Time one DNS query waits for an answer before it is sent again, in ms (each try the same). */
  queryTimeoutMs: number;
  /** Times one query is sent (per server) before the name counts as unresolvable. */
  tries: number;
  /** Which names of the hosts file can be asked for as written; only those are kept. Default: all. */
  hostsNames?: (name: string) => boolean;
}

const NOT_FOUND = new Set(["ENOTFOUND", "ENODATA"]);
/** Longest search-domain candidate tried, in characters (a DNS name has at most 253). */
const MAX_NAME_CHARS = 253;

export class SystemResolver {
  private readonly hosts: SystemFile<HostsTable>;
  private readonly searchRules: SystemFile<SearchRules>;
  private readonly servers: string[] | undefined;

  constructor(private readonly settings: ResolverSettings) {
    this.hosts = SystemFile.hosts(settings.hostsFile ?? "/etc/hosts", settings.hostsNames ?? (() => true));
    this.searchRules = SystemFile.resolvConf(settings.resolvConf ?? "/etc/resolv.conf");
    this.servers = settings.servers === undefined ? undefined : [...settings.servers];
    if (this.servers) {
      try {
        new dnsPromises.Resolver().setServers(this.servers); // checked once, here, rather than on every lookup
      } catch {
        throw new ToolHostError(
          "InvalidArguments",
          `DNS servers: ${JSON.stringify(this.servers)} are not IP addresses (with optional ports)`,
          "fix the fetch capability's host options",
        );
      }
    }
  }

  /** A `HostLookup`: `name` as net-target.ts asks it (a trailing dot: absolute). Stops when `signal` aborts. */
  readonly lookup: HostLookup = (name, signal) => this.resolve(name, signal ?? new AbortController().signal);

  private async resolve(name: string, signal: AbortSignal): Promise<ResolvedAddress[]> {
    const absolute = name.endsWith(".");
    const bare = name.replace(/\.+$/, "").toLowerCase();
    if (!absolute) {
      const listed = (await this.hosts.get()).get(bare);
      if (listed) return ordered([...listed]);
    }
    let failure: Error | undefined;
    for (const candidate of absolute ? [bare] : await this.candidates(bare)) {
      signal.throwIfAborted();
      try {
        return await this.query(candidate, signal);
      } catch (error) {
        if (signal.aborted) throw error;
        // A name not found goes on to the next candidate; so does a failure (a timeout), which is the one reported.
        if (failure === undefined || NOT_FOUND.has(codeOf(failure))) failure = error as Error;
      }
    }
    throw failure ?? Object.assign(new Error(`${bare} not found`), { code: "ENOTFOUND" });
  }

  /** glibc's res_search order: a name with at least ndots dots is tried as written first, else last. */
  private async candidates(name: string): Promise<string[]> {
    const { search, ndots } = await this.searchRules.get();
    const searched = search.map((domain) => `${name}.${domain}`).filter((candidate) => candidate.length <= MAX_NAME_CHARS);
    const dots = name.split(".").length - 1;
    return dots >= ndots ? [name, ...searched] : [...searched, name];
  }

  /** A and AAAA of one name, in parallel on a resolver of their own, so that an abort cancels just these. */
  private async query(name: string, signal: AbortSignal): Promise<ResolvedAddress[]> {
    const { queryTimeoutMs, tries } = this.settings;
    const resolver = new dnsPromises.Resolver({ timeout: queryTimeoutMs, tries, maxTimeout: queryTimeoutMs });
    if (this.servers) resolver.setServers(this.servers);
    const cancel = () => resolver.cancel();
    signal.addEventListener("abort", cancel, { once: true });
    try {
      const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
      const addresses: ResolvedAddress[] = [
        ...(v4.status === "fulfilled" ? v4.value.map((address) => ({ address, family: 4 as const })) : []),
        ...(v6.status === "fulfilled" ? v6.value.map((address) => ({ address, family: 6 as const })) : []),
      ];
      if (addresses.length > 0) return ordered(addresses);
      const errors = [v4, v6].flatMap((result) => (result.status === "rejected" ? [result.reason as Error] : []));
      throw errors.find((error) => !NOT_FOUND.has(codeOf(error))) ?? errors[0] ?? Object.assign(new Error(`${name} has no addresses`), { code: "ENODATA" });
    } finally {
      signal.removeEventListener("abort", cancel);
    }
  }
}

/** IPv4 first, unless Node was told to prefer IPv6 (`--dns-result-order=ipv6first`); each family in answer order. */
function ordered(addresses: ResolvedAddress[]): ResolvedAddress[] {
  const first = getDefaultResultOrder() === "ipv6first" ? 6 : 4;
  return [...addresses.filter((a) => a.family === first), ...addresses.filter((a) => a.family !== first)];
}

function codeOf(error: unknown): string {
  return String((error as NodeJS.ErrnoException | undefined)?.code ?? "");
}
