import { mkdir, open, rename, stat, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import type sodiumType from "libsodium-wrappers";

/**
 * libsodium (a WebAssembly build) is loaded on first use: a process that never touches the vault — most
 * one-shot tool calls — does not pay for it.
 */
let sodiumPromise: Promise<typeof sodiumType> | undefined;
function loadSodium(): Promise<typeof sodiumType> {
  sodiumPromise ??= import("libsodium-wrappers").then(async (module) => {
    const sodium = (module as unknown as { default: typeof sodiumType }).default ?? module;
    await sodium.ready;
    return sodium;
  });
  return sodiumPromise;
}
import { ToolHostError } from "../errors.js";
import { type CredentialLog, SILENT_LOG, hostLog, isJsonObject, ownValue } from "./store.js";
import { readTextFileIfPresent, unreadableReason } from "../regular-file.js";
import { jsonSyntaxProblem } from "../json-syntax.js";

/** Largest vault.json read, bytes: a FIFO or a device there must not hold the host. */
const MAX_VAULT_BYTES = 16 * 1024 * 1024;
/** Largest vault.key read, bytes (a key is 44 base64 characters). */
const MAX_VAULT_KEY_BYTES = 64 * 1024;

/**
 * AnimaWorks' credential vault, byte-compatible with `core/config/vault.py` (docs/animaworks-reference.md §1.6):
 * - `vault.key`: base64 of a 32-byte Curve25519 private key, then a newline; mode 0600.
 * - `vault.json`: `{ "<section>": { "<key>": "<base64 sealed box>" } }`, 2-space indented, mode 0600.
 * - a value is `base64(crypto_box_seal(utf8(plaintext), publicKeyOf(privateKey)))` — the libsodium
 *   sealed box PyNaCl's `SealedBox` produces, so either side reads what the other wrote.
 *
 * Reading degrades the way AnimaWorks does, so an operator's existing files keep working: a value that
 * does not decrypt is returned as stored (legacy plaintext), empty strings pass through, without a key
 * file values are returned as stored, and an unreadable or corrupt vault.json reads as empty (warned).
 *
 * Writing is deliberately stricter than AnimaWorks: without a usable key `store` refuses instead of
 * writing plaintext, and a vault.json that exists but cannot be parsed is never overwritten (AnimaWorks
 * would replace it with `{}` plus the new value, losing every other secret).
 */

export const SHARED_SECTION = "shared";

interface KeyPair {
  privateKey: Uint8Array;
  publicKey: Uint8Array;
}

type LoadedVault =
  | { state: "absent"; data: Record<string, unknown> }
  | { state: "ok"; data: Record<string, unknown> }
  | { state: "corrupt"; data: Record<string, unknown>; problem: string };

const PRIVATE_KEY_BYTES = 32;
const FILE_MODE = 0o600;
const utf8Strict = new TextDecoder("utf-8", { fatal: true });

/**
 * Writes to one vault.json are serialised per path within this process, so two `store` calls never
 * lose each other's update. Other processes are not coordinated (nor are they in AnimaWorks).
 */
const writeChains = new Map<string, Promise<unknown>>();

export class Vault {
  readonly keyPath: string;
  readonly vaultPath: string;
  private readonly log: CredentialLog;
  private keyPair: KeyPair | undefined;
  /** Each distinct warning is logged once per Vault: these are read on every credential lookup. */
  private readonly warned = new Set<string>();

  constructor(dataDir: string, options: { log?: CredentialLog } = {}) {
    this.keyPath = join(dataDir, "vault.key");
    this.vaultPath = join(dataDir, "vault.json");
    this.log = options.log ?? SILENT_LOG;
  }

  async hasKey(): Promise<boolean> {
    return (await this.loadKey()) !== undefined;
  }

  /** Creates vault.key (mode 0600). Refuses when one exists, as AnimaWorks does: replacing it would orphan every stored value. */
  async generateKey(): Promise<void> {
    const sodium = await loadSodium();
    await mkdir(dirname(this.keyPath), { recursive: true });
    const pair = sodium.crypto_box_keypair();
    // "wx" makes the existence check and the creation one step, so two racing generators cannot both win.
    const handle = await open(this.keyPath, "wx", FILE_MODE).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "EEXIST") throw new ToolHostError("ToolConfigError", `vault key already exists: ${this.keyPath}`);
      throw error;
    });
    try {
      try {
        await handle.writeFile(`${sodium.to_base64(pair.privateKey, sodium.base64_variants.ORIGINAL)}\n`, "utf8");
        await handle.sync();
      } finally {
        await handle.close();
      }
    } catch (error) {
      // A truncated key file would block every later attempt ("already exists") while being unusable.
      await unlink(this.keyPath).catch(() => undefined);
      throw error;
    }
    this.keyPair = { privateKey: pair.privateKey, publicKey: pair.publicKey };
  }

  /** Seals `plaintext` for this vault's key. Empty stays empty. Throws without a usable key. */
  async encrypt(plaintext: string): Promise<string> {
    if (plaintext === "") return plaintext;
    const pair = await this.loadKey();
    if (pair === undefined) {
      throw new ToolHostError(
        "ToolConfigError",
        `cannot encrypt: no usable vault key at ${this.keyPath}`,
        "create one with the host's vault key command, or restore the operator's vault.key",
      );
    }
    const sodium = await loadSodium();
    const sealed = sodium.crypto_box_seal(sodium.from_string(plaintext), pair.publicKey);
    return sodium.to_base64(sealed, sodium.base64_variants.ORIGINAL);
  }

  /** Opens a stored value; anything that is not a sealed box for this key is returned unchanged. */
  async decrypt(stored: string): Promise<string> {
    if (stored === "") return stored;
    const pair = await this.loadKey();
    if (pair === undefined) return stored;
    const sodium = await loadSodium();
    let sealed: Uint8Array;
    try {
      sealed = sodium.from_base64(stored, sodium.base64_variants.ORIGINAL);
    } catch {
      return stored;
    }
    if (sealed.length < sodium.crypto_box_SEALBYTES) return stored;
    try {
      return utf8Strict.decode(sodium.crypto_box_seal_open(sealed, pair.publicKey, pair.privateKey));
    } catch {
      // Legacy plaintext that happens to be valid base64, or a value sealed for another key.
      return stored;
    }
  }

  /** The decrypted value, or undefined when the section or key is absent or not a string. */
  async get(section: string, key: string): Promise<string | undefined> {
    const { data } = await this.load();
    const stored = sectionEntry(data, section, key);
    return typeof stored === "string" ? this.decrypt(stored) : undefined;
  }

  /** Keys of one section whose values are strings, in file order. */
  async list(section: string): Promise<string[]> {
    const { data } = await this.load();
    const entries = ownValue(data, section);
    if (!isJsonObject(entries)) return [];
    return Object.keys(entries).filter((key) => typeof entries[key] === "string");
  }

  async sections(): Promise<string[]> {
    const { data } = await this.load();
    return Object.keys(data).filter((name) => isJsonObject(data[name]));
  }

  /** Encrypts and upserts one value. */
  async store(section: string, key: string, value: string): Promise<void> {
    const sealed = await this.encrypt(value);
    await this.modify((data) => {
      const existing = ownValue(data, section);
      if (existing !== undefined && !isJsonObject(existing)) {
        throw new ToolHostError("ToolConfigError", `vault.json section "${section}" is not an object; refusing to overwrite it`);
      }
      const entries = existing ?? {};
      defineOwn(entries, key, sealed);
      defineOwn(data, section, entries);
      return true;
    });
  }

  /** Removes one value and drops the section when it becomes empty. False when there was nothing to remove. */
  async delete(section: string, key: string): Promise<boolean> {
    let removed = false;
    await this.modify((data) => {
      const entries = ownValue(data, section);
      if (!isJsonObject(entries) || !Object.hasOwn(entries, key)) return false;
      delete entries[key];
      if (Object.keys(entries).length === 0) delete data[section];
      removed = true;
      return true;
    });
    return removed;
  }

  /** vault.json as parsed, degraded to `{}` when absent or unusable (warned once). */
  private async load(): Promise<LoadedVault> {
    let text: string | undefined;
    try {
      text = await readTextFileIfPresent(this.vaultPath, MAX_VAULT_BYTES);
    } catch (error) {
      return this.corrupt(unreadableReason(error));
    }
    if (text === undefined) return { state: "absent", data: {} };
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      return this.corrupt(`is not valid JSON (${jsonSyntaxProblem(error)})`);
    }
    if (!isJsonObject(parsed)) return this.corrupt("is not a JSON object");
    return { state: "ok", data: parsed };
  }

  private corrupt(problem: string): LoadedVault {
    this.warnOnce(`vault.json at ${this.vaultPath} ${problem}; reading it as empty`);
    return { state: "corrupt", data: {}, problem };
  }

  /** Read-modify-write under the per-path chain; `change` returns false when nothing needs writing. */
  private async modify(change: (data: Record<string, unknown>) => boolean): Promise<void> {
    const previous = writeChains.get(this.vaultPath) ?? Promise.resolve();
    const next = previous
      .catch(() => undefined)
      .then(async () => {
        const loaded = await this.load();
        if (loaded.state === "corrupt") {
          throw new ToolHostError("ToolConfigError", `vault.json ${loaded.problem}; refusing to overwrite it`, `repair or move ${this.vaultPath} first`);
        }
        if (change(loaded.data)) await writeFileAtomically(this.vaultPath, `${JSON.stringify(loaded.data, null, 2)}\n`);
      });
    writeChains.set(this.vaultPath, next);
    try {
      await next;
    } finally {
      if (writeChains.get(this.vaultPath) === next) writeChains.delete(this.vaultPath);
    }
  }

  /** The key pair from vault.key, cached once loaded; undefined (warned once) when absent or unusable. */
  private async loadKey(): Promise<KeyPair | undefined> {
    if (this.keyPair !== undefined) return this.keyPair;
    const sodium = await loadSodium();
    let text: string | undefined;
    try {
      text = await readTextFileIfPresent(this.keyPath, MAX_VAULT_KEY_BYTES);
    } catch (error) {
      this.warnOnce(`vault key ${this.keyPath} ${unreadableReason(error)}`);
      return undefined;
    }
    if (text === undefined) {
      this.warnOnce(`vault key file not found: ${this.keyPath}; vault values are returned as stored`);
      return undefined;
    }
    let privateKey: Uint8Array;
    try {
      privateKey = sodium.from_base64(text.trim(), sodium.base64_variants.ORIGINAL);
    } catch {
      this.warnOnce(`vault key ${this.keyPath} is not base64; vault values are returned as stored`);
      return undefined;
    }
    if (privateKey.length !== PRIVATE_KEY_BYTES) {
      this.warnOnce(`vault key ${this.keyPath} holds ${privateKey.length} bytes, expected ${PRIVATE_KEY_BYTES}; vault values are returned as stored`);
      return undefined;
    }
    const info = await stat(this.keyPath).catch(() => undefined);
    if (info !== undefined && (info.mode & 0o077) !== 0) {
      this.warnOnce(`vault key ${this.keyPath} is readable by other users (mode ${(info.mode & 0o777).toString(8)}); run chmod 600 on it`);
    }
    this.keyPair = { privateKey, publicKey: sodium.crypto_scalarmult_base(privateKey) };
    return this.keyPair;
  }

  private warnOnce(message: string): void {
    if (this.warned.has(message)) return;
    this.warned.add(message);
    hostLog(this.log, "warn", message);
  }
}

function sectionEntry(data: Record<string, unknown>, section: string, key: string): unknown {
  const entries = ownValue(data, section);
  return isJsonObject(entries) ? ownValue(entries, key) : undefined;
}

/** Plain assignment of `__proto__` would set the prototype instead of filing a key, so define an own property. */
function defineOwn(record: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * Temp file in the same folder (so `rename` stays on one file system and is atomic), created 0600 from
 * the start so the secret file is never briefly world-readable, flushed before the rename so a crash
 * leaves either the old file or the new one — never a truncated one.
 */
export async function writeFileAtomically(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tempPath = join(dirname(path), `.${basename(path)}.${process.pid}.${process.getBuiltinModule("node:crypto").randomBytes(6).toString("hex")}.tmp`);
  const handle = await open(tempPath, "wx", FILE_MODE);
  try {
    try {
      await handle.writeFile(text, "utf8");
      await handle.chmod(FILE_MODE);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tempPath, path);
  } catch (error) {
    await unlink(tempPath).catch(() => undefined);
    throw error;
  }
}
