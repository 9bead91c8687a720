import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, MODES, expectOk, startHost } from "../../security/harness.js";

// A tool that reads files much longer than one bridge entry carries (text-pieces.ts: 256 Ki characters)
// and reports what it got: length, a checksum and where the text first differs from what it expected.
const LONG_READER = `
import { fs } from "@animaworks/tool";
export function get_tool_schemas() {
  return [{ name: "long_reader_read", description: "read a long file", input_schema: { type: "object", properties: { path: { type: "string" }, bytes: { type: "boolean" } }, required: ["path"] } }];
}
function checksum(values: ArrayLike<number>) { let sum = 0; for (let i = 0; i < values.length; i++) sum = (sum * 31 + values[i]) % 2147483647; return sum; }
export async function dispatch(_name: string, args: { path: string; bytes?: boolean }) {
  if (args.bytes) {
    const bytes = await fs.readFile(args.path, { encoding: "bytes" });
    return { length: bytes.length, checksum: checksum(bytes) };
  }
  const text = await fs.readFile(args.path);
  const codes: number[] = [];
  for (let i = 0; i < text.length; i++) codes.push(text.charCodeAt(i));
  return { length: text.length, checksum: checksum(codes) };
}`;

function checksum(values: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum = (sum * 31 + (values[i] as number)) % 2147483647;
  return sum;
}

// Multi-byte characters of every length, so that pieces and the bulk pipe's frames split them anywhere.
const TEXT = "ascii é € 😀 \u0000 line\n".repeat(60_000); // ≈ 1.3 M characters, 1.6 MB
const BYTES = Buffer.from(Array.from({ length: 1_500_000 }, (_, i) => (i * 7919) % 256));

describe.each(MODES)("long texts read by a tool (%s isolation)", (mode) => {
  let harness: Harness;
  beforeAll(async () => {
    harness = startHost({ mode, timeoutMs: 20_000, animas: ["reader"] });
    harness.data.write("animas/reader/tools/long_reader.ts", LONG_READER);
    harness.data.write("animas/reader/long.txt", TEXT);
    writeFileSync(join(harness.data.dir, "animas", "reader", "long.bin"), BYTES);
  });
  afterAll(() => harness?.close());

  it("arrive whole and in order, as text and as bytes, call after call", async () => {
    const units: number[] = [];
    for (let i = 0; i < TEXT.length; i++) units.push(TEXT.charCodeAt(i));
    for (let round = 0; round < 2; round++) {
      const text = expectOk(await harness.call("reader", "long_reader_read", { path: "long.txt" }));
      expect(JSON.parse(text)).toEqual({ length: TEXT.length, checksum: checksum(units) });
      const bytes = expectOk(await harness.call("reader", "long_reader_read", { path: "long.bin", bytes: true }));
      expect(JSON.parse(bytes)).toEqual({ length: BYTES.length, checksum: checksum(BYTES) });
    }
  });
});
