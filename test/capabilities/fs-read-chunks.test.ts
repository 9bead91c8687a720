import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { FsCapability } from "../../src/capabilities/fs.js";
import { DEFAULT_FS_LIMITS } from "../../src/fs-limits.js";
import { READ_BUFFERS, ReadBufferPool } from "../../src/isolation/wire/bulk-channel.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/** readFile decodes chunk by chunk: characters and base64 groups split across chunks come out whole. */
describe("readFile decodes across chunk boundaries", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it.each([0, 1, 2, 3, 256 * 1024 - 1, 256 * 1024, 256 * 1024 + 1, 3 * 256 * 1024 + 2])("%i bytes of mixed text, as UTF-8 and base64", async (size) => {
    data = makeDataDir();
    const alice = data.anima("alice");
    const text = "aé😀€".repeat(Math.ceil(size / 10) + 1);
    const bytes = Buffer.from(text).subarray(0, size);
    writeFileSync(join(alice, "f.bin"), bytes);
    const fs = new FsCapability(alice, DEFAULT_FS_LIMITS);
    expect(await fs.readFile("f.bin", "utf8")).toBe(bytes.toString("utf8"));
    expect(await fs.readFile("f.bin", "base64")).toBe(bytes.toString("base64"));
  });
});

/**
 * Read buffers are reused (bulk-channel.ts ReadBufferPool): a buffer goes back only after its bytes were
 * copied out, and a read sees only what its own read(2) wrote, never what an earlier read left behind.
 */
describe("reused read buffers", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it("hand a recycled buffer to the next read with none of the last read's bytes visible", async () => {
    data = makeDataDir();
    const alice = data.anima("alice");
    const bob = data.anima("bob");
    writeFileSync(join(alice, "secret.txt"), "S".repeat(2 * 256 * 1024));
    // Bob's file fills 60 % of a buffer (kept as a view, not copied): the rest of that buffer held Alice's bytes.
    const bobBytes = Math.floor(0.6 * 256 * 1024);
    writeFileSync(join(bob, "mine.txt"), "b".repeat(bobBytes));
    const secret = await new FsCapability(alice, DEFAULT_FS_LIMITS).readText("secret.txt");
    const recycled = [...secret.chunks].map((chunk) => chunk.buffer);
    secret.recycle(READ_BUFFERS);
    expect(() => secret.decode()).toThrow(/recycled/);
    const mine = await new FsCapability(bob, DEFAULT_FS_LIMITS).readText("mine.txt", "base64");
    expect(recycled).toContain(mine.chunks[0]!.buffer); // the same memory, reused
    expect(mine.byteLength).toBe(bobBytes);
    expect(Buffer.from(mine.decode(), "base64").toString()).toBe("b".repeat(bobBytes));
    mine.recycle(READ_BUFFERS);
  });

  it("gives the buffers of a refused read back, and keeps at most its bound of idle ones", async () => {
    data = makeDataDir();
    const alice = data.anima("alice");
    writeFileSync(join(alice, "big.txt"), "x".repeat(3 * 256 * 1024));
    // Two idle buffers for the read to take: if it did not give them back, fewer would be idle after.
    READ_BUFFERS.give(Buffer.allocUnsafeSlow(READ_BUFFERS.bufferBytes));
    READ_BUFFERS.give(Buffer.allocUnsafeSlow(READ_BUFFERS.bufferBytes));
    const idle = READ_BUFFERS.idle;
    const fs = new FsCapability(alice, { ...DEFAULT_FS_LIMITS, maxReadBytes: 300 * 1024 });
    await expect(fs.readText("big.txt")).rejects.toMatchObject({ type: "PermissionDenied" });
    expect(READ_BUFFERS.idle).toBe(idle);
    expect(idle).toBeLessThanOrEqual(256);
    const pool = new ReadBufferPool(16, 2);
    const one = Buffer.alloc(16);
    pool.give(one);
    pool.give(one); // twice: it would go to two reads at once
    pool.give(Buffer.alloc(8)); // not one of its size
    expect(pool.idle).toBe(1);
    pool.give(Buffer.alloc(16));
    pool.give(Buffer.alloc(16)); // beyond its bound
    expect(pool.idle).toBe(2);
    expect(pool.take()).not.toBe(pool.take());
  });

  it("drops its idle buffers once no read took one for its trim time", () => {
    vi.useFakeTimers();
    try {
      const pool = new ReadBufferPool(16, 4, 40);
      pool.give(Buffer.alloc(16));
      pool.give(Buffer.alloc(16));
      vi.advanceTimersByTime(30);
      pool.give(pool.take()); // in use: kept past the first trim
      vi.advanceTimersByTime(30);
      expect(pool.idle).toBe(2);
      vi.advanceTimersByTime(30);
      expect(pool.idle).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
