import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import sodium from "libsodium-wrappers";

/**
 * Writes vault.key / vault.json the way AnimaWorks' PyNaCl code does, without going through the Vault
 * class under test: raw `crypto_box_seal`, Node's base64, Python's `json.dumps(indent=2)` layout.
 */
export interface RawVaultKey {
  privateKey: Uint8Array;
  publicKey: Uint8Array;
}

export async function writeRawKey(dataDir: string): Promise<RawVaultKey> {
  await sodium.ready;
  const pair = sodium.crypto_box_keypair();
  const path = join(dataDir, "vault.key");
  writeFileSync(path, `${Buffer.from(pair.privateKey).toString("base64")}\n`);
  chmodSync(path, 0o600);
  return { privateKey: pair.privateKey, publicKey: pair.publicKey };
}

export function sealRaw(key: RawVaultKey, plaintext: string): string {
  if (plaintext === "") return plaintext;
  return Buffer.from(sodium.crypto_box_seal(Buffer.from(plaintext, "utf8"), key.publicKey)).toString("base64");
}

export function openRaw(key: RawVaultKey, stored: string): string {
  return Buffer.from(sodium.crypto_box_seal_open(Buffer.from(stored, "base64"), key.publicKey, key.privateKey)).toString("utf8");
}

/** `sections` may hold own `__proto__` keys (built with Object.fromEntries); JSON.stringify keeps them. */
export function writeRawVault(dataDir: string, sections: Record<string, Record<string, string>>): void {
  const path = join(dataDir, "vault.json");
  writeFileSync(path, `${JSON.stringify(sections, null, 2)}\n`);
  chmodSync(path, 0o600);
}
