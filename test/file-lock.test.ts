import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { withLock, withLockIfFree } from "../src/file-lock.js";

describe("file locks", () => {
  let dir: string;
  let lock: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "aw-lock-"));
    lock = join(dir, "x.lock");
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("runs the work holding the lock and removes it afterwards, also when the work throws", async () => {
    expect(await withLock(lock, () => Promise.resolve(existsSync(lock)))).toBe(true);
    expect(existsSync(lock)).toBe(false);
    await expect(withLockIfFree(lock, () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(existsSync(lock)).toBe(false);
  });

  it("a live holder: withLock throws after its wait, withLockIfFree skips the work; the lock stays the holder's", async () => {
    writeFileSync(lock, String(process.pid)); // this process is alive
    let ran = false;
    expect(await withLockIfFree(lock, () => (ran = true), { waitMs: 50, retryMs: 5 })).toBeUndefined();
    expect(ran).toBe(false);
    await expect(withLock(lock, () => Promise.resolve(1), { waitMs: 50, retryMs: 5 })).rejects.toThrow(/held by a live process for 50 ms/);
    expect(existsSync(lock)).toBe(true);
  });

  it("a dead holder's lock is taken over", async () => {
    const { pid } = spawnSync(process.execPath, ["-e", ""]);
    writeFileSync(lock, String(pid)); // ended by now
    expect(await withLockIfFree(lock, () => "done", { waitMs: 1_000, retryMs: 5 })).toBe("done");
  });
});
