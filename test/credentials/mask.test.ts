import { describe, expect, it } from "vitest";
import { maskSecret, redactSecrets } from "../../src/credentials/mask.js";

describe("maskSecret (docs/animaworks-reference.md checklist 107)", () => {
  it("keeps the first four characters of longer values", () => {
    expect(maskSecret("sk-abcdef123456")).toBe("sk-a****");
    expect(maskSecret("12345")).toBe("1234****");
  });

  it("masks values of four characters or fewer entirely", () => {
    for (const value of ["", "a", "abc", "abcd"]) expect(maskSecret(value)).toBe("****");
  });

  it("counts code points, never cutting a surrogate pair", () => {
    expect(maskSecret("🔑🔑🔑🔑🔑")).toBe("🔑🔑🔑🔑****");
    expect(maskSecret("🔑🔑🔑🔑")).toBe("****");
  });
});

describe("redactSecrets", () => {
  it("replaces every occurrence of every secret", () => {
    expect(redactSecrets("token=abcd1234 again abcd1234; other=zzzz9999", ["abcd1234", "zzzz9999"])).toBe("token=**** again ****; other=****");
  });

  it("prefers the longest secret where secrets overlap", () => {
    expect(redactSecrets("key: abcd1234efgh", ["abcd", "abcd1234efgh"])).toBe("key: ****");
    expect(redactSecrets("key: abcd1234efgh", ["abcd1234efgh", "abcd"])).toBe("key: ****");
    expect(redactSecrets("x abcd y", ["abcd1234efgh", "abcd"])).toBe("x **** y");
  });

  it("ignores values shorter than four characters", () => {
    expect(redactSecrets("a cat sat on abc", ["a", "at", "abc"])).toBe("a cat sat on abc");
  });

  it("treats secrets as literals, not patterns", () => {
    expect(redactSecrets("a.b*c+d? and aXbYc", ["a.b*c+d?", "a.b.c"])).toBe("**** and aXbYc");
    expect(redactSecrets("(x|y)[z]{2}\\ and x", ["(x|y)[z]{2}\\"])).toBe("**** and x");
  });

  it("also redacts the JSON-escaped spelling of a secret", () => {
    const secret = 'pa"ss\\word\n1';
    const record = JSON.stringify({ message: `used ${secret}` });
    expect(redactSecrets(record, [secret])).toBe(JSON.stringify({ message: "used ****" }));
  });

  it("handles Unicode secrets and leaves text without secrets alone", () => {
    expect(redactSecrets("鍵は秘密のトークンです", ["秘密のトークン"])).toBe("鍵は****です");
    expect(redactSecrets("nothing here", [])).toBe("nothing here");
    expect(redactSecrets("nothing here", ["absent-secret"])).toBe("nothing here");
  });
});
