import { describe, expect, it } from "vitest";
import { BodyBlocks } from "../../src/capabilities/net-body.js";

const MiB = 1024 * 1024;

/** Adds `chunks` as net-request.ts does: each charged (`allocatedWith`) before it is added; returns the most charged. */
function fill(body: BodyBlocks, chunks: Buffer[]): number {
  let most = 0;
  let undercharged = 0;
  for (const chunk of chunks) {
    const charged = body.allocatedWith(chunk.length);
    body.add(chunk);
    if (body.allocatedBytes !== charged) undercharged++;
    most = Math.max(most, charged);
  }
  expect(undercharged, "chunks whose blocks were not what was charged").toBe(0);
  return most;
}

describe("BodyBlocks", () => {
  it("holds a body sent a byte at a time in a few blocks, not an allocation per byte", () => {
    const body = new BodyBlocks(10 * MiB, undefined);
    const bytes = 100 * 1024;
    const chunks = Array.from({ length: bytes }, (_, i) => Buffer.from([i % 251]));
    fill(body, chunks);
    expect(body.bytes).toBe(bytes);
    // Blocks grow (16 KiB, then as much as held): the slack is at most what is held.
    expect(body.allocatedBytes).toBeLessThanOrEqual(2 * bytes);
    const joined = body.join();
    expect(joined.body.equals(Buffer.concat(chunks))).toBe(true);
    expect(joined.heldBytes).toBe(bytes);
  });

  it("copies a body of its declared size into one block, never joined", () => {
    const body = new BodyBlocks(10 * MiB, 3 * MiB);
    const chunks = Array.from({ length: 48 }, (_, i) => Buffer.alloc(64 * 1024, i));
    // The first chunk charges the whole declared size.
    expect(body.allocatedWith(chunks[0]!.length)).toBe(3 * MiB);
    fill(body, chunks);
    expect(body.bytesWhileJoining).toBe(3 * MiB);
    const joined = body.join();
    expect(joined.heldBytes).toBe(3 * MiB);
    expect(joined.body.equals(Buffer.concat(chunks))).toBe(true);
  });

  it("goes on in grown blocks past a declared size, and counts the joined copy while joining", () => {
    const body = new BodyBlocks(10 * MiB, 1024);
    const chunks = [Buffer.alloc(1000, 1), Buffer.alloc(5000, 2), Buffer.alloc(70_000, 3)];
    const most = fill(body, chunks);
    expect(most).toBe(body.allocatedBytes);
    expect(body.bytesWhileJoining).toBe(body.allocatedBytes + body.bytes);
    const joined = body.join();
    expect(joined.body.equals(Buffer.concat(chunks))).toBe(true);
    expect(joined.heldBytes).toBe(76_000);
  });

  it("never grows a block past the cap by more than the chunk that needs it", () => {
    const body = new BodyBlocks(100_000, undefined);
    fill(
      body,
      Array.from({ length: 99 }, () => Buffer.alloc(1000)),
    );
    expect(body.allocatedBytes).toBeLessThanOrEqual(100_000);
  });
});
