import { join } from "node:path";
import { ToolHostError } from "../errors.js";
import {
  type CredentialLog,
  type CredentialScope,
  type CredentialSources,
  type CredentialStore,
  SILENT_LOG,
  hostLog,
  isJsonObject,
  ownNonEmptyString,
  ownValue,
  parseConfigCredentialKey,
} from "./store.js";
import { SHARED_SECTION, Vault } from "./vault.js";
import { readTextFileIfPresent, unreadableReason } from "../regular-file.js";
import { jsonSyntaxProblem } from "../json-syntax.js";

/** Largest credential file read (config.json, shared/credentials.json), bytes: a FIFO or a device there must not hold the host. */
const MAX_CREDENTIAL_FILE_BYTES = 4 * 1024 * 1024;

/**
 * `config.json` → `credentials.<name>.api_key` or `credentials.<name>.keys[<keyName>]` (docs/animaworks-reference.md §1.5).
 * Shared scope only; keys are `configCredentialKey(name, keyName)`. Read on every lookup, so an operator's
 * edit takes effect without a restart (AnimaWorks reloads on mtime change). A `{"$vault": "KEY"}` value
 * is resolved from the vault's `shared` section; a reference to a missing key is a configuration error,
 * as is a config.json that exists but cannot be parsed — AnimaWorks refuses to load such a config, and
 * silently falling through to another source could hand a tool a different secret than the operator set.
 */
export class ConfigCredentialStore implements CredentialStore {
  readonly source = "config.json" as const;

  constructor(
    readonly configPath: string,
    private readonly options: { vault?: Vault } = {},
  ) {}

  async get(scope: CredentialScope, key: string): Promise<string | undefined> {
    if (scope.kind !== "shared") return undefined;
    const wanted = parseConfigCredentialKey(key);
    if (wanted === undefined) return undefined;
    const config = await this.readConfig();
    const credentials = presentObject(ownValue(config, "credentials"), "credentials");
    const entry = presentObject(credentials && ownValue(credentials, wanted.credentialName), `credentials.${wanted.credentialName}`);
    if (entry === undefined) return undefined;
    const path = `credentials.${wanted.credentialName}.${wanted.keyName}`;
    if (wanted.keyName === "api_key") return this.valueAt(ownValue(entry, "api_key"), path);
    const keys = presentObject(ownValue(entry, "keys"), `credentials.${wanted.credentialName}.keys`);
    return keys === undefined ? undefined : this.valueAt(ownValue(keys, wanted.keyName), path);
  }

  private async readConfig(): Promise<Record<string, unknown>> {
    let text: string | undefined;
    try {
      text = await readTextFileIfPresent(this.configPath, MAX_CREDENTIAL_FILE_BYTES);
    } catch (error) {
      throw invalidConfig(unreadableReason(error));
    }
    if (text === undefined) return {};
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw invalidConfig(`is not valid JSON (${jsonSyntaxProblem(error)})`);
    }
    if (!isJsonObject(parsed)) throw invalidConfig("is not a JSON object");
    return parsed;
  }

  private async valueAt(raw: unknown, path: string): Promise<string | undefined> {
    if (raw === undefined || raw === null) return undefined;
    if (typeof raw === "string") return raw === "" ? undefined : raw;
    if (isJsonObject(raw) && Object.keys(raw).length === 1 && Object.hasOwn(raw, "$vault")) return this.fromVault(raw["$vault"], path);
    throw invalidConfig(`${path} must be a string or a {"$vault": "KEY"} reference`);
  }

  private async fromVault(reference: unknown, path: string): Promise<string | undefined> {
    if (typeof reference !== "string" || reference.trim() === "") throw invalidConfig(`${path}: a $vault reference must contain a non-empty string key`);
    const vault = this.options.vault;
    if (vault === undefined) throw invalidConfig(`${path} refers to the vault, but no vault is configured`);
    const value = await vault.get(SHARED_SECTION, reference);
    if (value === undefined) throw invalidConfig(`${path} refers to vault key '${reference}', which is not in vault.json's shared section`);
    return value === "" ? undefined : value;
  }
}

function invalidConfig(problem: string): ToolHostError {
  return new ToolHostError("ToolConfigError", `config.json ${problem}`, "fix config.json in the data dir");
}

/** An optional object along the config path: absent/null → undefined, an object → itself, else broken. */
function presentObject(value: unknown, path: string): Record<string, unknown> | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isJsonObject(value)) throw invalidConfig(`${path} must be an object`);
  return value;
}

/**
 * The vault as a credential store: the shared scope is the `shared` section, an Anima's scope is the
 * section named after it. An Anima called "shared" has no section of its own (its name would alias the
 * shared section). Any vault failure counts as absent (docs/animaworks-reference.md §6); the Vault has already warned.
 */
export class VaultCredentialStore implements CredentialStore {
  readonly source = "vault.json" as const;

  constructor(
    readonly vault: Vault,
    private readonly log: CredentialLog = SILENT_LOG,
  ) {}

  async get(scope: CredentialScope, key: string): Promise<string | undefined> {
    const section = scope.kind === "shared" ? SHARED_SECTION : scope.anima === SHARED_SECTION ? undefined : scope.anima;
    if (section === undefined) return undefined;
    try {
      const value = await this.vault.get(section, key);
      return value === "" ? undefined : value;
    } catch (error) {
      hostLog(this.log, "warn", `vault lookup failed, treating it as absent: ${(error as Error).message}`);
      return undefined;
    }
  }
}

/**
 * Legacy `shared/credentials.json`: a flat `{ "ENV_NAME": "value" }` (docs/animaworks-reference.md §1.7). Shared scope only.
 * A blank file is an empty store without a word; invalid JSON or a non-object is warned about (once per
 * problem, since it is read on every lookup) and treated as empty.
 */
export class LegacyCredentialStore implements CredentialStore {
  readonly source = "shared/credentials.json" as const;
  private lastWarning: string | undefined;

  constructor(
    readonly path: string,
    private readonly log: CredentialLog = SILENT_LOG,
  ) {}

  async get(scope: CredentialScope, key: string): Promise<string | undefined> {
    if (scope.kind !== "shared") return undefined;
    const data = await this.read();
    return data === undefined ? undefined : ownNonEmptyString(data, key);
  }

  private async read(): Promise<Record<string, unknown> | undefined> {
    let text: string | undefined;
    try {
      text = await readTextFileIfPresent(this.path, MAX_CREDENTIAL_FILE_BYTES);
    } catch (error) {
      this.warn(unreadableReason(error));
      return undefined;
    }
    if (text === undefined || text.trim() === "") return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      this.warn(`is not valid JSON (${jsonSyntaxProblem(error)})`);
      return undefined;
    }
    if (!isJsonObject(parsed)) {
      this.warn("is not a JSON object");
      return undefined;
    }
    this.lastWarning = undefined;
    return parsed;
  }

  private warn(problem: string): void {
    const message = `${this.path} ${problem}; ignoring it`;
    if (message === this.lastWarning) return;
    this.lastWarning = message;
    hostLog(this.log, "warn", message);
  }
}

/**
 * The environment variables the operator allows tools to read. The host hands in a snapshot (only
 * src/config.ts reads `process.env`) and the list of allowed names; anything not named exactly is
 * invisible, so a tool cannot fish for `AWS_SECRET_ACCESS_KEY` or the host's own settings. The snapshot
 * is copied at construction: later changes to the object handed in do not leak through.
 */
export class EnvironmentCredentialStore implements CredentialStore {
  readonly source = "environment" as const;
  private readonly values = new Map<string, string>();
  private readonly allowed: ReadonlySet<string>;

  constructor(options: { variables: Readonly<Record<string, string | undefined>>; allowed: readonly string[] }) {
    this.allowed = new Set(options.allowed);
    for (const name of options.allowed) {
      const value = ownValue(options.variables, name);
      if (typeof value === "string" && value !== "") this.values.set(name, value);
    }
  }

  async get(scope: CredentialScope, key: string): Promise<string | undefined> {
    return scope.kind === "shared" ? this.values.get(key) : undefined;
  }

  /** Whether the operator allows tools to read the variable (its value may still be unset). */
  allows(name: string): boolean {
    return this.allowed.has(name);
  }
}

export interface CredentialSourceOptions {
  /** A snapshot of the host's environment (built by src/config.ts). Default: empty. */
  environment?: Readonly<Record<string, string | undefined>>;
  /** Environment variable names tools may read, exactly. Default: none. */
  allowedEnvironment?: readonly string[];
  log?: CredentialLog;
}

/** The standard sources of a data dir (docs/design.md §2), plus the Vault for callers that also write to it. */
export function openCredentialSources(dataDir: string, options: CredentialSourceOptions = {}): CredentialSources & { vaultFile: Vault } {
  const log = options.log ?? SILENT_LOG;
  const vaultFile = new Vault(dataDir, { log });
  return {
    config: new ConfigCredentialStore(join(dataDir, "config.json"), { vault: vaultFile }),
    vault: new VaultCredentialStore(vaultFile, log),
    legacy: new LegacyCredentialStore(join(dataDir, "shared", "credentials.json"), log),
    environment: new EnvironmentCredentialStore({ variables: options.environment ?? {}, allowed: options.allowedEnvironment ?? [] }),
    vaultFile,
  };
}
