import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LogRecord } from "../../src/host-options.js";
import { CredentialDeniedError, type CredentialRequest, classifyCredentialName, getCredential } from "../../src/credentials/resolver.js";
import type { CredentialSources, CredentialStore } from "../../src/credentials/store.js";
import { openCredentialSources } from "../../src/credentials/stores.js";
import type { Vault } from "../../src/credentials/vault.js";
import { ToolHostError } from "../../src/errors.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

const CHATWORK: CredentialRequest = { credentialName: "chatwork", toolName: "chatwork", envVar: "CHATWORK_API_TOKEN" };
const MISSING_CHATWORK =
  "Tool 'chatwork' requires credential 'chatwork'. Set it in: config.json credentials.chatwork.api_key or vault.json or environment variable CHATWORK_API_TOKEN";

let data: TempDataDir;
let vault: Vault;
let environment: Record<string, string>;
let allowedEnvironment: string[];
let logs: LogRecord[];

beforeEach(async () => {
  data = makeDataDir();
  environment = {};
  allowedEnvironment = [];
  logs = [];
  vault = openCredentialSources(data.dir).vaultFile;
  await vault.generateKey();
});
afterEach(() => data.cleanup());

function sources(): CredentialSources {
  return openCredentialSources(data.dir, { environment, allowedEnvironment, log: (record) => logs.push(record) });
}

function resolve(anima: string, request: CredentialRequest, from: CredentialSources = sources()) {
  return getCredential({ anima, sources: from, log: (record) => logs.push(record) }, request);
}

async function failure(promise: Promise<unknown>): Promise<ToolHostError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ToolHostError);
  return error as ToolHostError;
}

function writeConfig(credentials: unknown): void {
  data.write("config.json", JSON.stringify({ credentials }));
}

function writeLegacy(values: Record<string, string>): void {
  data.write("shared/credentials.json", JSON.stringify(values));
}

function setEnv(name: string, value: string, allowed = true): void {
  environment[name] = value;
  if (allowed) allowedEnvironment.push(name);
}

/** Wraps every store so a test can prove which lookups happened (or that none did). */
function recording(from: CredentialSources): { sources: CredentialSources; lookups: string[] } {
  const lookups: string[] = [];
  const wrap = (store: CredentialStore): CredentialStore => ({
    source: store.source,
    get: (scope, key) => {
      lookups.push(`${store.source}:${scope.kind === "shared" ? "shared" : scope.anima}:${key}`);
      return store.get(scope, key);
    },
  });
  return { sources: { config: wrap(from.config), vault: wrap(from.vault), legacy: wrap(from.legacy), environment: wrap(from.environment) }, lookups };
}

describe("resolution order (docs/animaworks-reference.md checklist 66-70)", () => {
  it("walks config.json → own vault section → shared vault section → shared/credentials.json → environment", async () => {
    writeConfig({ chatwork: { api_key: "from-config" } });
    await vault.store("alice", "CHATWORK_API_TOKEN", "from-vault-alice");
    await vault.store("shared", "CHATWORK_API_TOKEN", "from-vault-shared");
    writeLegacy({ CHATWORK_API_TOKEN: "from-legacy" });
    setEnv("CHATWORK_API_TOKEN", "from-env");

    expect(await resolve("alice", CHATWORK)).toEqual({ value: "from-config", source: "config.json", location: "config.json credentials.chatwork.api_key" });
    writeConfig({ chatwork: { api_key: "" } });
    expect(await resolve("alice", CHATWORK)).toEqual({ value: "from-vault-alice", source: "vault.json", location: "vault.json [alice] CHATWORK_API_TOKEN" });
    await vault.delete("alice", "CHATWORK_API_TOKEN");
    expect(await resolve("alice", CHATWORK)).toEqual({ value: "from-vault-shared", source: "vault.json", location: "vault.json [shared] CHATWORK_API_TOKEN" });
    await vault.store("shared", "CHATWORK_API_TOKEN", "");
    expect(await resolve("alice", CHATWORK)).toEqual({
      value: "from-legacy",
      source: "shared/credentials.json",
      location: "shared/credentials.json CHATWORK_API_TOKEN",
    });
    writeLegacy({ CHATWORK_API_TOKEN: "" });
    expect(await resolve("alice", CHATWORK)).toEqual({ value: "from-env", source: "environment", location: "environment variable CHATWORK_API_TOKEN" });
    environment["CHATWORK_API_TOKEN"] = "";
    expect((await failure(resolve("alice", CHATWORK))).message).toBe(MISSING_CHATWORK);
  });

  it("reads keys[keyName] for another key name, never api_key", async () => {
    writeConfig({ chatwork: { api_key: "the-api-key", keys: { room_id: "room-42" } } });
    expect(await resolve("alice", { ...CHATWORK, keyName: "room_id" })).toMatchObject({
      value: "room-42",
      location: "config.json credentials.chatwork.room_id",
    });
    writeConfig({ chatwork: { api_key: "the-api-key", keys: {} } });
    setEnv("CHATWORK_API_TOKEN", "env-value");
    expect(await resolve("alice", { ...CHATWORK, keyName: "room_id" })).toMatchObject({ value: "env-value", source: "environment" });
  });

  it("consults only config.json without an envVar", async () => {
    await vault.store("shared", "chatwork", "v");
    writeLegacy({ chatwork: "v" });
    setEnv("chatwork", "v");
    const { sources: from, lookups } = recording(sources());
    for (const envVar of [undefined, null, ""]) {
      const error = await failure(resolve("alice", { credentialName: "chatwork", toolName: "chatwork", envVar }, from));
      expect(error.message).toBe("Tool 'chatwork' requires credential 'chatwork'. Set it in: config.json credentials.chatwork.api_key");
    }
    expect(lookups.every((entry) => entry.startsWith("config.json:"))).toBe(true);
  });

  it("uses environment variables only when the operator allowed the name", async () => {
    setEnv("CHATWORK_API_TOKEN", "present-but-not-allowed", false);
    expect((await failure(resolve("alice", CHATWORK))).message).toBe(MISSING_CHATWORK);
    allowedEnvironment.push("CHATWORK_API_TOKEN");
    expect((await resolve("alice", CHATWORK)).value).toBe("present-but-not-allowed");
  });

  it("does not skip a broken config.json in favour of a later source", async () => {
    data.write("config.json", "{ broken");
    setEnv("CHATWORK_API_TOKEN", "env-value");
    const error = await failure(resolve("alice", CHATWORK));
    expect(error.type).toBe("ToolConfigError");
    expect(error.message).toMatch(/^config\.json is not valid JSON/);
  });
});

describe("ToolConfigError message (docs/animaworks-reference.md checklist 71)", () => {
  it("names the credential, the key and every place to set it, exactly as AnimaWorks", async () => {
    const error = await failure(resolve("alice", CHATWORK));
    expect(error.type).toBe("ToolConfigError");
    expect(error.exitCode).toBe(1);
    expect(error.message).toBe(MISSING_CHATWORK);
    const withKey = await failure(
      resolve("alice", { credentialName: "gmail", toolName: "gmail_tool", keyName: "client_secret", envVar: "GMAIL_CLIENT_SECRET" }),
    );
    expect(withKey.message).toBe(
      "Tool 'gmail_tool' requires credential 'gmail'. Set it in: config.json credentials.gmail.client_secret or vault.json or environment variable GMAIL_CLIENT_SECRET",
    );
  });
});

describe("per-Anima scoping (docs/design.md §9)", () => {
  beforeEach(async () => {
    writeConfig({ slack__bob: { api_key: "bob-config" }, slack: { api_key: "", keys: { token__bob: "bob-key" } } });
    await vault.store("shared", "SLACK_BOT_TOKEN__bob", "bob-vault");
    await vault.store("shared", "SLACK_BOT_TOKEN__alice", "alice-vault");
    await vault.store("bob", "MY_TOKEN", "bob-section");
    writeLegacy({ SLACK_BOT_TOKEN__bob: "bob-legacy" });
    setEnv("SLACK_BOT_TOKEN__bob", "bob-env");
  });

  it("serves an Anima its own __<anima> credential", async () => {
    expect(await resolve("alice", { credentialName: "slack", toolName: "slack", envVar: "SLACK_BOT_TOKEN__alice" })).toMatchObject({ value: "alice-vault" });
    expect(await resolve("bob", { credentialName: "slack", toolName: "slack", envVar: "SLACK_BOT_TOKEN__bob" })).toMatchObject({ value: "bob-vault" });
  });

  it("refuses another Anima's credential under every spelling, before consulting any source", async () => {
    const spellings = [
      "SLACK_BOT_TOKEN__bob",
      "SLACK_BOT_TOKEN__Alice",
      "SLACK_BOT_TOKEN__ALICE",
      "SLACK_BOT_TOKEN__аlice" /* Cyrillic а */,
      "SLACK_BOT_TOKEN__ａｌｉｃｅ" /* fullwidth */,
      "SLACK_BOT_TOKEN__alice " /* trailing space */,
      "SLACK_BOT_TOKEN___alice" /* owner "_alice" */,
      "SLACK_BOT_TOKEN__bob__alice",
      "SLACK_BOT_TOKEN__alice__bob",
      "SLACK_BOT_TOKEN__",
      "__alice",
      "__proto__",
    ];
    const { sources: from, lookups } = recording(sources());
    for (const envVar of spellings) {
      const error = await failure(resolve("alice", { credentialName: "slack", toolName: "slack", envVar }, from));
      expect(error, envVar).toBeInstanceOf(CredentialDeniedError);
      expect(error.type).toBe("PermissionDenied");
      expect(error.exitCode).toBe(4);
      expect((error as CredentialDeniedError).deniedName).toBe(envVar);
      expect(error.message).not.toMatch(/bob-/);
    }
    expect(lookups).toEqual([]);
  });

  it("applies the same rule to the credential name and the key name", async () => {
    for (const request of [
      { credentialName: "slack__bob", toolName: "slack" },
      { credentialName: "slack", toolName: "slack", keyName: "token__bob" },
    ]) {
      expect(await failure(resolve("alice", request))).toBeInstanceOf(CredentialDeniedError);
    }
    expect(await resolve("bob", { credentialName: "slack__bob", toolName: "slack" })).toMatchObject({ value: "bob-config" });
    expect(await resolve("bob", { credentialName: "slack", toolName: "slack", keyName: "token__bob" })).toMatchObject({ value: "bob-key" });
  });

  it("treats look-alike separators as ordinary names that match nothing", async () => {
    for (const envVar of ["SLACK_BOT_TOKEN＿＿bob", "SLACK_BOT_TOKEN‗bob", "SLACK_BOT_TOKEN_bob"]) {
      const error = await failure(resolve("alice", { credentialName: "slack", toolName: "slack", envVar }));
      expect(error.type, envVar).toBe("ToolConfigError");
    }
  });

  it("rejects names carrying invisible characters", async () => {
    for (const envVar of ["SLACK_BOT_TOKEN__\u200Bbob", "SLACK_BOT_TOKEN__bob\u200D", "SLACK\u202E_BOT_TOKEN", "A\nB"]) {
      expect((await failure(resolve("alice", { credentialName: "slack", toolName: "slack", envVar }))).type).toBe("InvalidArguments");
    }
  });

  it("reads the caller's own vault section and never another Anima's", async () => {
    const request = { credentialName: "mine", toolName: "mine", envVar: "MY_TOKEN" };
    expect((await failure(resolve("alice", request))).type).toBe("ToolConfigError");
    expect(await resolve("bob", request)).toMatchObject({ value: "bob-section", location: "vault.json [bob] MY_TOKEN" });
    for (const anima of ["Bob", "BOB", "bоb" /* Cyrillic о */, "bob "]) expect((await failure(resolve(anima, request))).type, anima).toBe("ToolConfigError");
  });

  it("takes the Anima from the host context, ignoring anything extra in the request", async () => {
    const smuggled = {
      credentialName: "mine",
      toolName: "mine",
      envVar: "MY_TOKEN",
      anima: "bob",
      scope: { kind: "anima", anima: "bob" },
    } as CredentialRequest;
    expect((await failure(resolve("alice", smuggled))).type).toBe("ToolConfigError");
  });

  it("gives an Anima named 'shared' no private section aliasing the shared one", async () => {
    await vault.store("shared", "ONLY_SHARED", "shared-value");
    const { sources: from, lookups } = recording(sources());
    expect(await resolve("shared", { credentialName: "x", toolName: "x", envVar: "ONLY_SHARED" }, from)).toMatchObject({
      location: "vault.json [shared] ONLY_SHARED",
    });
    expect(lookups).toEqual(['config.json:shared:["x","api_key"]', "vault.json:shared:ONLY_SHARED"]);
  });

  it("parses owners after the first '__', so Anima names with underscores stay unambiguous", () => {
    expect(classifyCredentialName("TOK__x__y", "x__y")).toBe("own");
    expect(classifyCredentialName("TOK__x__y", "y")).toBe("denied");
    expect(classifyCredentialName("TOK___alice", "_alice")).toBe("own");
    expect(classifyCredentialName("TOK___alice", "alice")).toBe("denied");
    expect(classifyCredentialName("TOK_alice", "alice")).toBe("shared");
    expect(classifyCredentialName("TOK__jose\u0301", "jos\u00e9")).toBe("denied");
  });

  it("refuses a lookup without a valid calling Anima", async () => {
    for (const anima of ["", "..", "a/b", "a\\b", undefined as unknown as string]) {
      const error = await failure(resolve(anima, CHATWORK));
      expect(error.type).toBe("PermissionDenied");
      expect(error).not.toBeInstanceOf(CredentialDeniedError);
    }
  });
});

describe("hostile names", () => {
  it("never resolves Object.prototype members as credentials", async () => {
    writeConfig({ real: { api_key: "", keys: {} } });
    for (const name of ["constructor", "toString", "hasOwnProperty", "valueOf"]) {
      for (const request of [
        { credentialName: name, toolName: "t", envVar: name },
        { credentialName: "real", toolName: "t", keyName: name, envVar: name },
      ]) {
        const error = await failure(resolve("alice", request));
        expect(error.type, JSON.stringify(request)).toBe("ToolConfigError");
      }
    }
  });

  it("rejects malformed requests as InvalidArguments", async () => {
    const bad: unknown[] = [
      { credentialName: 42, toolName: "t" },
      { credentialName: "c", toolName: "" },
      { credentialName: "c", toolName: "t", keyName: "" },
      { credentialName: "c", toolName: "t", envVar: "X".repeat(257) },
      { credentialName: "c", toolName: "t", envVar: ["X"] },
    ];
    for (const request of bad) expect((await failure(resolve("alice", request as CredentialRequest))).type).toBe("InvalidArguments");
  });
});

describe("logging", () => {
  it("logs where a resolution came from, never any character of the value", async () => {
    await vault.store("shared", "CHATWORK_API_TOKEN", "cw-0123456789");
    await resolve("alice", CHATWORK);
    const lines = logs.map((record) => record.message).join("\n");
    expect(logs.map((record) => record.message)).toContain(
      "Credential 'chatwork.api_key' for tool 'chatwork' resolved from vault.json [shared] CHATWORK_API_TOKEN",
    );
    expect(lines).not.toContain("cw-0");
    expect(logs.find((record) => record.message.startsWith("Credential"))).toMatchObject({ level: "debug", anima: "alice" });
  });

  it("logs a refusal without any value", async () => {
    await vault.store("shared", "T__bob", "bob-secret-value");
    await failure(resolve("alice", { credentialName: "t", toolName: "t", envVar: "T__bob" }));
    expect(logs.some((record) => record.level === "warn" && record.message.includes("'T__bob' is not this Anima's to read"))).toBe(true);
    expect(JSON.stringify(logs)).not.toContain("bob-secret-value");
  });
});
