import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sha256 } from "../bundling/sha256.js";
import { canonicalJson } from "../canonical-json.js";
import type { HostConfig } from "../config.js";
import { withLockIfFree } from "../file-lock.js";
import { loadPermissionsSync } from "../policy/permissions.js";
import { type AuditEvent, isoTimestamp } from "./audit-log.js";
import { effectiveSettings } from "./effective-config.js";

/**
 * Policy over time: the policy in force, as a hash, and a `policy_change` record (old → new) whenever it
 * differs from the last one any host of this data dir saw.
 *
 * Two parts, each hashed on its own (the first 64 bits of the SHA-256 of its canonical JSON, hex):
 * - an Anima's permissions (permissions.json / permissions.md / defaults, or the problem that makes the file
 *   invalid), checked when a host first serves the Anima, on each denial, and by `audit` for every Anima —
 *   so a change made while no host ran is recorded at the next start or report;
 * - the operator's settings from the `animaworks_tool` section of config.json (only those: a flag or an
 *   environment variable of one shell is not the operator's policy), checked when a host starts.
 * A denial carries `<permissions hash>.<operator hash>`: each half is the `to` of the change that set it.
 *
 * The last seen policies are kept in `<audit dir>/policy-snapshot.json`, updated under a lock so that of
 * several hosts noticing one change exactly one records it. A change is recorded when noticed; `changedAt`
 * is the file's modification time.
 */

/** Longest policy JSON kept in a record; a larger one is cut (the hash is of the whole). */
const MAX_POLICY_JSON_CHARS = 4_000;
const SNAPSHOT_LOCK_WAIT_MS = 2_000;

interface Snapshot {
  operator?: { hash: string; policy: string };
  animas: Record<string, { hash: string; policy: string }>;
}

export function policyHash(json: string): string {
  return sha256(json).slice(0, 16);
}

/** The operator's policy as recorded: the config.json section's settings (secrets masked as `audit` shows them). */
export function operatorPolicyJson(config: HostConfig): string {
  const fromFile = effectiveSettings(config).filter((setting) => setting.source === "file");
  return canonicalJson(Object.fromEntries(fromFile.map((setting) => [setting.key, setting.value])));
}

export function permissionsPolicyJson(animaDir: string): string {
  try {
    const permissions = loadPermissionsSync(animaDir);
    return canonicalJson({ source: permissions.source, toolCreation: permissions.toolCreation, sandbox: permissions.sandbox });
  } catch (error) {
    // A broken file is a policy too (everything that depends on it is refused).
    return canonicalJson({ invalid: error instanceof Error ? error.message : String(error) });
  }
}

export class PolicyLedger {
  private readonly snapshotFile: string;
  private operatorHash: string | undefined;
  /** Each Anima's permissions hash as this host last saw it: a denial's lookup costs a read, not a record. */
  private readonly seen = new Map<string, string>();
  /** Checks under way: a closing host waits for them, so that no change is marked seen without its record. */
  private readonly running = new Set<Promise<unknown>>();

  constructor(
    private readonly config: HostConfig,
    private readonly append: (event: AuditEvent) => void,
  ) {
    this.snapshotFile = join(config.auditDir, "policy-snapshot.json");
  }

  /** The operator's settings: recorded if they changed since any host last looked. */
  async checkOperator(): Promise<string> {
    const json = operatorPolicyJson(this.config);
    const hash = policyHash(json);
    if (hash !== this.operatorHash) {
      await this.update((snapshot) => {
        const before = snapshot.operator;
        if (before?.hash === hash) return false;
        snapshot.operator = { hash, policy: json };
        this.append(changeEvent(undefined, "operator", before, hash, json, mtimeOf(this.config.operator.file)));
        return true;
      });
      this.operatorHash = hash;
    }
    return hash;
  }

  /** An Anima's permissions: recorded if they changed since any host last looked; returns the hash in force. */
  async checkAnima(anima: string): Promise<string> {
    const animaDir = join(this.config.dataDir, "animas", anima);
    const json = permissionsPolicyJson(animaDir);
    const hash = policyHash(json);
    if (this.seen.get(anima) !== hash) {
      await this.update((snapshot) => {
        const before = snapshot.animas[anima];
        if (before?.hash === hash) return false;
        snapshot.animas[anima] = { hash, policy: json };
        this.append(
          changeEvent(anima, "permissions", before, hash, json, mtimeOf(join(animaDir, "permissions.json")) ?? mtimeOf(join(animaDir, "permissions.md"))),
        );
        return true;
      });
      this.seen.set(anima, hash);
    }
    return hash;
  }

  /**
   * What a denial carries: `<permissions hash>.<operator hash>` of the policy in force at the denial — the
   * Anima's permissions read now (a denial is rare; a few tens of µs), the operator's as this host started
   * with them. A change not yet recorded is recorded right after (its `to` is this hash). Undefined only if
   * the operator's settings were never hashed (the host's start check has not run).
   */
  policyOf(anima: string): string | undefined {
    let permissions: string;
    try {
      permissions = policyHash(permissionsPolicyJson(join(this.config.dataDir, "animas", anima)));
    } catch {
      return undefined;
    }
    if (this.seen.get(anima) !== permissions) void this.recheck(anima);
    const operator = this.operatorHash ?? policyHash(operatorPolicyJson(this.config));
    return `${permissions}.${operator}`;
  }

  /** Checks again; never throws (a failed check is retried by the next). */
  recheck(anima: string): Promise<void> {
    return this.track(this.checkAnima(anima));
  }

  /** Checks the operator's settings; never throws. */
  recheckOperator(): Promise<void> {
    return this.track(this.checkOperator());
  }

  /** Resolves when every check started so far has ended. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }

  private track(check: Promise<unknown>): Promise<void> {
    const done = check.then(
      () => undefined,
      () => undefined,
    );
    this.running.add(done);
    void done.then(() => this.running.delete(done));
    return done;
  }

  private async update(change: (snapshot: Snapshot) => boolean): Promise<void> {
    mkdirSync(this.config.auditDir, { recursive: true });
    // Given up after the wait: another host is recording, and the next check sees what it recorded.
    await withLockIfFree(
      `${this.snapshotFile}.lock`,
      () => {
        const snapshot = readSnapshot(this.snapshotFile);
        if (!change(snapshot)) return;
        writeFileSync(`${this.snapshotFile}.tmp`, JSON.stringify(snapshot), { mode: 0o600 });
        renameSync(`${this.snapshotFile}.tmp`, this.snapshotFile);
      },
      { waitMs: SNAPSHOT_LOCK_WAIT_MS, retryMs: 5 },
    );
  }
}

function readSnapshot(file: string): Snapshot {
  try {
    const parsed = JSON.parse(readFileSync(file, "utf8")) as Partial<Snapshot>;
    return { ...(parsed.operator ? { operator: parsed.operator } : {}), animas: parsed.animas ?? {} };
  } catch {
    return { animas: {} };
  }
}

function changeEvent(
  anima: string | undefined,
  scope: "permissions" | "operator",
  before: { hash: string; policy: string } | undefined,
  to: string,
  after: string,
  changedAt: string | undefined,
): AuditEvent {
  const cut = (json: string) => (json.length > MAX_POLICY_JSON_CHARS ? `${json.slice(0, MAX_POLICY_JSON_CHARS)}…` : json);
  return {
    kind: "policy_change",
    ...(anima !== undefined ? { anima } : {}),
    scope,
    ...(before ? { from: before.hash, before: cut(before.policy) } : {}),
    to,
    after: cut(after),
    ...(changedAt !== undefined ? { changedAt } : {}),
  };
}

function mtimeOf(file: string): string | undefined {
  try {
    return isoTimestamp(statSync(file).mtime);
  } catch {
    return undefined;
  }
}
