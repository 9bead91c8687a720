import { afterEach, describe, expect, it } from "vitest";
import { type CredentialScope, type CredentialStore, SHARED_SCOPE, animaScope } from "../../src/credentials/store.js";

/**
 * The promises of `CredentialStore` (src/credentials/store.ts), run against every implementation.
 * Each subject seeds its real backing format (a file in a temp data dir, an environment snapshot) from
 * logical entries, so the suite exercises the same parsing a production lookup does.
 */
export interface SeedEntry {
  scope: CredentialScope;
  /** A logical name; the subject maps it to its own key with `keyOf`. */
  name: string;
  value: string;
}

export interface SeededStore {
  store: CredentialStore;
  cleanup(): void;
}

export interface StoreSubject {
  /** Scopes the implementation can file values in (the others must always read as undefined). */
  scopes: readonly CredentialScope[];
  seed(entries: readonly SeedEntry[]): Promise<SeededStore>;
  keyOf(name: string): string;
}

const ALICE = animaScope("alice");
const BOB = animaScope("bob");
/** An Anima named like the shared section must not alias it. */
const ANIMA_NAMED_SHARED = animaScope("shared");
const ALL_SCOPES: readonly CredentialScope[] = [SHARED_SCOPE, ALICE, BOB, ANIMA_NAMED_SHARED];
export const PROTOTYPE_NAMES = ["__proto__", "constructor", "toString", "hasOwnProperty", "valueOf"];
export const LOOK_ALIKES = [
  "api_token",
  "Api_Token",
  "API_TOKEN ",
  " API_TOKEN",
  "ＡＰＩ_ＴＯＫＥＮ",
  "API_TОKEN" /* Cyrillic О */,
  "API\u200B_TOKEN",
  "API_TOKEN\u0000",
];
/** Every name the suite asks for, so a store with an allowlist (the environment) can allow them all. */
export const CONTRACT_NAMES = [
  "MISSING_TOKEN",
  "OTHER_TOKEN",
  "EMPTY_TOKEN",
  "REAL_TOKEN",
  "API_TOKEN",
  "SCOPED_TOKEN",
  "SAME_NAME",
  ...PROTOTYPE_NAMES,
  ...LOOK_ALIKES,
  ...Array.from({ length: 6 }, (_, i) => `TOKEN_${i}`),
];

function describeScope(scope: CredentialScope): string {
  return scope.kind === "shared" ? "shared" : `anima:${scope.anima}`;
}

function sameScope(a: CredentialScope, b: CredentialScope): boolean {
  return a.kind === b.kind && (a.kind === "shared" || (b.kind === "anima" && a.anima === b.anima));
}

export function runCredentialStoreContract(label: string, subject: StoreSubject): void {
  describe(`CredentialStore contract: ${label}`, () => {
    const open: SeededStore[] = [];
    afterEach(() => {
      for (const seeded of open.splice(0)) seeded.cleanup();
    });
    async function seed(entries: readonly SeedEntry[]): Promise<CredentialStore> {
      const seeded = await subject.seed(entries);
      open.push(seeded);
      return seeded.store;
    }

    it("resolves a name that is not stored to undefined, in every scope", async () => {
      const empty = await seed([]);
      const populated = await seed(subject.scopes.map((scope) => ({ scope, name: "OTHER_TOKEN", value: "other-value" })));
      for (const store of [empty, populated]) {
        for (const scope of ALL_SCOPES) expect(await store.get(scope, subject.keyOf("MISSING_TOKEN"))).toBeUndefined();
      }
    });

    it("treats an empty stored string as missing", async () => {
      const store = await seed(subject.scopes.map((scope) => ({ scope, name: "EMPTY_TOKEN", value: "" })));
      for (const scope of subject.scopes) expect(await store.get(scope, subject.keyOf("EMPTY_TOKEN"))).toBeUndefined();
    });

    it("never answers Object.prototype member names from the prototype", async () => {
      const store = await seed(subject.scopes.map((scope) => ({ scope, name: "REAL_TOKEN", value: "real-value" })));
      for (const scope of ALL_SCOPES) {
        for (const name of PROTOTYPE_NAMES) expect(await store.get(scope, subject.keyOf(name)), `${name} in ${describeScope(scope)}`).toBeUndefined();
      }
    });

    it("files a literal __proto__ / constructor key as an ordinary key", async () => {
      const entries = subject.scopes.flatMap((scope) => PROTOTYPE_NAMES.map((name) => ({ scope, name, value: `literal-${name}-${describeScope(scope)}` })));
      const store = await seed(entries);
      for (const entry of entries) expect(await store.get(entry.scope, subject.keyOf(entry.name))).toBe(entry.value);
    });

    it("round-trips values exactly", async () => {
      const values = ["sk-0123456789abcdef", "秘密のトークン🔑", "  spaces inside and around  ", 'quote" backslash\\ newline\n', "A".repeat(4096), "YWJjZGVm"];
      const entries = subject.scopes.flatMap((scope) => values.map((value, index) => ({ scope, name: `TOKEN_${index}`, value })));
      const store = await seed(entries);
      for (const entry of entries) expect(await store.get(entry.scope, subject.keyOf(entry.name))).toBe(entry.value);
    });

    it("matches keys exactly: case variants and Unicode look-alikes are other keys", async () => {
      const store = await seed(subject.scopes.map((scope) => ({ scope, name: "API_TOKEN", value: "the-value" })));
      for (const scope of subject.scopes) {
        expect(await store.get(scope, subject.keyOf("API_TOKEN"))).toBe("the-value");
        for (const name of LOOK_ALIKES) expect(await store.get(scope, subject.keyOf(name)), JSON.stringify(name)).toBeUndefined();
      }
    });

    it("never reads a value filed in one scope through another scope", async () => {
      for (const filed of subject.scopes) {
        const store = await seed([{ scope: filed, name: "SCOPED_TOKEN", value: `filed-in-${describeScope(filed)}` }]);
        for (const asked of ALL_SCOPES) {
          const expected = sameScope(filed, asked) ? `filed-in-${describeScope(filed)}` : undefined;
          expect(await store.get(asked, subject.keyOf("SCOPED_TOKEN")), `filed ${describeScope(filed)}, asked ${describeScope(asked)}`).toBe(expected);
        }
      }
    });

    it("keeps values of different scopes apart when the same name is filed in several", async () => {
      const entries = subject.scopes.map((scope) => ({ scope, name: "SAME_NAME", value: `value-of-${describeScope(scope)}` }));
      const store = await seed(entries);
      for (const entry of entries) expect(await store.get(entry.scope, subject.keyOf("SAME_NAME"))).toBe(entry.value);
    });
  });
}
