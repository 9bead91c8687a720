import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { headFileOf } from "../../src/audit/trail-head.js";
import { verifyAuditDir } from "../../src/audit/verify.js";

/**
 * A trail's head deleted or spoiled, its records then cut or edited (red team, round two): verify reports
 * the missing head, but the next ordinary append wrote a new one from the files as they were, and verify
 * passed. A writer that finds no readable head for files that hold records writes `trail_head_lost`, and a
 * trail deleted whole (files and head) and started again is announced twice: verify fails on either.
 */

let dir: string;
let auditDir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awt-lost-head-"));
  auditDir = join(dir, "audit");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const eve = () => join(auditDir, "animas", "eve.jsonl");
const linesOf = (path: string) => readFileSync(path, "utf8").trimEnd().split("\n");
const broken = () =>
  verifyAuditDir(auditDir)
    .findings.filter((f) => f.severity === "broken")
    .map((f) => `${f.trail}: ${f.message}`);
const record = (i: number) => ({ kind: "capability" as const, anima: "eve", tool: "t", operation: "fs.readFile", target: `f${i}`, outcome: "ok" as const });

async function written(count: number): Promise<void> {
  const log = new JsonlAuditLog(auditDir);
  for (let i = 0; i < count; i++) log.append(record(i));
  await log.close();
  expect(broken()).toEqual([]);
}

/** One ordinary append by a new writer (another process's one-shot run). */
async function nextAppend(): Promise<void> {
  const log = new JsonlAuditLog(auditDir);
  log.append(record(100));
  await log.close();
}

const HEAD_LOST = /^animas\/eve\.jsonl: a writer found no readable head while the files held records/;

describe("a trail whose head was deleted or spoiled", () => {
  it("stays broken after the next append when its head was deleted and records cut (cut_delhead)", async () => {
    await written(6);
    writeFileSync(eve(), `${linesOf(eve()).slice(0, -3).join("\n")}\n`);
    rmSync(headFileOf(eve()));
    await nextAppend();
    expect(broken()).toEqual([expect.stringMatching(HEAD_LOST)]);
    const lost = linesOf(join(auditDir, "animas", "eve.security.jsonl")).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lost).toEqual([expect.objectContaining({ kind: "trail_head_lost", anima: "eve", trail: join("animas", "eve.jsonl"), fileSeq: 3 })]);
  });

  it("stays broken after the next append when its last record was edited and its head spoiled (edit_badhead)", async () => {
    await written(4);
    const lines = linesOf(eve());
    writeFileSync(eve(), `${[...lines.slice(0, -1), lines.at(-1)!.replace('"outcome":"ok"', '"outcome":"error"')].join("\n")}\n`);
    writeFileSync(headFileOf(eve()), " ".repeat(512));
    await nextAppend();
    expect(broken()).toEqual([expect.stringMatching(HEAD_LOST)]);
  });

  it("stays broken after the next append when its files and head were deleted whole (restarted_trail)", async () => {
    await written(4);
    rmSync(eve());
    rmSync(headFileOf(eve()));
    await nextAppend();
    expect(broken()).toEqual([expect.stringMatching(/^animas\/eve\.jsonl: the trail animas\/eve\.jsonl was started twice/)]);
  });

  it("is announced once however many writers race to start it", async () => {
    const writers = Array.from({ length: 4 }, () => new JsonlAuditLog(auditDir));
    for (const [i, log] of writers.entries()) log.append(record(i));
    await Promise.all(writers.map((log) => log.close()));
    expect(broken()).toEqual([]);
  });
});
