import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { BulkReceiver, UndecodedText, writeBulk } from "../../../src/isolation/wire/bulk-channel.js";
import { createHost } from "../../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor } from "../../helpers/data-dir.js";

const TEXT = "aé😀€\n".repeat(100_000); // multi-byte characters split across chunk and frame boundaries
const BYTES = Buffer.from(TEXT);

/** The bytes split into chunks of uneven sizes, as reads return them. */
function chunked(bytes: Buffer, size: number): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size));
  return chunks;
}

/** Everything written to a pipe, handed to a receiver in pieces of `pieceBytes`. */
async function carry(texts: Array<[number, UndecodedText]>, pieceBytes: number): Promise<{ pipe: PassThrough; receiver: BulkReceiver }> {
  const pipe = new PassThrough();
  const written: Buffer[] = [];
  pipe.on("data", (data: Buffer) => written.push(data));
  for (const [id, text] of texts) expect(await writeBulk(pipe, id, text)).toBe(true);
  const input = new PassThrough();
  const receiver = new BulkReceiver(input);
  for (const piece of chunked(Buffer.concat(written), pieceBytes)) input.write(piece);
  await new Promise((resolve) => setImmediate(resolve));
  return { pipe, receiver };
}

describe("bulk channel frames", () => {
  it.each([1, 7, 9, 4096, 300_000])("rebuilds UTF-8 and base64 text exactly from pieces of %i bytes", async (pieceBytes) => {
    const { receiver } = await carry(
      [
        [1, new UndecodedText(chunked(BYTES, 65_537), "utf8")],
        [2, new UndecodedText(chunked(BYTES, 1_000), "base64")],
      ],
      pieceBytes,
    );
    const got: Record<number, string> = {};
    receiver.expect(1, BYTES.length, (text) => (got[1] = text.join()));
    receiver.expect(2, BYTES.length, (text) => (got[2] = text.join()));
    expect(got[1]).toBe(TEXT);
    expect(got[2]).toBe(BYTES.toString("base64"));
  });

  it("completes an answer whose message arrives before its bytes, and an empty file at once", async () => {
    const input = new PassThrough();
    const receiver = new BulkReceiver(input);
    let text: string | undefined;
    receiver.expect(5, BYTES.length, (t) => (text = t.join()));
    let empty: string | undefined;
    receiver.expect(6, 0, (t) => (empty = t.join()));
    expect(empty).toBe("");
    expect(text).toBeUndefined();
    const pipe = new PassThrough();
    pipe.on("data", (data: Buffer) => input.write(data));
    await writeBulk(pipe, 5, new UndecodedText(chunked(BYTES, 256 * 1024), "utf8"));
    await waitFor(() => text !== undefined);
    expect(text).toBe(TEXT);
  });

  it("serialises as its text anywhere else (in-process isolates)", () => {
    expect(JSON.stringify({ value: new UndecodedText(chunked(BYTES, 3), "utf8") })).toBe(JSON.stringify({ value: TEXT }));
  });
});

describe("file reads through a sandbox process", () => {
  let data: TempDataDir | undefined;
  afterEach(() => data?.cleanup());

  it.each(["process", "in-process"] as const)(
    "give the tool the same text as the file holds (%s isolation)",
    async (isolation) => {
      data = makeDataDir({
        "animas/alice/tools/reader.ts": `
import { fs } from "@animaworks/tool";
export function get_tool_schemas() { return [{ name: "reader_read", description: "r", input_schema: { type: "object", properties: { encoding: { type: "string" } } } }]; }
function sum(t) { let s = 0; for (let i = 0; i < t.length; i++) s = (s * 31 + (typeof t === "string" ? t.charCodeAt(i) : t[i])) >>> 0; return s; }
export async function dispatch(name, args) {
  const texts = await Promise.all([1, 2, 3].map(() => fs.readFile("big.txt", args.encoding)));
  return texts.map((t) => [t.length, sum(t)]);
}`,
      });
      data.write("animas/alice/big.txt", TEXT);
      const sum = (t: string | Buffer) => {
        let s = 0;
        for (let i = 0; i < t.length; i++) s = (s * 31 + (typeof t === "string" ? t.charCodeAt(i) : (t[i] as number))) >>> 0;
        return s;
      };
      const host = createHost({ dataDir: data.dir, isolation, timeoutMs: 20_000, memoryLimitMb: 128 });
      try {
        for (const [encoding, expected] of [
          ["utf8", TEXT],
          ["bytes", BYTES],
        ] as const) {
          const result = await host.call("alice", "reader_read", { encoding });
          expect(result.status).toBe("ok");
          const output = JSON.parse((result as { output: string }).output) as number[][];
          expect(output).toEqual([1, 2, 3].map(() => [expected.length, sum(expected)]));
        }
      } finally {
        await host.close();
      }
    },
    60_000,
  );
});
