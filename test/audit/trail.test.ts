import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { readHead } from "../../src/audit/trail-head.js";
import { verifyAuditDir } from "../../src/audit/verify.js";

/**
 * The writer (trail.ts) against a trail tampered with between two appends: what verify reports before the
 * next ordinary append must still be reported after it. A writer continues from the head when the files
 * end behind it, and records the truncation; it continues from the files only when they are ahead (a
 * writer died between its write and its head), which trail-head.test.ts covers.
 */

let dir: string;
let auditDir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awt-trail-"));
  auditDir = join(dir, "audit");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const trailFile = (name = "eve.jsonl") => join(auditDir, "animas", name);
const linesOf = (path: string) => readFileSync(path, "utf8").trimEnd().split("\n");
const writeLines = (path: string, lines: string[]) => writeFileSync(path, `${lines.join("\n")}\n`);
const broken = () =>
  verifyAuditDir(auditDir)
    .findings.filter((f) => f.severity === "broken")
    .map((f) => f.message);
const record = (i: number, outcome: "ok" | "denied" = "ok") => ({
  kind: "capability" as const,
  anima: "eve",
  tool: "t",
  operation: "fs.readFile",
  target: `f${i}`,
  outcome,
});

/** Writes `count` ordinary records of eve (and one denial, so that her security trail exists), then closes. */
async function written(count: number): Promise<void> {
  const log = new JsonlAuditLog(auditDir);
  log.append(record(-1, "denied"));
  for (let i = 0; i < count; i++) log.append(record(i));
  await log.close();
}

/** One ordinary call of eve's after the tampering, by a new writer (another process's one-shot run). */
async function nextAppend(): Promise<JsonlAuditLog> {
  const log = new JsonlAuditLog(auditDir);
  log.append(record(100));
  await log.flush();
  return log;
}

describe("a trail tampered with between appends", () => {
  it("keeps a cut tail visible after the next append, and records the truncation (truncated_tail_healed)", async () => {
    await written(5);
    writeLines(trailFile(), linesOf(trailFile()).slice(0, -2)); // seq 4 and 5 gone, the head left alone
    expect(broken()).toEqual([expect.stringMatching(/truncated: the head says the trail runs to seq 5, the files end at 3/)]);

    const log = await nextAppend();
    expect(linesOf(trailFile()).map((line) => (JSON.parse(line) as { seq: number }).seq)).toEqual([1, 2, 3, 6]);
    expect(broken()).toEqual([expect.stringMatching(/records seq 4–5 are missing/)]);
    const truncations = await log.read({ kind: "trail_truncated" });
    await log.close();
    expect(truncations).toEqual([expect.objectContaining({ anima: "eve", trail: join("animas", "eve.jsonl"), headSeq: 5, fileSeq: 3, seq: 2 })]);
    expect(verifyAuditDir(auditDir).trails.find((t) => t.trail === join("animas", "eve.security.jsonl"))).toMatchObject({ lastSeq: 2 });
  });

  it("keeps an emptied trail visible after the next append (truncated_to_nothing_healed)", async () => {
    await written(3);
    writeFileSync(trailFile(), "");
    const log = await nextAppend();
    await log.close();
    expect(broken()).toEqual([expect.stringMatching(/starts at seq 4, not 1/)]);
    expect(readHead(trailFile())).toMatchObject({ seq: 4 });
  });

  it("keeps a cut security trail visible, and records the cut in that trail (truncated_security_tail_healed)", async () => {
    const log = new JsonlAuditLog(auditDir);
    for (let i = 0; i < 3; i++) log.append(record(i, "denied"));
    await log.close();
    const security = trailFile("eve.security.jsonl");
    writeLines(security, linesOf(security).slice(0, -1));

    const next = new JsonlAuditLog(auditDir);
    next.append(record(10, "denied"));
    await next.close();
    const lines = linesOf(security).map((line) => JSON.parse(line) as { seq: number; kind: string });
    expect(lines.map((line) => [line.seq, line.kind])).toEqual([
      [1, "capability"],
      [2, "capability"],
      [4, "capability"],
      [5, "trail_truncated"],
    ]);
    expect(broken()).toEqual([expect.stringMatching(/records seq 3 are missing/)]);
  });

  it("keeps an edited last record visible after the next append (edited_last_record_healed)", async () => {
    await written(3);
    const lines = linesOf(trailFile());
    lines[2] = lines[2]!.replace('"target":"f2"', '"target":"a much longer forged target"');
    writeLines(trailFile(), lines);
    expect(broken()).toEqual([expect.stringMatching(/seq 3 \(the last record\) was changed/)]);

    const log = await nextAppend();
    await log.close();
    expect(broken()).toEqual([expect.stringMatching(/seq 3 was changed/)]);
  });
});
