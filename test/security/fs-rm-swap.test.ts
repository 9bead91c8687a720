import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FsCapability } from "../../src/capabilities/fs.js";
import { DEFAULT_FS_LIMITS } from "../../src/fs-limits.js";
import { QuotaTracker } from "../../src/capabilities/quota.js";
import { ToolHostError } from "../../src/errors.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * Attack: while a tool removes a large tree recursively, something else in its own Anima's folder keeps
 * replacing sub-folders of that tree by links to another Anima's folder. Node's recursive rm walks by
 * path names and once followed such a link, deleting `animas/eve2/secret.txt`. Removal now goes by
 * descriptor: whatever is swapped, nothing outside the Anima's folder changes.
 */
const ROUNDS = 20;
/**
 * Rounds stop early once this much time went on them (at least `MIN_ROUNDS` run): a round's 3,000 removals
 * are system calls racing the flipper's, ≈ 4.4 s a round beside other test runs (twenty passed the old
 * 120 s timeout on CI once).
 */
const ROUNDS_BUDGET_MS = 70_000;
const MIN_ROUNDS = 3;
const FOLDERS = 30;
const FILES_PER_FOLDER = 100; // 3,000 files a round

/** Swaps work/d<k> for a link to ../../eve2 and back, as fast as it can, until killed. */
const FLIPPER = `
const fs = require("fs"), path = require("path");
const [anima, folders] = [process.argv[1], Number(process.argv[2])];
const pause = new Int32Array(new SharedArrayBuffer(4));
for (let n = 0; ; n++) {
  const k = n % folders, dir = path.join(anima, "work", "d" + k), aside = path.join(anima, "aside" + k);
  try { fs.renameSync(dir, aside); } catch { continue; }
  try { fs.symlinkSync("../../eve2", dir); } catch {}
  Atomics.wait(pause, 0, 0, 2); // leave the link in place for 2 ms
  try { fs.unlinkSync(dir); } catch {}
  try { fs.renameSync(aside, dir); } catch {}
}`;

let data: TempDataDir;
let flipper: ChildProcess | undefined;
afterEach(() => {
  flipper?.kill("SIGKILL");
  data?.cleanup();
});

describe("recursive rm with links swapped in (flipper)", () => {
  it(`removes ${FOLDERS * FILES_PER_FOLDER} files up to ${ROUNDS} times; nothing outside the Anima's folder changes`, async () => {
    data = makeDataDir({ "animas/eve2/secret.txt": "eve2's secret", "animas/eve2/notes/a.txt": "a" });
    const eve = data.anima("eve");
    const eve2 = join(data.dir, "animas", "eve2");
    const fs = new FsCapability(eve, { ...DEFAULT_FS_LIMITS, maxFiles: 1_000_000 });
    const outcomes: string[] = [];
    const startedMs = performance.now();
    for (let round = 0; round < ROUNDS && (round < MIN_ROUNDS || performance.now() - startedMs < ROUNDS_BUDGET_MS); round++) {
      for (let k = 0; k < FOLDERS; k++) {
        const dir = join(eve, "work", `d${k}`);
        mkdirSync(dir, { recursive: true });
        // Names the other Anima's folder also has: a followed link deletes its files, not these.
        writeFileSync(join(dir, "secret.txt"), "x");
        for (let i = 1; i < FILES_PER_FOLDER; i++) writeFileSync(join(dir, `f${i}.txt`), "x");
      }
      flipper = spawn(process.execPath, ["-e", FLIPPER, eve, String(FOLDERS)], { stdio: "ignore" });
      try {
        await fs.rm("work", true);
        outcomes.push("removed");
      } catch (error) {
        // Refusing a swapped folder is fine; following it is not.
        expect(error).toBeInstanceOf(ToolHostError);
        outcomes.push((error as ToolHostError).type);
      } finally {
        flipper.kill("SIGKILL");
        await new Promise((resolve) => flipper?.once("exit", resolve));
        flipper = undefined;
      }
      expect(readFileSync(join(eve2, "secret.txt"), "utf8")).toBe("eve2's secret");
      expect(readdirSync(eve2).sort()).toEqual(["notes", "secret.txt"]);
      expect(readFileSync(join(eve2, "notes", "a.txt"), "utf8")).toBe("a");
      // Put back what the flipper left aside, for the next round.
      for (const entry of readdirSync(eve)) if (entry.startsWith("aside")) await fs.rm(entry, true);
      if (existsSync(join(eve, "work"))) await fs.rm("work", true).catch(() => undefined);
    }
    expect(outcomes.length).toBeGreaterThanOrEqual(MIN_ROUNDS);
  }, 180_000);
});

describe("quota measurement with links swapped in (flipper)", () => {
  it("never counts another Anima's files, however often a folder is swapped for a link", async () => {
    const outside: Record<string, string> = {};
    for (let i = 0; i < 3_000; i++) outside[`animas/eve2/many/f${i}.txt`] = "x";
    data = makeDataDir(outside);
    const eve = data.anima("eve");
    for (let k = 0; k < FOLDERS; k++) {
      mkdirSync(join(eve, "work", `d${k}`), { recursive: true });
      for (let i = 0; i < 10; i++) writeFileSync(join(eve, "work", `d${k}`, `f${i}.txt`), "x");
    }
    // eve holds ~350 entries; a walk that followed one link would count 3,000 more and refuse.
    const tracker = QuotaTracker.for(eve, { quotaBytes: 1 << 30, maxFiles: 2_000 });
    const swapping = spawn(process.execPath, ["-e", FLIPPER, eve, String(FOLDERS)], { stdio: "ignore" });
    flipper = swapping;
    try {
      for (let round = 0; round < 200; round++) {
        tracker.invalidate();
        await tracker.reserve(0, 1);
      }
    } finally {
      swapping.kill("SIGKILL");
    }
  }, 60_000);
});
