import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { recordHash } from "../../src/audit/trail.js";
import { verifyAuditDir } from "../../src/audit/verify.js";

/**
 * Records rewritten and re-chained, one more appended past the head, the head left alone (red team,
 * forge-ahead.mjs): the files looked like a writer that died before its head write, verify only noted it
 * and the next writer continued from the forged end. Both now check the head's own record.
 */

let dir: string;
let auditDir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awt-forge-ahead-"));
  auditDir = join(dir, "audit");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const eve = () => join(auditDir, "animas", "eve.jsonl");
const broken = () =>
  verifyAuditDir(auditDir)
    .findings.filter((f) => f.severity === "broken")
    .map((f) => `${f.trail}: ${f.message}`);
const record = (i: number) => ({ kind: "capability" as const, anima: "eve", tool: "t", operation: "fs.readFile", target: `f${i}`, outcome: "ok" as const });

/** forge-ahead.mjs: seq `k` edited, the records after it re-chained, one more appended. */
function forgeAhead(k: number): void {
  const lines = readFileSync(eve(), "utf8").trimEnd().split("\n");
  let prev = "";
  const out = lines.map((line) => {
    const r = JSON.parse(line) as Record<string, unknown> & { seq: number };
    if (r.seq < k) return ((prev = recordHash(line)), line);
    if (r.seq === k) r["outcome"] = "error";
    else r["prev"] = prev;
    const forged = JSON.stringify(r);
    prev = recordHash(forged);
    return forged;
  });
  const seq = lines.length + 1;
  out.push(`{"v":1,"seq":${seq},"ts":"${new Date().toISOString()}","prev":"${prev}",${JSON.stringify(record(seq)).slice(1)}`);
  writeFileSync(eve(), `${out.join("\n")}\n`);
}

describe("records rewritten ahead of the head", () => {
  it("is broken before and after the next append (forge_ahead)", async () => {
    const log = new JsonlAuditLog(auditDir);
    for (let i = 0; i < 6; i++) log.append(record(i));
    await log.close();
    forgeAhead(4);
    expect(broken()).toEqual([expect.stringMatching(/^animas\/eve\.jsonl: seq 6 \(the head's record\) was changed/)]);
    const next = new JsonlAuditLog(auditDir);
    next.append(record(100));
    await next.close();
    const after = broken();
    expect(after).toContainEqual(expect.stringMatching(/^animas\/eve\.jsonl: a writer found records past the head whose seq 6 is not the head's record/));
    expect(after).toContainEqual(expect.stringMatching(/^animas\/eve\.jsonl: seq 7 comes after seq 7/));
  });
});
