import {
  closeSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { HEAD_SLOT_BYTES, headFileOf, readHead } from "../../src/audit/trail-head.js";
import { verifyAuditDir } from "../../src/audit/verify.js";

/**
 * The trail head in two slots (trail-head.ts) and a writer's memo of its own last append (trail.ts): a head
 * is updated in place, a torn slot reads as the head before it, a head of the older one-object form is
 * read and replaced, and writers taking turns on one trail (a daemon and one-shot CLI runs) keep one whole
 * chain, however their memos go stale.
 */

let dir: string;
let auditDir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awt-trail-head-"));
  auditDir = join(dir, "audit");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const trailFile = () => join(auditDir, "animas", "eve.jsonl");
const seqs = () =>
  readFileSync(trailFile(), "utf8")
    .trimEnd()
    .split("\n")
    .map((line) => (JSON.parse(line) as { seq: number }).seq);
const record = (i: number) => ({ kind: "capability" as const, anima: "eve", tool: "t", operation: "fs.readFile", target: `f${i}`, outcome: "ok" as const });

async function append(log: JsonlAuditLog, from: number, count: number): Promise<void> {
  for (let i = from; i < from + count; i++) log.append(record(i));
  await log.flush();
}

describe("audit trail heads", () => {
  it("updates the head in place, one file for the trail's life, and verify finds the chain whole", async () => {
    const log = new JsonlAuditLog(auditDir);
    await append(log, 0, 1);
    const inode = statSync(headFileOf(trailFile())).ino;
    for (let round = 1; round <= 5; round++) await append(log, round * 3, 3);
    await log.close();
    expect(statSync(headFileOf(trailFile())).ino).toBe(inode);
    expect(statSync(headFileOf(trailFile())).size).toBe(2 * HEAD_SLOT_BYTES);
    expect(readHead(trailFile())).toMatchObject({ seq: 16, sizeBytes: statSync(trailFile()).size });
    expect(verifyAuditDir(auditDir).ok).toBe(true);
  });

  it("reads a torn newer slot as the head before it, and the next append continues the chain from the file", async () => {
    const log = new JsonlAuditLog(auditDir);
    await append(log, 0, 2);
    const before = readHead(trailFile())!;
    await append(log, 2, 2);
    const after = readHead(trailFile())!;
    expect(after.seq).toBe(before.seq + 2);
    // A crash in the middle of the newer slot's write: half of it is the old bytes.
    const head = readFileSync(headFileOf(trailFile()), "utf8");
    const newer = head.slice(0, HEAD_SLOT_BYTES).includes(`"seq":${after.seq},`) ? 0 : 1;
    const fd = openSync(headFileOf(trailFile()), "r+");
    writeSync(fd, "x".repeat(40), newer * HEAD_SLOT_BYTES + 20);
    closeSync(fd);
    expect(readHead(trailFile())).toEqual(before);

    // A new writer (another process) finds the head behind its file and continues from the file's last record.
    const next = new JsonlAuditLog(auditDir);
    await append(next, 4, 2);
    await next.close();
    await log.close();
    expect(seqs()).toEqual([1, 2, 3, 4, 5, 6]);
    expect(verifyAuditDir(auditDir).ok).toBe(true);
  });

  it("reads a head written as one object by an earlier build, and replaces it with slots", async () => {
    const log = new JsonlAuditLog(auditDir);
    await append(log, 0, 3);
    await log.close();
    const stored = readHead(trailFile())!;
    writeFileSync(headFileOf(trailFile()), JSON.stringify(stored));
    expect(readHead(trailFile())).toEqual(stored);

    const next = new JsonlAuditLog(auditDir);
    await append(next, 3, 2);
    await next.close();
    expect(statSync(headFileOf(trailFile())).size).toBe(2 * HEAD_SLOT_BYTES);
    expect(readHead(trailFile())).toMatchObject({ seq: 5, droppedThroughSeq: stored.droppedThroughSeq });
    expect(seqs()).toEqual([1, 2, 3, 4, 5]);
    expect(verifyAuditDir(auditDir).ok).toBe(true);
  });

  it("keeps one chain when writers take turns, each with a memo the other's appends made stale", async () => {
    const daemon = new JsonlAuditLog(auditDir);
    const cli = new JsonlAuditLog(auditDir);
    for (let round = 0; round < 6; round++) await append(round % 2 === 0 ? daemon : cli, round * 2, round % 3 === 2 ? 3 : 1);
    await daemon.close();
    await cli.close();
    const expected = Array.from({ length: seqs().length }, (_, i) => i + 1);
    expect(seqs()).toEqual(expected);
    expect(readHead(trailFile())).toMatchObject({ seq: expected.length, sizeBytes: statSync(trailFile()).size });
    expect(verifyAuditDir(auditDir).ok).toBe(true);
  });

  it("keeps one chain across rotations made by another writer", async () => {
    const options = { maxBytes: 600, keepFiles: 5 };
    const daemon = new JsonlAuditLog(auditDir, options);
    const cli = new JsonlAuditLog(auditDir, options);
    await append(daemon, 0, 2);
    await append(cli, 2, 6); // rotates under the daemon's memo
    await append(daemon, 8, 2);
    await append(cli, 10, 6);
    await append(daemon, 16, 1);
    await daemon.close();
    await cli.close();
    const report = verifyAuditDir(auditDir, options.keepFiles);
    expect(report.ok).toBe(true);
    expect(report.trails.find((t) => t.trail === join("animas", "eve.jsonl"))).toMatchObject({ firstSeq: 1, lastSeq: 17 });
  });

  it("keeps one chain when four processes append to one trail at once, rotating it", async () => {
    const writer = new URL("../../dist/src/audit/jsonl-audit-log.js", import.meta.url).href;
    const script = `
      const { JsonlAuditLog } = await import(${JSON.stringify(writer)});
      const log = new JsonlAuditLog(process.argv[1], { flushIntervalMs: 1, maxBytes: 8_000, keepFiles: 50 });
      for (let i = 0; i < 60; i++) {
        log.append({ kind: "capability", anima: "eve", tool: "t", operation: "fs.readFile", target: "p" + process.pid + "-" + i, outcome: "ok" });
        if (i % 3 === 2) await new Promise((resolve) => setTimeout(resolve, 1));
      }
      await log.close();`;
    const writers = Array.from({ length: 4 }, () =>
      spawn(process.execPath, ["--input-type=module", "-e", script, auditDir], { stdio: ["ignore", "ignore", "inherit"] }),
    );
    const codes = await Promise.all(writers.map(async (child) => (await once(child, "exit"))[0] as number));
    expect(codes).toEqual([0, 0, 0, 0]);
    const report = verifyAuditDir(auditDir, 50);
    expect(report.findings).toEqual([]);
    expect(report.trails.find((t) => t.trail === join("animas", "eve.jsonl"))).toMatchObject({ records: 240, firstSeq: 1, lastSeq: 240 });
    expect(readHead(trailFile())).toMatchObject({ seq: 240 });
  }, 30_000);

  it("never writes through a symlink put in place of a head, its temporary file or a trail (symlinked_audit_files)", async () => {
    const outside = join(dir, "outside.txt");
    writeFileSync(outside, "not the audit log\n");
    const errors: string[] = [];
    const log = new JsonlAuditLog(auditDir, { onWriteError: (error) => errors.push(String(error)) });
    await append(log, 0, 2);
    const head = headFileOf(trailFile());
    // The head itself a link: updated in place, the write would land in the link's target.
    rmSync(head);
    symlinkSync(outside, head);
    await append(log, 10, 1);
    // The head gone and its temporary name a link: written whole, the new head would go through it.
    rmSync(head);
    symlinkSync(outside, `${head}.tmp`);
    await append(log, 11, 1);
    expect(readFileSync(outside, "utf8")).toBe("not the audit log\n");
    expect(lstatSync(head).isFile()).toBe(true);
    expect(existsSync(`${head}.tmp`)).toBe(false);
    expect(readHead(trailFile())).toMatchObject({ seq: 4, sizeBytes: statSync(trailFile()).size });

    renameSync(trailFile(), `${trailFile()}.moved`);
    symlinkSync(outside, trailFile());
    await append(log, 20, 1);
    expect(readFileSync(outside, "utf8")).toBe("not the audit log\n");
    expect(errors).toEqual([expect.stringMatching(/ELOOP/)]);
    await log.close();
  });

  it("does not take a new file of the very size its memo remembers for its own (another writer rotated)", async () => {
    const options = { maxBytes: 2_000, keepFiles: 5 };
    const daemon = new JsonlAuditLog(auditDir, options);
    const cli = new JsonlAuditLog(auditDir, options);
    await append(daemon, 0, 1); // seq 1, target "f0"
    const remembered = statSync(trailFile()).size;
    let written = 1;
    while (existsSync(trailFile())) {
      await append(cli, written, 1);
      written++;
    }
    // One record in the new file, as long as the daemon's: a two-digit seq, so a one-character target.
    expect(String(written + 1)).toHaveLength(2);
    cli.append({ ...record(0), target: "f" });
    await cli.flush();
    expect(statSync(trailFile()).size).toBe(remembered);

    await append(daemon, 100, 1);
    await daemon.close();
    await cli.close();
    expect(seqs()).toEqual([written + 1, written + 2]);
    expect(verifyAuditDir(auditDir, options.keepFiles).ok).toBe(true);
  });
});
