import { chmodSync, copyFileSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import sodium from "libsodium-wrappers";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LogRecord } from "../../src/host-options.js";
import { Vault, writeFileAtomically } from "../../src/credentials/vault.js";
import { ToolHostError } from "../../src/errors.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { type RawVaultKey, openRaw, sealRaw, writeRawKey, writeRawVault } from "./raw-vault.js";

const FIXTURE_DIR = join(import.meta.dirname, "fixtures", "pynacl-vault");

let data: TempDataDir;
afterEach(() => data?.cleanup());
beforeAll(async () => {
  await sodium.ready;
});

function vaultWithLog(): { vault: Vault; warnings: string[] } {
  const warnings: string[] = [];
  const log = (record: LogRecord) => {
    if (record.level === "warn") warnings.push(record.message);
  };
  return { vault: new Vault(data.dir, { log }), warnings };
}

function modeOf(path: string): number {
  return statSync(path).mode & 0o777;
}

function readVaultJson(): Record<string, Record<string, string>> {
  return JSON.parse(readFileSync(join(data.dir, "vault.json"), "utf8")) as Record<string, Record<string, string>>;
}

async function failure(promise: Promise<unknown>): Promise<ToolHostError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ToolHostError);
  return error as ToolHostError;
}

describe("vault.key", () => {
  it("is base64 of a 32-byte private key plus a newline, mode 0600", async () => {
    data = makeDataDir();
    await new Vault(data.dir).generateKey();
    const keyPath = join(data.dir, "vault.key");
    const text = readFileSync(keyPath, "utf8");
    expect(text).toMatch(/^[A-Za-z0-9+/]{43}=\n$/);
    expect(Buffer.from(text.trim(), "base64")).toHaveLength(32);
    expect(modeOf(keyPath)).toBe(0o600);
  });

  it("is never replaced: generating a second key fails and keeps the first", async () => {
    data = makeDataDir();
    await new Vault(data.dir).generateKey();
    const before = readFileSync(join(data.dir, "vault.key"), "utf8");
    const error = await failure(new Vault(data.dir).generateKey());
    expect(error.type).toBe("ToolConfigError");
    expect(error.message).toMatch(/vault key already exists/);
    expect(readFileSync(join(data.dir, "vault.key"), "utf8")).toBe(before);
  });

  it("warns when the key file is readable by others", async () => {
    data = makeDataDir();
    await new Vault(data.dir).generateKey();
    chmodSync(join(data.dir, "vault.key"), 0o644);
    const { vault, warnings } = vaultWithLog();
    expect(await vault.hasKey()).toBe(true);
    expect(warnings.join("\n")).toMatch(/readable by other users \(mode 644\)/);
  });

  it("treats a key that is not base64 or not 32 bytes as no key (values returned as stored)", async () => {
    for (const keyText of ["not base64 at all!\n", `${Buffer.alloc(16, 1).toString("base64")}\n`]) {
      data?.cleanup();
      data = makeDataDir({ "vault.key": keyText });
      writeRawVault(data.dir, { shared: { T: "stored-as-is" } });
      const { vault, warnings } = vaultWithLog();
      expect(await vault.hasKey()).toBe(false);
      expect(await vault.get("shared", "T")).toBe("stored-as-is");
      expect(warnings).toHaveLength(1);
      await expect(vault.store("shared", "U", "x")).rejects.toThrow(/no usable vault key/);
    }
  });
});

describe("vault.json round trip", () => {
  it("stores sealed boxes that raw libsodium opens with the key file, and reads them back", async () => {
    data = makeDataDir();
    const vault = new Vault(data.dir);
    await vault.generateKey();
    await vault.store("shared", "CHATWORK_API_TOKEN", "cw-secret");
    await vault.store("alice", "MY_TOKEN", "日本語の秘密🔑");
    expect(await vault.get("shared", "CHATWORK_API_TOKEN")).toBe("cw-secret");
    expect(await vault.get("alice", "MY_TOKEN")).toBe("日本語の秘密🔑");

    const stored = readVaultJson();
    expect(stored["shared"]?.["CHATWORK_API_TOKEN"]).not.toContain("cw-secret");
    const privateKey = Buffer.from(readFileSync(join(data.dir, "vault.key"), "utf8").trim(), "base64");
    const key: RawVaultKey = { privateKey, publicKey: sodium.crypto_scalarmult_base(privateKey) };
    expect(openRaw(key, stored["shared"]?.["CHATWORK_API_TOKEN"] ?? "")).toBe("cw-secret");
    expect(openRaw(key, stored["alice"]?.["MY_TOKEN"] ?? "")).toBe("日本語の秘密🔑");
  });

  it("writes Python's json.dumps(indent=2) layout with a trailing newline, mode 0600", async () => {
    data = makeDataDir();
    const vault = new Vault(data.dir);
    await vault.generateKey();
    await vault.store("shared", "A", "value");
    const path = join(data.dir, "vault.json");
    const text = readFileSync(path, "utf8");
    expect(text).toBe(`${JSON.stringify(JSON.parse(text), null, 2)}\n`);
    expect(text).toMatch(/^\{\n {2}"shared": \{\n {4}"A": "[A-Za-z0-9+/]+=*"\n {2}\}\n\}\n$/);
    expect(modeOf(path)).toBe(0o600);
  });

  it("seals with a fresh ephemeral key each time: the same plaintext never gives the same ciphertext", async () => {
    data = makeDataDir();
    const vault = new Vault(data.dir);
    await vault.generateKey();
    expect(await vault.encrypt("same")).not.toBe(await vault.encrypt("same"));
  });

  it("passes empty strings through unencrypted", async () => {
    data = makeDataDir();
    const vault = new Vault(data.dir);
    await vault.generateKey();
    await vault.store("shared", "EMPTY", "");
    expect(readVaultJson()["shared"]?.["EMPTY"]).toBe("");
    expect(await vault.get("shared", "EMPTY")).toBe("");
  });

  it("deletes one key, drops a section that becomes empty, and reports whether anything was removed", async () => {
    data = makeDataDir();
    const vault = new Vault(data.dir);
    await vault.generateKey();
    await vault.store("alice", "A", "1");
    await vault.store("alice", "B", "2");
    await vault.store("bob", "A", "3");
    expect(await vault.delete("alice", "A")).toBe(true);
    expect(await vault.list("alice")).toEqual(["B"]);
    expect(await vault.delete("alice", "B")).toBe(true);
    expect(await vault.sections()).toEqual(["bob"]);
    expect(Object.keys(readVaultJson())).toEqual(["bob"]);
    expect(await vault.delete("alice", "B")).toBe(false);
    expect(await vault.delete("nobody", "A")).toBe(false);
    expect(await vault.get("bob", "A")).toBe("3");
  });

  it("files __proto__ and constructor as ordinary section and key names without touching prototypes", async () => {
    data = makeDataDir();
    const vault = new Vault(data.dir);
    await vault.generateKey();
    await vault.store("__proto__", "polluted", "yes");
    await vault.store("shared", "__proto__", "proto-value");
    await vault.store("shared", "constructor", "ctor-value");
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
    expect(await vault.get("__proto__", "polluted")).toBe("yes");
    expect(await vault.get("shared", "__proto__")).toBe("proto-value");
    expect(await vault.get("shared", "constructor")).toBe("ctor-value");
    expect(await vault.get("shared", "toString")).toBeUndefined();
    expect(await vault.get("toString", "length")).toBeUndefined();
    expect(readFileSync(join(data.dir, "vault.json"), "utf8")).toContain('"__proto__": {');
  });
});

describe("AnimaWorks interop", () => {
  it("reads a vault written by PyNaCl (fixture made by fixtures/pynacl-vault/make_fixture.py)", async () => {
    data = makeDataDir();
    for (const file of ["vault.key", "vault.json"]) copyFileSync(join(FIXTURE_DIR, file), join(data.dir, file));
    chmodSync(join(data.dir, "vault.key"), 0o600);
    const { vault, warnings } = vaultWithLog();
    expect(await vault.get("shared", "CHATWORK_API_TOKEN")).toBe("cw-0123456789abcdef");
    expect(await vault.get("shared", "SLACK_BOT_TOKEN__alice")).toBe("xoxb-alice-1111");
    expect(await vault.get("shared", "UNICODE_SECRET")).toBe("秘密のトークン🔑 with spaces");
    expect(await vault.get("shared", "EMPTY")).toBe("");
    expect(await vault.get("shared", "LEGACY_PLAIN")).toBe("legacy-plaintext-value");
    expect(await vault.get("alice", "MY_TOKEN")).toBe("alice-own-secret");
    expect(await vault.get("bob", "MY_TOKEN")).toBe("bob-own-secret");
    expect(await vault.list("shared")).toEqual([
      "CHATWORK_API_TOKEN",
      "SLACK_BOT_TOKEN__alice",
      "SLACK_BOT_TOKEN__bob",
      "UNICODE_SECRET",
      "EMPTY",
      "LEGACY_PLAIN",
    ]);
    expect(warnings).toEqual([]);
  });

  it("adds to a PyNaCl vault without disturbing the values already there", async () => {
    data = makeDataDir();
    for (const file of ["vault.key", "vault.json"]) copyFileSync(join(FIXTURE_DIR, file), join(data.dir, file));
    const before = readVaultJson();
    await new Vault(data.dir).store("carol", "NEW", "carol-secret");
    const after = readVaultJson();
    expect({ ...after, carol: undefined }).toEqual({ ...before, carol: undefined });
    expect(await new Vault(data.dir).get("carol", "NEW")).toBe("carol-secret");
  });

  it("reads values sealed with raw crypto_box_seal as SealedBox does, and raw crypto_box_seal_open reads ours", async () => {
    data = makeDataDir();
    const key = await writeRawKey(data.dir);
    writeRawVault(data.dir, { shared: { RAW: sealRaw(key, "raw-sealed") } });
    const vault = new Vault(data.dir);
    expect(await vault.get("shared", "RAW")).toBe("raw-sealed");
    await vault.store("shared", "OURS", "ours-sealed");
    expect(openRaw(key, readVaultJson()["shared"]?.["OURS"] ?? "")).toBe("ours-sealed");
  });
});

describe("degradation (docs/animaworks-reference.md §1.6)", () => {
  it("returns a value that does not decrypt unchanged: plaintext, base64 noise, another key's box, non-UTF-8", async () => {
    data = makeDataDir();
    const key = await writeRawKey(data.dir);
    const otherKey: RawVaultKey = (() => {
      const pair = sodium.crypto_box_keypair();
      return { privateKey: pair.privateKey, publicKey: pair.publicKey };
    })();
    const notUtf8 = Buffer.from(sodium.crypto_box_seal(new Uint8Array([0xff, 0xfe, 0x00]), key.publicKey)).toString("base64");
    const values = {
      PLAIN: "sk-legacy-plaintext",
      NOISE: Buffer.alloc(80, 7).toString("base64"),
      SHORT: "YWJj",
      OTHER: sealRaw(otherKey, "not-for-this-vault"),
      BADUTF8: notUtf8,
    };
    writeRawVault(data.dir, { shared: values });
    const vault = new Vault(data.dir);
    for (const [name, stored] of Object.entries(values)) expect(await vault.get("shared", name), name).toBe(stored);
  });

  it("without a usable vault.key returns values as stored, warns once, and refuses to store plaintext", async () => {
    data = makeDataDir();
    const key = await writeRawKey(data.dir);
    const sealed = sealRaw(key, "secret");
    writeRawVault(data.dir, { shared: { T: sealed } });
    const vaultBefore = readFileSync(join(data.dir, "vault.json"), "utf8");
    // An emptied key file decodes to 0 bytes: unusable, like a missing one.
    writeFileSync(join(data.dir, "vault.key"), "");
    const { vault, warnings } = vaultWithLog();
    expect(await vault.get("shared", "T")).toBe(sealed);
    expect(await vault.get("shared", "T")).toBe(sealed);
    expect(warnings).toHaveLength(1);
    const error = await failure(vault.store("shared", "U", "plaintext-would-leak"));
    expect(error.type).toBe("ToolConfigError");
    expect(readFileSync(join(data.dir, "vault.json"), "utf8")).toBe(vaultBefore);
  });

  it("with no vault.key file at all warns that the key file is missing", async () => {
    data = makeDataDir();
    writeRawVault(data.dir, { shared: { T: "as-stored" } });
    const { vault, warnings } = vaultWithLog();
    expect(await vault.get("shared", "T")).toBe("as-stored");
    expect(warnings).toEqual([`vault key file not found: ${join(data.dir, "vault.key")}; vault values are returned as stored`]);
  });

  it("reads an unreadable or corrupt vault.json as empty (warned once) and refuses to overwrite it", async () => {
    for (const corrupt of ["{ not json", "[1, 2]", "null"]) {
      data?.cleanup();
      data = makeDataDir({ "vault.json": corrupt });
      const { vault, warnings } = vaultWithLog();
      await vault.generateKey();
      expect(await vault.get("shared", "T")).toBeUndefined();
      expect(await vault.list("shared")).toEqual([]);
      expect(await vault.sections()).toEqual([]);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/vault\.json at .* (is not valid JSON|is not a JSON object).*; reading it as empty$/);
      await expect(vault.store("shared", "T", "v")).rejects.toThrow(/refusing to overwrite it/);
      await expect(vault.delete("shared", "T")).rejects.toThrow(/refusing to overwrite it/);
      expect(readFileSync(join(data.dir, "vault.json"), "utf8")).toBe(corrupt);
    }
  });

  it("reads a vault.json that cannot be read as a file (a directory) as empty", async () => {
    data = makeDataDir();
    mkdirSync(join(data.dir, "vault.json"));
    const { vault, warnings } = vaultWithLog();
    expect(await vault.get("shared", "T")).toBeUndefined();
    expect(warnings[0]).toMatch(/is not a regular file \(it is a directory\)/);
  });

  it("ignores sections and values of the wrong type", async () => {
    data = makeDataDir();
    writeFileSync(join(data.dir, "vault.json"), JSON.stringify({ shared: { N: 1, O: {}, S: "ok" }, list: ["x"], text: "x" }));
    const vault = new Vault(data.dir);
    expect(await vault.get("shared", "N")).toBeUndefined();
    expect(await vault.get("shared", "O")).toBeUndefined();
    expect(await vault.get("list", "0")).toBeUndefined();
    expect(await vault.list("shared")).toEqual(["S"]);
    expect(await vault.sections()).toEqual(["shared"]);
  });
});

describe("atomic writes", () => {
  it("replaces vault.json by rename (a new inode), leaves no temp file, and resets a loose mode to 0600", async () => {
    data = makeDataDir();
    const vault = new Vault(data.dir);
    await vault.generateKey();
    await vault.store("shared", "A", "1");
    const path = join(data.dir, "vault.json");
    chmodSync(path, 0o644);
    const inodeBefore = statSync(path).ino;
    await vault.store("shared", "B", "2");
    expect(statSync(path).ino).not.toBe(inodeBefore);
    expect(modeOf(path)).toBe(0o600);
    expect(readdirSync(data.dir).sort()).toEqual(["vault.json", "vault.key"]);
  });

  it("never shows a reader a partial file while many writes are in flight, and loses no update", async () => {
    data = makeDataDir();
    const first = new Vault(data.dir);
    await first.generateKey();
    await first.store("shared", "SEED", "seed");
    const second = new Vault(data.dir);
    const path = join(data.dir, "vault.json");
    let done = false;
    let reads = 0;
    const reader = (async () => {
      while (!done) {
        const text = readFileSync(path, "utf8");
        expect(() => JSON.parse(text), `read #${reads}: ${JSON.stringify(text.slice(0, 40))}`).not.toThrow();
        reads += 1;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    })();
    const writes = Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? first : second).store("shared", `K${i}`, `v${i}`));
    await Promise.all(writes).finally(() => {
      done = true;
    });
    await reader;
    expect(reads).toBeGreaterThan(10);
    expect((await first.list("shared")).sort()).toEqual(["SEED", ...Array.from({ length: 40 }, (_, i) => `K${i}`)].sort());
  });

  it("removes its temp file and keeps the target when the final rename fails", async () => {
    data = makeDataDir();
    const target = join(data.dir, "occupied");
    mkdirSync(join(target, "child"), { recursive: true });
    await expect(writeFileAtomically(target, "{}\n")).rejects.toThrow();
    expect(readdirSync(data.dir)).toEqual(["occupied"]);
    expect(statSync(target).isDirectory()).toBe(true);
  });
});
