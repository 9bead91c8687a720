/**
 * SHA-256 (FIPS 180-4) as lowercase hex, identical to `createHash("sha256").update(input).digest("hex")`.
 *
 * Why not always node:crypto: loading it (with the stream modules it pulls in) costs a one-shot CLI call
 * ≈ 15 ms, while what a cached call hashes is small: its cache key (a path), and the files of a record
 * that is still checked by content (a tool edited seconds ago, see bundle-cache.ts). Unoptimised
 * JavaScript is slow per byte, though (≈ 1 ms per KiB), so only the first `JS_BUDGET_BYTES` a process
 * hashes are hashed here; after that (a larger tool, a build, a long-running host), everything goes to
 * node:crypto.
 */
const JS_BUDGET_BYTES = 4 * 1024;
let hashedInJsBytes = 0;

let nodeCrypto: typeof import("node:crypto") | undefined;

export function sha256(input: string | Uint8Array): string {
  if (!nodeCrypto) {
    const bytes = typeof input === "string" ? new TextEncoder().encode(input) : input;
    if (hashedInJsBytes + bytes.length <= JS_BUDGET_BYTES) {
      hashedInJsBytes += bytes.length;
      return sha256Js(bytes);
    }
    nodeCrypto = process.getBuiltinModule("node:crypto");
  }
  // The one-shot `hash` (Node ≥ 21.7) where there is one: no Hash object per input (the audit trail hashes every record).
  return typeof nodeCrypto.hash === "function" ? nodeCrypto.hash("sha256", input, "hex") : nodeCrypto.createHash("sha256").update(input).digest("hex");
}

/** Round constants and initial state: fractional parts of the cube and square roots of the first primes. */
const K = new Uint32Array(64);
const H0 = new Uint32Array(8);
{
  const primes: number[] = [];
  for (let candidate = 2; primes.length < 64; candidate++) {
    if (primes.every((p) => candidate % p !== 0)) primes.push(candidate);
  }
  const fraction32 = (x: number) => Math.floor((x - Math.floor(x)) * 2 ** 32) >>> 0;
  primes.forEach((p, i) => {
    K[i] = fraction32(Math.cbrt(p));
    if (i < 8) H0[i] = fraction32(Math.sqrt(p));
  });
}

/** The JavaScript implementation (exported for tests; callers use `sha256`). */
export function sha256Js(bytes: Uint8Array): string {
  // Message + 0x80 + zero padding + 64-bit big-endian bit length, in whole 64-byte blocks.
  const blocks = Math.ceil((bytes.length + 9) / 64);
  const padded = new Uint8Array(blocks * 64);
  padded.set(bytes);
  padded[bytes.length] = 0x80;
  const view = new DataView(padded.buffer);
  const bitLength = bytes.length * 8;
  view.setUint32(padded.length - 8, Math.floor(bitLength / 2 ** 32));
  view.setUint32(padded.length - 4, bitLength >>> 0);

  const h = H0.slice();
  const w = new Uint32Array(64);
  // One loop in one function: with the block step split into a function of its own, V8 optimised that
  // function in the middle of a short run and small inputs took several times longer.
  for (let offset = 0; offset < padded.length; offset += 64) {
    for (let t = 0; t < 16; t++) w[t] = view.getUint32(offset + t * 4);
    for (let t = 16; t < 64; t++) {
      const x = w[t - 15] as number;
      const y = w[t - 2] as number;
      const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      w[t] = ((w[t - 16] as number) + s0 + (w[t - 7] as number) + s1) | 0;
    }
    let a = h[0] as number;
    let b = h[1] as number;
    let c = h[2] as number;
    let d = h[3] as number;
    let e = h[4] as number;
    let f = h[5] as number;
    let g = h[6] as number;
    let hh = h[7] as number;
    for (let t = 0; t < 64; t++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const choose = (e & f) ^ (~e & g);
      const t1 = (hh + S1 + choose + (K[t] as number) + (w[t] as number)) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const majority = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (S0 + majority) | 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0] = ((h[0] as number) + a) | 0;
    h[1] = ((h[1] as number) + b) | 0;
    h[2] = ((h[2] as number) + c) | 0;
    h[3] = ((h[3] as number) + d) | 0;
    h[4] = ((h[4] as number) + e) | 0;
    h[5] = ((h[5] as number) + f) | 0;
    h[6] = ((h[6] as number) + g) | 0;
    h[7] = ((h[7] as number) + hh) | 0;
  }
  let hex = "";
  for (const word of h) hex += word.toString(16).padStart(8, "0");
  return hex;
}
