import type { LogRecord } from "../host-options.js";

/**
 * The seam between credential resolution and the places credentials live (docs/design.md §7). One contract
 * test suite (test/credentials/contract.ts) holds every implementation to the promises below.
 *
 * A scope is where a value is filed, never something a tool chooses: `shared` holds host-wide values
 * (config.json, the vault's `shared` section, shared/credentials.json, the allowed environment);
 * `anima` holds one Anima's own values (the vault's per-Anima section). The resolver derives the anima
 * scope from the host-side caller, so a tool cannot name another Anima's scope.
 */
export type CredentialScope = { readonly kind: "shared" } | { readonly kind: "anima"; readonly anima: string };

export const SHARED_SCOPE: CredentialScope = Object.freeze({ kind: "shared" });

export function animaScope(anima: string): CredentialScope {
  return Object.freeze({ kind: "anima", anima });
}

/** Where a value came from, as written in audit records (see `AuditEvent` kind "credential"). */
export type CredentialSource = "config.json" | "vault.json" | "shared/credentials.json" | "environment";

/**
 * Promises every implementation keeps:
 * - a key that is not stored resolves to `undefined` — including names of `Object.prototype` members
 *   (`__proto__`, `constructor`, `toString`): stores look keys up as own entries only;
 * - an empty stored string resolves to `undefined` (AnimaWorks treats empty as missing);
 * - a stored non-empty string resolves to exactly that string; keys match exactly (no case folding,
 *   no Unicode normalisation), so a look-alike key is a different key;
 * - a value filed in one scope is never returned for another scope; stores do not fall back between
 *   scopes (falling back is the resolver's decision, made in the open);
 * - a source that is absent or degraded per AnimaWorks' rules resolves to `undefined`; `get` rejects
 *   only when the operator's configuration is broken in a way that must not be skipped silently
 *   (a `ToolHostError` of type `ToolConfigError`).
 */
export interface CredentialStore {
  readonly source: CredentialSource;
  get(scope: CredentialScope, key: string): Promise<string | undefined>;
}

/** Receives the credential layer's warnings and masked debug lines. */
export type CredentialLog = (record: LogRecord) => void;

export const SILENT_LOG: CredentialLog = () => {};

export function hostLog(log: CredentialLog, level: LogRecord["level"], message: string, anima?: string): void {
  log(anima === undefined ? { level, logger: "animaworks.host", message } : { level, logger: "animaworks.host", message, anima });
}

/**
 * The key config.json credentials are looked up by: a credential name and a key name ("api_key" reads
 * `credentials.<name>.api_key`, anything else `credentials.<name>.keys[<keyName>]`). Encoded as a JSON
 * pair rather than `name.key` because both parts may contain dots.
 */
export function configCredentialKey(credentialName: string, keyName = "api_key"): string {
  return JSON.stringify([credentialName, keyName]);
}

export function parseConfigCredentialKey(key: string): { credentialName: string; keyName: string } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(key);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) return undefined;
  const [credentialName, keyName] = parsed as unknown[];
  return typeof credentialName === "string" && typeof keyName === "string" ? { credentialName, keyName } : undefined;
}

/** True for a JSON object (not null, not an array). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An own property of parsed JSON, never one inherited from `Object.prototype`. */
export function ownValue(record: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/** An own, non-empty string property; anything else counts as missing. */
export function ownNonEmptyString(record: Record<string, unknown>, key: string): string | undefined {
  const value = ownValue(record, key);
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** The four places `getCredential` consults, in the order of docs/design.md §7. */
export interface CredentialSources {
  readonly config: CredentialStore;
  readonly vault: CredentialStore;
  readonly legacy: CredentialStore;
  /** `allows` tells a variable the operator did not allow from one that is unset (for the error's hint). */
  readonly environment: CredentialStore & { allows?(name: string): boolean };
}
