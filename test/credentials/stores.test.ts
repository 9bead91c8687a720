import { afterEach, describe, expect, it } from "vitest";
import type { LogRecord } from "../../src/host-options.js";
import { SHARED_SCOPE, animaScope, configCredentialKey } from "../../src/credentials/store.js";
import {
  ConfigCredentialStore,
  EnvironmentCredentialStore,
  LegacyCredentialStore,
  VaultCredentialStore,
  openCredentialSources,
} from "../../src/credentials/stores.js";
import { Vault } from "../../src/credentials/vault.js";
import { ToolHostError } from "../../src/errors.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { CONTRACT_NAMES, type SeedEntry, runCredentialStoreContract } from "./contract.js";
import { sealRaw, writeRawKey, writeRawVault } from "./raw-vault.js";

const ALICE = animaScope("alice");
const BOB = animaScope("bob");

/** Groups entries by their scope's section name, with own keys even for `__proto__`. */
function bySection(entries: readonly SeedEntry[], value: (entry: SeedEntry) => string): Record<string, Record<string, string>> {
  const sections = new Map<string, [string, string][]>();
  for (const entry of entries) {
    const section = entry.scope.kind === "shared" ? "shared" : entry.scope.anima;
    sections.set(section, [...(sections.get(section) ?? []), [entry.name, value(entry)]]);
  }
  return Object.fromEntries([...sections].map(([section, pairs]) => [section, Object.fromEntries(pairs)]));
}

function writeConfig(data: TempDataDir, credentials: unknown): void {
  data.write("config.json", JSON.stringify({ version: 1, credentials }, null, 2));
}

runCredentialStoreContract("config.json credentials.<name>.api_key", {
  scopes: [SHARED_SCOPE],
  keyOf: (name) => configCredentialKey(name),
  async seed(entries) {
    const data = makeDataDir();
    writeConfig(data, Object.fromEntries(entries.map((e) => [e.name, { type: "api_key", api_key: e.value, keys: {} }])));
    return { store: new ConfigCredentialStore(`${data.dir}/config.json`), cleanup: data.cleanup };
  },
});

runCredentialStoreContract("config.json credentials.<name>.keys[<keyName>]", {
  scopes: [SHARED_SCOPE],
  keyOf: (name) => configCredentialKey("service", name),
  async seed(entries) {
    const data = makeDataDir();
    writeConfig(data, { service: { api_key: "the-api-key", keys: Object.fromEntries(entries.map((e) => [e.name, e.value])) } });
    return { store: new ConfigCredentialStore(`${data.dir}/config.json`), cleanup: data.cleanup };
  },
});

runCredentialStoreContract("vault.json written by Vault.store", {
  scopes: [SHARED_SCOPE, ALICE, BOB],
  keyOf: (name) => name,
  async seed(entries) {
    const data = makeDataDir();
    const vault = new Vault(data.dir);
    await vault.generateKey();
    for (const entry of entries) await vault.store(entry.scope.kind === "shared" ? "shared" : entry.scope.anima, entry.name, entry.value);
    return { store: new VaultCredentialStore(new Vault(data.dir)), cleanup: data.cleanup };
  },
});

runCredentialStoreContract("vault.json written with raw sealed boxes (PyNaCl layout)", {
  scopes: [SHARED_SCOPE, ALICE, BOB],
  keyOf: (name) => name,
  async seed(entries) {
    const data = makeDataDir();
    const key = await writeRawKey(data.dir);
    writeRawVault(
      data.dir,
      bySection(entries, (e) => sealRaw(key, e.value)),
    );
    return { store: new VaultCredentialStore(new Vault(data.dir)), cleanup: data.cleanup };
  },
});

runCredentialStoreContract("shared/credentials.json", {
  scopes: [SHARED_SCOPE],
  keyOf: (name) => name,
  async seed(entries) {
    const data = makeDataDir();
    data.write("shared/credentials.json", JSON.stringify(Object.fromEntries(entries.map((e) => [e.name, e.value]))));
    return { store: new LegacyCredentialStore(`${data.dir}/shared/credentials.json`), cleanup: data.cleanup };
  },
});

runCredentialStoreContract("allowed environment", {
  scopes: [SHARED_SCOPE],
  keyOf: (name) => name,
  async seed(entries) {
    const variables = Object.fromEntries(entries.map((e) => [e.name, e.value]));
    return { store: new EnvironmentCredentialStore({ variables, allowed: CONTRACT_NAMES }), cleanup: () => {} };
  },
});

describe("ConfigCredentialStore", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it("reads api_key and keys[...] separately: keys.api_key is not the api_key field", async () => {
    data = makeDataDir();
    writeConfig(data, { chatwork: { api_key: "", keys: { api_key: "from-keys", room: "room-1" } } });
    const store = new ConfigCredentialStore(`${data.dir}/config.json`);
    expect(await store.get(SHARED_SCOPE, configCredentialKey("chatwork"))).toBeUndefined();
    expect(await store.get(SHARED_SCOPE, configCredentialKey("chatwork", "room"))).toBe("room-1");
  });

  it("treats a missing config.json, missing credentials and null values as missing", async () => {
    data = makeDataDir();
    const store = new ConfigCredentialStore(`${data.dir}/config.json`);
    expect(await store.get(SHARED_SCOPE, configCredentialKey("x"))).toBeUndefined();
    data.write("config.json", "{}");
    expect(await store.get(SHARED_SCOPE, configCredentialKey("x"))).toBeUndefined();
    writeConfig(data, { anthropic: {}, x: { api_key: null, keys: null } });
    expect(await store.get(SHARED_SCOPE, configCredentialKey("anthropic"))).toBeUndefined();
    expect(await store.get(SHARED_SCOPE, configCredentialKey("x"))).toBeUndefined();
    expect(await store.get(SHARED_SCOPE, configCredentialKey("x", "other"))).toBeUndefined();
  });

  it("ignores keys that are not a [name, keyName] pair", async () => {
    data = makeDataDir();
    writeConfig(data, { x: { api_key: "v" } });
    const store = new ConfigCredentialStore(`${data.dir}/config.json`);
    for (const key of ["x", "x.api_key", '["x"]', '["x","api_key","extra"]', "[1,2]", "{"]) expect(await store.get(SHARED_SCOPE, key)).toBeUndefined();
    expect(await store.get(SHARED_SCOPE, configCredentialKey("x"))).toBe("v");
  });

  it("fails with ToolConfigError on a broken config.json or a wrongly typed value, naming the problem", async () => {
    data = makeDataDir();
    const store = new ConfigCredentialStore(`${data.dir}/config.json`);
    const cases: [string, RegExp][] = [
      ["{ not json", /^config\.json is not valid JSON/],
      ["[]", /^config\.json is not a JSON object$/],
      [JSON.stringify({ credentials: [] }), /credentials must be an object/],
      [JSON.stringify({ credentials: { x: "flat" } }), /credentials\.x must be an object/],
      [JSON.stringify({ credentials: { x: { api_key: 42 } } }), /credentials\.x\.api_key must be a string/],
    ];
    for (const [text, message] of cases) {
      data.write("config.json", text);
      const error = await store.get(SHARED_SCOPE, configCredentialKey("x")).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ToolHostError);
      expect((error as ToolHostError).type).toBe("ToolConfigError");
      expect((error as ToolHostError).message).toMatch(message);
    }
  });

  it("resolves {$vault: KEY} from the vault's shared section; a dangling reference is a configuration error", async () => {
    data = makeDataDir();
    const vault = new Vault(data.dir);
    await vault.generateKey();
    await vault.store("shared", "CHATWORK_API_TOKEN", "from-vault");
    await vault.store("alice", "CHATWORK_API_TOKEN", "alice-section");
    writeConfig(data, {
      chatwork: { api_key: { $vault: "CHATWORK_API_TOKEN" } },
      broken: { api_key: { $vault: "NOPE" } },
      blank: { api_key: { $vault: " " } },
    });
    const store = new ConfigCredentialStore(`${data.dir}/config.json`, { vault });
    expect(await store.get(SHARED_SCOPE, configCredentialKey("chatwork"))).toBe("from-vault");
    await expect(store.get(SHARED_SCOPE, configCredentialKey("broken"))).rejects.toThrow(
      "config.json credentials.broken.api_key refers to vault key 'NOPE', which is not in vault.json's shared section",
    );
    await expect(store.get(SHARED_SCOPE, configCredentialKey("blank"))).rejects.toThrow(/non-empty string key/);
    await expect(new ConfigCredentialStore(`${data.dir}/config.json`).get(SHARED_SCOPE, configCredentialKey("chatwork"))).rejects.toThrow(
      /no vault is configured/,
    );
  });

  it("sees an edit of config.json on the next lookup", async () => {
    data = makeDataDir();
    const store = new ConfigCredentialStore(`${data.dir}/config.json`);
    writeConfig(data, { x: { api_key: "first" } });
    expect(await store.get(SHARED_SCOPE, configCredentialKey("x"))).toBe("first");
    writeConfig(data, { x: { api_key: "second" } });
    expect(await store.get(SHARED_SCOPE, configCredentialKey("x"))).toBe("second");
  });
});

describe("LegacyCredentialStore", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  function storeWithLog(): { store: LegacyCredentialStore; warnings: string[] } {
    const warnings: string[] = [];
    const log = (record: LogRecord) => {
      if (record.level === "warn") warnings.push(record.message);
    };
    return { store: new LegacyCredentialStore(`${data.dir}/shared/credentials.json`, log), warnings };
  }

  it("reads a blank or missing file as empty without a warning", async () => {
    data = makeDataDir();
    const { store, warnings } = storeWithLog();
    expect(await store.get(SHARED_SCOPE, "X")).toBeUndefined();
    data.write("shared/credentials.json", "  \n\t");
    expect(await store.get(SHARED_SCOPE, "X")).toBeUndefined();
    expect(warnings).toEqual([]);
  });

  it("warns once about invalid JSON or a non-object and reads it as empty", async () => {
    data = makeDataDir();
    const { store, warnings } = storeWithLog();
    data.write("shared/credentials.json", "{ broken");
    expect(await store.get(SHARED_SCOPE, "X")).toBeUndefined();
    expect(await store.get(SHARED_SCOPE, "X")).toBeUndefined();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/credentials\.json is not valid JSON/);
    data.write("shared/credentials.json", '["X"]');
    expect(await store.get(SHARED_SCOPE, "X")).toBeUndefined();
    expect(warnings[1]).toMatch(/is not a JSON object/);
  });

  it("counts non-string values as absent", async () => {
    data = makeDataDir();
    data.write("shared/credentials.json", JSON.stringify({ NUM: 12345, OBJ: { a: "b" }, LIST: ["x"], YES: true, OK: "fine" }));
    const { store } = storeWithLog();
    for (const key of ["NUM", "OBJ", "LIST", "YES"]) expect(await store.get(SHARED_SCOPE, key)).toBeUndefined();
    expect(await store.get(SHARED_SCOPE, "OK")).toBe("fine");
  });
});

describe("EnvironmentCredentialStore", () => {
  it("exposes only allowed names, exactly", async () => {
    const store = new EnvironmentCredentialStore({
      variables: { CHATWORK_API_TOKEN: "cw", AWS_SECRET_ACCESS_KEY: "aws", ANIMAWORKS_DATA_DIR: "/data" },
      allowed: ["CHATWORK_API_TOKEN", "chatwork_api_token"],
    });
    expect(await store.get(SHARED_SCOPE, "CHATWORK_API_TOKEN")).toBe("cw");
    expect(await store.get(SHARED_SCOPE, "chatwork_api_token")).toBeUndefined();
    expect(await store.get(SHARED_SCOPE, "AWS_SECRET_ACCESS_KEY")).toBeUndefined();
    expect(await store.get(SHARED_SCOPE, "ANIMAWORKS_DATA_DIR")).toBeUndefined();
  });

  it("copies the snapshot: later changes to the object handed in do not show", async () => {
    const variables: Record<string, string> = { TOKEN: "before" };
    const store = new EnvironmentCredentialStore({ variables, allowed: ["TOKEN", "LATER"] });
    variables["TOKEN"] = "after";
    variables["LATER"] = "added";
    expect(await store.get(SHARED_SCOPE, "TOKEN")).toBe("before");
    expect(await store.get(SHARED_SCOPE, "LATER")).toBeUndefined();
  });

  it("never consults process.env", async () => {
    const name = "AWT_CREDENTIAL_TEST_ONLY_IN_PROCESS_ENV";
    const data = makeDataDir();
    process.env[name] = "leaked";
    try {
      const store = new EnvironmentCredentialStore({ variables: {}, allowed: [name] });
      expect(await store.get(SHARED_SCOPE, name)).toBeUndefined();
      const sources = openCredentialSources(data.dir, { allowedEnvironment: [name] });
      expect(await sources.environment.get(SHARED_SCOPE, name)).toBeUndefined();
    } finally {
      delete process.env[name];
      data.cleanup();
    }
  });
});

describe("VaultCredentialStore", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it("maps an Anima's scope to its own section and never to another's or to shared", async () => {
    data = makeDataDir();
    const vault = new Vault(data.dir);
    await vault.generateKey();
    await vault.store("alice", "T", "alice-t");
    await vault.store("bob", "T", "bob-t");
    await vault.store("shared", "T", "shared-t");
    const store = new VaultCredentialStore(vault);
    expect(await store.get(ALICE, "T")).toBe("alice-t");
    expect(await store.get(BOB, "T")).toBe("bob-t");
    expect(await store.get(SHARED_SCOPE, "T")).toBe("shared-t");
    expect(await store.get(animaScope("shared"), "T")).toBeUndefined();
    expect(await store.get(animaScope("Alice"), "T")).toBeUndefined();
    expect(await store.get(animaScope("аlice" /* Cyrillic а */), "T")).toBeUndefined();
  });
});
