import { describe, expect, it } from "vitest";
import { BootFile, type KeptBytes, type PythonBootTools } from "../../../src/isolation/isolate/python-boot.js";

/**
 * The files a Python boot copies into its isolate (python-boot.ts `BootFile`): kept outside every isolate
 * once, by moving a whole Buffer's memory (no copy) or copying a view of a larger one once, and then
 * copied into each isolate that boots. A stand-in for isolated-vm's ExternalCopy counts what happens.
 */
function fakeTools(): PythonBootTools & { kept: ArrayBuffer[]; copiesInto: number } {
  const tools = {
    kept: [] as ArrayBuffer[],
    copiesInto: 0,
    callback: () => {
      throw new Error("not used");
    },
    bytesInto: () => {
      throw new Error("not used");
    },
    keep(bytes: ArrayBuffer): KeptBytes {
      tools.kept.push(bytes);
      const held = bytes.slice(0); // what an ExternalCopy holds once the ArrayBuffer moved in
      return {
        copyInto: () => {
          tools.copiesInto++;
          return held.slice(0);
        },
        copy: () => held.slice(0),
      };
    },
  };
  return tools;
}

describe("a Python boot's files", () => {
  it("are kept once, by their own memory when the Buffer is whole, and copied into each isolate that boots", () => {
    const tools = fakeTools();
    const bytes = Buffer.from(new Uint8Array([1, 2, 3, 4]).buffer);
    const file = new BootFile(bytes);
    const own = bytes.buffer;
    for (let boot = 0; boot < 3; boot++) expect(new Uint8Array(file.copyInto(tools) as ArrayBuffer)).toEqual(new Uint8Array([1, 2, 3, 4]));
    expect(tools.kept).toEqual([own]);
    expect(tools.kept[0]).toBe(own);
    expect(tools.copiesInto).toBe(3);
    expect([...file.buffer]).toEqual([1, 2, 3, 4]);
  });

  it("copy a view of a larger buffer once, never handing its neighbours' bytes over", () => {
    const tools = fakeTools();
    const pool = Buffer.from([9, 9, 5, 6, 7, 9]);
    const file = new BootFile(pool.subarray(2, 5));
    expect([...new Uint8Array(file.copyInto(tools) as ArrayBuffer)]).toEqual([5, 6, 7]);
    expect(tools.kept[0]).not.toBe(pool.buffer);
    expect([...pool]).toEqual([9, 9, 5, 6, 7, 9]);
  });
});
