import { join } from "node:path";
import { readTextFileIfPresent, unreadableReason } from "../regular-file.js";
import { classifyCredentialName } from "./resolver.js";
import { type CredentialSource, isJsonObject, ownValue } from "./store.js";
import { SHARED_SECTION, Vault } from "./vault.js";

/**
 * Which credential NAMES exist where (for `audit`'s least-privilege report): config.json's `credentials`,
 * vault.json's sections, shared/credentials.json and the allowed environment. Never a value: the vault is
 * listed, not decrypted, and a value is only looked at to tell an empty one (which reads as missing) apart.
 * A source that cannot be read is reported as a problem and lists nothing.
 */
export interface CredentialEntry {
  /** The name a lookup uses: a config.json credential name, or the variable-style key of the other sources. */
  name: string;
  source: CredentialSource;
  /** `shared`: any Anima may read it; `own`: only the Anima it names (`NAME__anima`, or its vault section). */
  scope: "shared" | "own";
  /** Where exactly, e.g. `vault.json [alice]`, `config.json credentials.slack (api_key, bot_token)`. */
  location: string;
  /** False for an allowed environment variable that is not set: a grant nothing can use. */
  set: boolean;
}

export interface CredentialInventory {
  /** Every entry, whoever may read it. */
  entries: CredentialEntry[];
  /** Sources that could not be read (their names are unknown), e.g. a config.json that is not JSON. */
  problems: string[];
}

/** Largest credential file read, bytes (as the stores read them). */
const MAX_FILE_BYTES = 4 * 1024 * 1024;

export async function credentialInventory(
  dataDir: string,
  environment: { allowed: readonly string[]; set: Readonly<Record<string, string>> },
): Promise<CredentialInventory> {
  const entries: CredentialEntry[] = [];
  const problems: string[] = [];
  const config = await readJsonObject(join(dataDir, "config.json"), "config.json", problems);
  const credentials = config && ownValue(config, "credentials");
  if (isJsonObject(credentials)) {
    for (const [name, entry] of Object.entries(credentials)) {
      if (!isJsonObject(entry)) continue;
      const keys = [...(ownValue(entry, "api_key") !== undefined ? ["api_key"] : []), ...Object.keys(asObject(ownValue(entry, "keys")))];
      if (keys.length === 0) continue;
      entries.push({ name, source: "config.json", scope: scopeOf(name), location: `config.json credentials.${name} (${keys.join(", ")})`, set: true });
    }
  }
  // The vault's names are its keys; only the shared section and an Anima's own section are ever read.
  const vault = new Vault(dataDir);
  for (const section of await vault.sections()) {
    for (const key of await vault.list(section)) {
      const scope = section === SHARED_SECTION ? scopeOf(key) : "own";
      entries.push({ name: key, source: "vault.json", scope, location: `vault.json [${section}]`, set: true });
    }
  }
  const legacy = await readJsonObject(join(dataDir, "shared", "credentials.json"), "shared/credentials.json", problems);
  for (const [key, value] of Object.entries(legacy ?? {})) {
    if (typeof value === "string")
      entries.push({ name: key, source: "shared/credentials.json", scope: scopeOf(key), location: "shared/credentials.json", set: value !== "" });
  }
  for (const variable of environment.allowed) {
    const set = Object.hasOwn(environment.set, variable) && environment.set[variable] !== "";
    entries.push({ name: variable, source: "environment", scope: scopeOf(variable), location: "allowed_environment", set });
  }
  return { entries, problems };
}

/** The entries one Anima may read: shared names, and names and vault sections of its own. */
export function readableBy(inventory: CredentialInventory, anima: string): CredentialEntry[] {
  return inventory.entries.filter((entry) => {
    if (entry.source === "vault.json" && entry.location !== `vault.json [${SHARED_SECTION}]`) {
      return anima !== SHARED_SECTION && entry.location === `vault.json [${anima}]` && classifyCredentialName(entry.name, anima) !== "denied";
    }
    return classifyCredentialName(entry.name, anima) !== "denied";
  });
}

function scopeOf(name: string): "shared" | "own" {
  return name.includes("__") ? "own" : "shared";
}

function asObject(value: unknown): Record<string, unknown> {
  return isJsonObject(value) ? value : {};
}

/** The file's top-level object; a problem without any of its text (V8's JSON errors quote the text, which may hold a secret). */
async function readJsonObject(path: string, label: string, problems: string[]): Promise<Record<string, unknown> | undefined> {
  let text: string | undefined;
  try {
    text = await readTextFileIfPresent(path, MAX_FILE_BYTES);
  } catch (error) {
    problems.push(`${label} ${unreadableReason(error)}`);
    return undefined;
  }
  if (text === undefined || text.trim() === "") return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    problems.push(`${label} is not valid JSON`);
    return undefined;
  }
  if (isJsonObject(parsed)) return parsed;
  problems.push(`${label} is not a JSON object`);
  return undefined;
}
