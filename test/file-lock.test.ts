import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
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

  it("a FIFO in the lock's place neither blocks the taker nor holds the lock: it is unlinked and the work runs (fifo_lock_file)", () => {
    // A synchronous read of a FIFO with no writer blocks the whole process (the daemon, for every Anima):
    // the take runs in a child (the built dist) under a bounded wait, since a blocked read cannot be timed
    // out from inside the process it blocks.
    const made = spawnSync("mkfifo", [lock]);
    expect(made.status).toBe(0);
    const script = `
      import { tryLockSync } from ${JSON.stringify(pathToFileURL(resolve("dist/src/file-lock.js")).href)};
      const lock = ${JSON.stringify(lock)};
      const first = tryLockSync(lock);
      const second = tryLockSync(lock);
      console.log(JSON.stringify({ first, second }));
    `;
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 20_000, killSignal: "SIGKILL" });
    expect(child.signal, `the child was killed after 20 s (blocked on the FIFO); stderr: ${child.stderr}`).toBeNull();
    expect(JSON.parse(child.stdout)).toEqual({ first: false, second: true });
    expect(lstatSync(lock).isFile()).toBe(true); // the taker's own lock now
  }, 30_000);

  it("a link in the lock's place is not followed: its target, naming a live pid, neither holds the lock nor is touched (symlinked_lock_file)", async () => {
    const target = join(dir, "elsewhere");
    writeFileSync(target, String(process.pid)); // a live pid: read through the link, the lock would look held
    symlinkSync(target, lock);
    expect(await withLockIfFree(lock, () => "done", { waitMs: 1_000, retryMs: 5 })).toBe("done");
    expect(readFileSync(target, "utf8")).toBe(String(process.pid));
    expect(existsSync(lock)).toBe(false);
  });

  it("a directory in the lock's place fails the take with a message naming it", async () => {
    mkdirSync(lock);
    await expect(withLock(lock, () => Promise.resolve(1), { waitMs: 50, retryMs: 5 })).rejects.toThrow(/a directory is in the lock's place/);
  });
});
