import { stat } from "node:fs/promises";
import { isIP } from "node:net";
import { readRegularFile } from "../regular-file.js";
import type { ResolvedAddress } from "./net-target.js";

/**
 * The two files of the system's resolver configuration that the fetch capability's resolver
 * (net-resolve.ts) reads itself, because c-ares, which does its DNS, reads neither for it: the hosts
 * file (c-ares's queries never consult it; glibc's getaddrinfo did) and resolv.conf's search domains
 * and `ndots` (c-ares reads the file for its servers, but Node's queries never search).
 *
 * Both are read as the host reads data-dir files (regular-file.ts: a non-blocking open, a regular file
 * only, bounded), at most once a second and again only when the file changed; a file that is missing
 * or cannot be read that way has no entries, as glibc skips a hosts file it cannot open.
 */

/** What the resolver needs of resolv.conf: the search list and how many dots make a name absolute first. */
export interface SearchRules {
  search: string[];
  ndots: number;
}

export type HostsTable = ReadonlyMap<string, readonly ResolvedAddress[]>;

/** A hosts file larger than this counts as unreadable (ad-blocking lists run to a few MiB). */
const MAX_HOSTS_BYTES = 8 * 1024 * 1024;
const MAX_RESOLV_CONF_BYTES = 64 * 1024;
/** The files are looked at (one stat) at most this often, in ms. */
const RECHECK_MS = 1_000;
/** glibc's limits: ndots is capped at 15; six search domains (MAXDNSRCH before glibc 2.26). */
const MAX_NDOTS = 15;
const MAX_SEARCH_DOMAINS = 6;

/**
 * The hosts file's addresses by name (lower case), in the file's order, for the names `keep` accepts:
 * only names that can ever be looked up as written are kept, so a long ad-blocking list costs no memory.
 */
export function parseHostsFile(text: string, keep: (name: string) => boolean): Map<string, ResolvedAddress[]> {
  const table = new Map<string, ResolvedAddress[]>();
  for (const line of text.split("\n")) {
    const [address = "", ...names] = line.replace(/#.*/, "").trim().split(/\s+/);
    const family = isIP(address);
    if (family === 0) continue;
    for (const name of names.map((n) => n.toLowerCase())) {
      if (!keep(name)) continue;
      const addresses = table.get(name) ?? [];
      if (!addresses.some((a) => a.address === address)) addresses.push({ address, family: family as 4 | 6 });
      table.set(name, addresses);
    }
  }
  return table;
}

/** resolv.conf's `search` (or `domain`: the last of the two wins, as in glibc) and `options ndots:n`. */
export function parseResolvConf(text: string): SearchRules {
  const rules: SearchRules = { search: [], ndots: 1 };
  for (const line of text.split("\n")) {
    const [keyword, ...values] = line
      .replace(/[#;].*/, "")
      .trim()
      .split(/\s+/);
    if (keyword === "search" || keyword === "domain") {
      rules.search = values
        .map((domain) => domain.toLowerCase().replace(/\.+$/, ""))
        .filter((domain) => domain !== "")
        .slice(0, keyword === "domain" ? 1 : MAX_SEARCH_DOMAINS);
    } else if (keyword === "options") {
      for (const option of values) {
        const ndots = /^ndots:(\d+)$/.exec(option)?.[1];
        if (ndots !== undefined) rules.ndots = Math.min(Number(ndots), MAX_NDOTS);
      }
    }
  }
  return rules;
}

/** One system file, parsed, re-read only when it changed and looked at no more than once a second. */
export class SystemFile<T> {
  private value: T;
  private identity = "";
  private checkedAt = Number.NEGATIVE_INFINITY;
  private refreshing: Promise<T> | undefined;

  constructor(
    private readonly path: string,
    private readonly maxBytes: number,
    private readonly parse: (text: string) => T,
    private readonly empty: T,
  ) {
    this.value = empty;
  }

  static hosts(path: string, keep: (name: string) => boolean): SystemFile<HostsTable> {
    return new SystemFile<HostsTable>(path, MAX_HOSTS_BYTES, (text) => parseHostsFile(text, keep), new Map());
  }

  static resolvConf(path: string): SystemFile<SearchRules> {
    return new SystemFile(path, MAX_RESOLV_CONF_BYTES, parseResolvConf, { search: [], ndots: 1 });
  }

  /** The parsed file; concurrent callers share one read. Never rejects. */
  get(): Promise<T> {
    if (performance.now() - this.checkedAt < RECHECK_MS) return Promise.resolve(this.value);
    this.refreshing ??= this.refresh().finally(() => {
      this.refreshing = undefined;
    });
    return this.refreshing;
  }

  private async refresh(): Promise<T> {
    try {
      // stat follows a link, as the resolver does: /etc/hosts is often one (containers, NixOS).
      const stats = await stat(this.path);
      const identity = `${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeMs}`;
      if (identity !== this.identity) {
        this.value = this.parse((await readRegularFile(this.path, this.maxBytes)).toString("utf8"));
        this.identity = identity;
      }
    } catch {
      // Missing, not a regular file (a FIFO would block a plain read), too large or unreadable: no entries.
      this.value = this.empty;
      this.identity = "";
    }
    this.checkedAt = performance.now();
    return this.value;
  }
}
