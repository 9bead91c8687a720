import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { DEFAULT_FS_LIMITS } from "../../src/fs-limits.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { okOutput } from "../helpers/tools.js";

/**
 * Bytes a tool writes or reads cross the isolate as base64 (sandbox/capabilities.ts). At the default
 * memory limit, a write just under the 10 MiB write limit, and reading it back, must work from a
 * TypeScript tool and from a Python tool alike: the conversion may hold about its input and its output,
 * never a multiple of them (built a character at a time, a 4 MB write met the 128 MB limit).
 */
const NINE_MIB = 9 * 1024 * 1024;

/** The bytes each tool writes: byte i is (i * 31 + i >> 8) & 255, so that an offset or a lost byte shows. */
function pattern(size: number): Buffer {
  const bytes = Buffer.alloc(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + (i >> 8)) & 255;
  return bytes;
}
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

const TS_TOOL = `import { fs } from "@animaworks/tool";
export function get_tool_schemas() {
  return [{ name: "big_bytes_ts_run", description: "d", input_schema: { type: "object", properties: { size: { type: "integer" } } } }];
}
export async function dispatch(name: string, args: { size: number }) {
  const bytes = new Uint8Array(args.size);
  for (let i = 0; i < args.size; i++) bytes[i] = (i * 31 + (i >> 8)) & 255;
  await fs.writeFile("big.bin", bytes);
  const back = (await fs.readFile("big.bin", { encoding: null })) as Uint8Array;
  let same = back.length === bytes.length;
  for (let i = 0; same && i < bytes.length; i++) same = back[i] === bytes[i];
  return { length: back.length, same };
}
`;

const PY_TOOL = `import hashlib
def get_tool_schemas():
    return [{"name": "big_bytes_py_run", "description": "d", "input_schema": {"type": "object", "properties": {"size": {"type": "integer"}}}}]
def dispatch(name, args):
    size = args["size"]
    data = bytes((i * 31 + (i >> 8)) & 255 for i in range(size))
    with open(args["anima_dir"] + "/big.bin", "wb") as f:
        f.write(data)
    with open(args["anima_dir"] + "/big.bin", "rb") as f:
        back = f.read()
    return {"length": len(back), "sha256": hashlib.sha256(back).hexdigest()}
`;

let data: TempDataDir;
let host: ToolHost;
beforeAll(() => {
  data = makeDataDir({ "animas/alice/tools/big_bytes_ts.ts": TS_TOOL, "animas/alice/tools/big_bytes_py.py": PY_TOOL });
  // The default memory limit: the one these sizes must fit in.
  host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "no-core-tools"), loadTimeoutMs: 60_000, timeoutMs: 60_000, onLog: () => {} });
});
afterAll(async () => {
  await host?.close();
  data?.cleanup();
});

describe("bytes just under the write limit, at the default memory limit", () => {
  it("9 MiB is under the write limit", () => expect(NINE_MIB).toBeLessThan(DEFAULT_FS_LIMITS.maxWriteBytes));

  it.each([1, 2, 3, 8 * 1024 + 1, NINE_MIB])(
    "a TypeScript tool writes %i bytes and reads them back",
    async (size) => {
      expect(JSON.parse(okOutput(await host.call("alice", "big_bytes_ts_run", { size })))).toEqual({ length: size, same: true });
      expect(sha256(readFileSync(join(data.dir, "animas", "alice", "big.bin")))).toBe(sha256(pattern(size)));
    },
    120_000,
  );

  it.each([2, NINE_MIB])(
    "a Python tool writes %i bytes and reads them back",
    async (size) => {
      const expected = sha256(pattern(size));
      expect(JSON.parse(okOutput(await host.call("alice", "big_bytes_py_run", { size })))).toEqual({ length: size, sha256: expected });
      expect(sha256(readFileSync(join(data.dir, "animas", "alice", "big.bin")))).toBe(expected);
    },
    120_000,
  );
});
