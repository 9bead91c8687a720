import { createHash, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { sha256, sha256Js } from "../../src/bundling/sha256.js";

const reference = (input: string | Uint8Array) => createHash("sha256").update(input).digest("hex");

/** The JavaScript SHA-256 spares small cached runs loading node:crypto; it must agree with it exactly. */
describe("sha256", () => {
  it("matches node:crypto at every padding boundary and over several blocks", () => {
    for (const length of [0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 4096, 70_000]) {
      for (let round = 0; round < 3; round++) {
        const bytes = randomBytes(length);
        expect(sha256Js(bytes), `length ${length}`).toBe(reference(bytes));
      }
    }
  });

  it("hashes strings as UTF-8, like node:crypto", () => {
    const text = "héllo wörld 🎉 — ツール\0".repeat(50);
    expect(sha256(text)).toBe(reference(text));
    expect(sha256("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  });

  it("gives the same digests after its budget sends inputs to node:crypto", () => {
    const inputs = Array.from({ length: 12 }, (_, i) => randomBytes(1500 + i));
    for (const input of inputs) expect(sha256(input)).toBe(reference(input));
    const large = randomBytes(300_000);
    expect(sha256(large)).toBe(reference(large));
  });
});
