import { isIP } from "node:net";
import { ToolHostError } from "../errors.js";
import type { SandboxPolicy } from "../policy/permissions.js";
import { BAD_PORTS, type InternalAllowList, allowEntryMatches, blockedNameReason, nonPublicReason } from "./net-address.js";

/**
 * Decides whether one URL (the tool's, or a redirect hop's) may be fetched, and to which addresses.
 * Everything here happens before any connection is opened. The order:
 *  1. scheme http/https, the Anima's policy (`none` refuses all; an allowlist must name the host), port;
 *  2. an IP literal must be public, or inside an operator-allowed address/range;
 *  3. a name must not be local/internal (unless the operator allows the name), is resolved ONCE, and
 *     EVERY answer must be public or operator-allowed: one non-public answer refuses the whole name
 *     (mixed answers are how rebinding and split-horizon tricks look). The checked answers are what the
 *     connection uses (see `pinnedLookup` in net-request.ts), so DNS is never consulted again.
 * Messages name the host as the tool (or the redirect) gave it, never a resolved address.
 */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/**
 * Resolves a name to all its addresses, and stops (settles soon) when `signal` aborts. The host's is
 * `SystemResolver` (net-resolve.ts); tests inject stubs. A name with a trailing dot is absolute.
 */
export type HostLookup = (hostname: string, signal?: AbortSignal) => Promise<ReadonlyArray<{ address: string; family: number }>>;

export interface CheckedTarget {
  /** Host for the request line, Host header and TLS SNI: lower case, no brackets, no trailing dot. */
  host: string;
  port: number;
  /** The checked addresses the connection may use; an IP literal is its own single address. */
  addresses: ResolvedAddress[];
}

export interface TargetRules {
  network: SandboxPolicy["network"];
  internal: InternalAllowList;
  lookup: HostLookup;
  /** Aborts the fetch: the lookup is told to stop, and the fetch does not wait for it. */
  signal: AbortSignal;
  /** The Anima whose fetch this is, and the lookups outstanding per Anima and on the host. */
  anima: string;
  lookups: LookupShares;
}

/** Most resolver answers kept: more only slows connection fallback down. */
const MAX_ANSWERS = 16;

export async function checkTarget(url: URL, rules: TargetRules, label: string): Promise<CheckedTarget> {
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw deny(`${label}: the scheme "${url.protocol.replace(/:$/, "")}" is not allowed (only http and https)`);
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1").replace(/\.+$/, "");
  if (host === "") throw new ToolHostError("InvalidArguments", `${label}: the URL has no host`);
  const { network } = rules;
  if (network.mode === "none") {
    throw denyByOperator(`${label}: network access is disabled for this Anima (sandbox.network is "none")`, NETWORK_OFF_HINT);
  }
  const port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port);
  if (network.mode === "allowlist" && !network.hosts.some((entry) => allowEntryMatches(host, port, entry))) {
    throw denyByOperator(
      `${label}: the host "${shown(host)}" (port ${port}) is not in this Anima's network allowlist`,
      `an operator can add "${shown(host)}" to "sandbox.network": {"allow": [...]} in the Anima's permissions.json`,
    );
  }
  if (BAD_PORTS.has(port)) throw deny(`${label}: port ${port} is refused (it belongs to a non-HTTP service)`);

  const family = isIP(host);
  if (family !== 0) {
    const reason = nonPublicReason(host);
    if (reason !== undefined && !rules.internal.allowsAddress(host)) throw denyInternal(`${label}: ${shown(host)} is a ${reason} address`);
    refuseCredentials(url, label);
    return { host, port, addresses: [{ address: host, family: family as 4 | 6 }] };
  }

  const operatorName = rules.internal.allowsName(host);
  if (!operatorName) {
    const reason = blockedNameReason(host);
    if (reason !== undefined) throw denyInternal(`${label}: "${shown(host)}" is ${reason}`);
  }
  refuseCredentials(url, label);
  // A trailing dot makes the name absolute: the resolver's search domains are never appended to it.
  // Operator-allowed names are looked up as written (they may be single-label /etc/hosts names, or
  // names under the resolver's search domains). Checked as untrusted: a lookup (the system's, or one
  // given for tests) may answer anything. The lookup holds its place in the shares until it settles.
  const answers: unknown = await withAbort(
    rules.lookups.hold(rules.anima, label, () => rules.lookup(operatorName ? host : `${host}.`, rules.signal)),
    rules.signal,
  ).catch((error: unknown) => {
    if (error instanceof ToolHostError) throw error;
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    const missing = code === "ENOTFOUND" || code === "ENODATA" || code === "EAI_NONAME";
    throw new ToolHostError(
      "ExecutionError",
      `${label}: the host "${shown(host)}" ${missing ? "was not found" : `could not be resolved (${code ?? "error"})`}`,
    );
  });
  if (!Array.isArray(answers) || answers.length === 0) {
    throw new ToolHostError("ExecutionError", `${label}: the host "${shown(host)}" has no addresses`);
  }
  const addresses: ResolvedAddress[] = [];
  for (const answer of (answers as unknown[]).slice(0, MAX_ANSWERS)) {
    const claimed = (answer as { address?: unknown } | null | undefined)?.address;
    const address = typeof claimed === "string" ? claimed : "";
    const kind = isIP(address);
    if (kind === 0) throw deny(`${label}: the host "${shown(host)}" resolved to something that is not an IP address`);
    if (operatorName ? rules.internal.blocksMetadata(address) : nonPublicReason(address) !== undefined && !rules.internal.allowsAddress(address)) {
      // The reason (loopback, private …) says why without revealing the address itself.
      const message = `${label}: the host "${shown(host)}" resolves to a ${nonPublicReason(address) ?? "non-public"} address`;
      throw operatorName ? deny(message) : denyInternal(message);
    }
    if (!addresses.some((a) => a.address === address)) addresses.push({ address, family: kind as 4 | 6 });
  }
  return { host, port, addresses };
}

/**
 * A URL with credentials (user:password@) is refused, as WHATWG fetch does: the tool should send an
 * Authorization header it chose explicitly. Checked after the host rules, so `http://x@10.0.0.1/` is
 * reported (and audited) as the address violation it is.
 */
function refuseCredentials(url: URL, label: string): void {
  if (url.username !== "" || url.password !== "") {
    throw new ToolHostError("InvalidArguments", `${label}: URLs with credentials (user:password@) are not accepted; send an Authorization header`);
  }
}

/** A refusal no setting lifts (a scheme, a port, a metadata address): the tool reached for what it may not. */
function deny(message: string): ToolHostError {
  return new ToolHostError("SandboxViolation", message);
}

/**
 * A refusal by a policy only the operator can change (the Anima's `sandbox.network`, `allow_internal_hosts`):
 * its fault is the host's, so that nobody is sent to fix a tool for a policy matter.
 */
function denyByOperator(message: string, hint: string): ToolHostError {
  return new ToolHostError("SandboxViolation", message, hint, "host");
}

/** A refusal the operator can lift for an internal service (never for cloud metadata addresses). */
function denyInternal(message: string): ToolHostError {
  return denyByOperator(message, INTERNAL_HOSTS_HINT);
}

/** The Anima's network is off: only its permissions.json sets that (the markdown form has no sandbox section). */
const NETWORK_OFF_HINT = 'an operator can set "sandbox.network" to "public" or {"allow": ["api.example.com"]} in the Anima\'s permissions.json';

export const INTERNAL_HOSTS_HINT =
  'tools reach only public addresses; an operator can allow an internal service with "allow_internal_hosts" in the "animaworks_tool" section of the data dir\'s config.json (or $ANIMAWORKS_ALLOW_INTERNAL_HOSTS)';

function shown(host: string): string {
  return host.length > 100 ? `${host.slice(0, 100)}…` : host;
}

/**
 * The name lookups outstanding, per Anima and on the host. A lookup holds its place from its start
 * until it settles, not until its fetch ends: one whose fetch (or call) ended still holds it until
 * it is answered or cancelled, so that no Anima can leave the host more lookups to finish than its
 * share, however short its fetches (the system resolver cancels at once; an injected lookup may not).
 * Over its share a fetch is refused (`SandboxViolation`, the tool's); over the host's limit, `Busy`.
 */
export class LookupShares {
  private readonly animas = new Map<string, number>();
  private total = 0;

  constructor(
    private readonly maxPerAnima: number,
    private readonly maxPerHost: number,
  ) {}

  /** Starts `lookup` in a place of `anima`'s, or rejects at once when there is none. */
  hold<T>(anima: string, label: string, lookup: () => Promise<T>): Promise<T> {
    const mine = this.animas.get(anima) ?? 0;
    if (mine >= this.maxPerAnima) {
      return Promise.reject(
        new ToolHostError(
          "SandboxViolation",
          `${label}: this Anima already has ${mine} name lookups outstanding, the most it may have (lookups of fetches that ended count until they stop)`,
          "resolve fewer names at once",
        ),
      );
    }
    if (this.total >= this.maxPerHost) {
      return Promise.reject(
        new ToolHostError("Busy", `${label}: the host already has ${this.total} name lookups outstanding, the most it takes on`, "retry shortly", "host"),
      );
    }
    this.animas.set(anima, mine + 1);
    this.total++;
    const running = Promise.resolve().then(lookup);
    const release = () => {
      this.total--;
      const left = (this.animas.get(anima) ?? 1) - 1;
      if (left === 0) this.animas.delete(anima);
      else this.animas.set(anima, left);
    };
    running.then(release, release);
    return running;
  }

  /** Lookups outstanding: of one Anima, or on the host. */
  outstanding(anima?: string): number {
    return anima === undefined ? this.total : (this.animas.get(anima) ?? 0);
  }
}

/** Settles with `promise`, or rejects with the signal's reason as soon as it aborts. */
export function withAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
