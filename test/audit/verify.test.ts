import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { reportCoverage } from "../../src/audit/report.js";
import { verifyAuditDir } from "../../src/audit/verify.js";

/**
 * `audit verify` against each way a trail can be tampered with: every one is a `broken` finding (exit 1
 * from the CLI), and what a crash leaves is a note. Trails are written through JsonlAuditLog, then edited
 * as an attacker with write access to the data dir would.
 */

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function trail(records = 20, options: { maxBytes?: number; keepFiles?: number } = {}): Promise<string> {
  dir = mkdtempSync(join(tmpdir(), "awt-verify-"));
  const auditDir = join(dir, "audit");
  const log = new JsonlAuditLog(auditDir, options);
  for (let i = 0; i < records; i++) {
    log.append({ kind: "capability", anima: "eve", tool: "t", operation: "fs.readFile", target: `f${i}`, outcome: i % 5 === 0 ? "denied" : "ok" });
    if (i % 10 === 9) await log.flush();
  }
  await log.close();
  return auditDir;
}

const file = (auditDir: string, name = "eve.jsonl") => join(auditDir, "animas", name);
const linesOf = (path: string) => readFileSync(path, "utf8").trimEnd().split("\n");
const writeLines = (path: string, lines: string[]) => writeFileSync(path, `${lines.join("\n")}\n`);
const broken = (auditDir: string) =>
  verifyAuditDir(auditDir)
    .findings.filter((f) => f.severity === "broken")
    .map((f) => f.message);

describe("audit verify", () => {
  it("passes an untouched trail, every chain whole", async () => {
    const auditDir = await trail();
    const report = verifyAuditDir(auditDir);
    expect(report.ok).toBe(true);
    expect(report.trails.find((t) => t.trail === join("animas", "eve.jsonl"))).toMatchObject({ records: 16, firstSeq: 1, lastSeq: 16 });
  });

  it("reports an edited record", async () => {
    const auditDir = await trail();
    const lines = linesOf(file(auditDir));
    lines[3] = lines[3]!.replace('"outcome":"ok"', '"outcome":"denied"');
    writeLines(file(auditDir), lines);
    expect(broken(auditDir)).toEqual([expect.stringMatching(/seq 4 was changed/)]);
  });

  it("reports an edited last record against the head", async () => {
    const auditDir = await trail();
    const lines = linesOf(file(auditDir));
    lines[lines.length - 1] = lines.at(-1)!.replace('"target":"f19"', '"target":"fX9"');
    writeLines(file(auditDir), lines);
    expect(broken(auditDir)).toEqual([expect.stringMatching(/last record\) was changed/)]);
  });

  it("reports a deleted record (a denial removed from the security trail)", async () => {
    const auditDir = await trail();
    const security = file(auditDir, "eve.security.jsonl");
    const lines = linesOf(security);
    lines.splice(1, 1);
    writeLines(security, lines);
    expect(broken(auditDir)).toEqual([expect.stringMatching(/records seq 2 are missing/)]);
  });

  it("reports reordered records", async () => {
    const auditDir = await trail();
    const lines = linesOf(file(auditDir));
    [lines[5], lines[6]] = [lines[6]!, lines[5]!];
    writeLines(file(auditDir), lines);
    expect(broken(auditDir).join("\n")).toMatch(/missing|reordered/);
  });

  it("reports a truncated trail and a deleted head", async () => {
    const auditDir = await trail();
    writeLines(file(auditDir), linesOf(file(auditDir)).slice(0, -3));
    expect(broken(auditDir)).toEqual([expect.stringMatching(/truncated: the head says the trail runs to seq 16, the files end at 13/)]);
    rmSync(`${file(auditDir)}.head`);
    expect(broken(auditDir)).toEqual([expect.stringMatching(/head file is missing/)]);
  });

  it("tells retention from a deleted generation", async () => {
    const auditDir = await trail(200, { maxBytes: 3_000, keepFiles: 2 });
    expect(verifyAuditDir(auditDir, 2).ok).toBe(true); // generations fell off by rotation: retention, not tampering
    rmSync(`${file(auditDir)}.2`);
    expect(
      verifyAuditDir(auditDir, 2)
        .findings.filter((f) => f.severity === "broken")
        .map((f) => f.message),
    ).toEqual([expect.stringMatching(/rotation dropped through seq \d+: records .* were deleted/)]);
  });

  it("reports a lost Anima trail and an inserted unchained line", async () => {
    const auditDir = await trail();
    const lines = linesOf(file(auditDir));
    lines.splice(4, 0, JSON.stringify({ ts: new Date().toISOString(), kind: "call", anima: "eve", tool: "t", schema: "x", durationMs: 1, outcome: "ok" }));
    writeLines(file(auditDir), lines);
    expect(broken(auditDir)).toEqual([expect.stringMatching(/record without seq/)]);
    for (const name of readdirSync(join(auditDir, "animas"))) rmSync(join(auditDir, "animas", name));
    expect(broken(auditDir).sort()).toEqual([
      expect.stringMatching(/trail animas\/eve.jsonl was announced but its files are gone/),
      expect.stringMatching(/trail animas\/eve.security.jsonl was announced but its files are gone/),
    ]);
  });

  it("reports one file of an Anima's pair deleted with its head (deleted_ordinary_trail, deleted_security_trail)", async () => {
    for (const name of ["eve.jsonl", "eve.security.jsonl"]) {
      const auditDir = await trail();
      rmSync(file(auditDir, name));
      rmSync(`${file(auditDir, name)}.head`);
      expect(broken(auditDir)).toEqual([expect.stringMatching(new RegExp(`trail animas/${name} was announced but its files are gone`))]);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reports the host's security trail deleted while other trails are left (deleted_host_security_trail)", async () => {
    const auditDir = await trail();
    rmSync(join(auditDir, "host.security.jsonl"));
    rmSync(join(auditDir, "host.security.jsonl.head"));
    expect(broken(auditDir)).toEqual([expect.stringMatching(/host's security trail .* is gone/)]);
  });

  it("reports the host's security trail deleted with every trail it announced but one (deleted_host_security_and_anima_trails)", async () => {
    const auditDir = await trail();
    const log = new JsonlAuditLog(auditDir);
    log.append({ kind: "capability", anima: "bob", tool: "t", operation: "fs.readFile", target: "x", outcome: "ok" });
    await log.close();
    for (const name of ["host.security.jsonl", "host.security.jsonl.head"]) rmSync(join(auditDir, name));
    for (const name of readdirSync(join(auditDir, "animas")).filter((name) => name.startsWith("bob."))) rmSync(join(auditDir, "animas", name));
    expect(broken(auditDir)).toEqual([expect.stringMatching(/host's security trail .* is gone/)]);
  });

  it("checks an announcement of an earlier build (an Anima, no file) as a pair", async () => {
    const auditDir = await trail();
    // The host's security trail as an earlier build wrote it: one announcement naming the Anima.
    for (const name of ["host.security.jsonl", "host.security.jsonl.head"]) rmSync(join(auditDir, name));
    const log = new JsonlAuditLog(auditDir);
    log.append({ kind: "trail", anima: "eve" });
    await log.close();
    rmSync(file(auditDir));
    rmSync(`${file(auditDir)}.head`);
    expect(broken(auditDir)).toEqual([]);
    for (const name of readdirSync(join(auditDir, "animas"))) rmSync(join(auditDir, "animas", name));
    expect(broken(auditDir)).toEqual([expect.stringMatching(/trail of Anima eve was announced but its files are gone/)]);
  });

  it("reports a forged record without seq before the chain (inserted_unchained_record_at_start)", async () => {
    const auditDir = await trail();
    const security = file(auditDir, "eve.security.jsonl");
    const forged = { ts: "2026-01-01T00:00:00.000Z", kind: "capability", anima: "eve", tool: "t", operation: "fetch", target: "http://x", outcome: "denied" };
    writeLines(security, [JSON.stringify(forged), ...linesOf(security)]);
    expect(verifyAuditDir(auditDir).findings).toEqual([
      expect.objectContaining({ severity: "broken", at: join("animas", "eve.security.jsonl:1"), message: expect.stringMatching(/record without seq/) }),
    ]);
  });

  it("has readers mark a record without seq unverified, and skip a null line (inserted_unchained_record_read)", async () => {
    const auditDir = await trail();
    const security = file(auditDir, "eve.security.jsonl");
    const forged = { ts: "2026-01-01T00:00:00.000Z", kind: "capability", anima: "eve", tool: "t", operation: "fetch", target: "http://x", outcome: "denied" };
    writeLines(security, [JSON.stringify(forged), "null", ...linesOf(security)]);
    const log = new JsonlAuditLog(auditDir);
    const denials = await log.read({ anima: "eve", outcome: "denied" });
    await log.close();
    expect(denials.filter((record) => record.unverified)).toEqual([expect.objectContaining({ target: "http://x" })]);
    expect(denials.filter((record) => !record.unverified)).toHaveLength(4);
    expect(reportCoverage({}, 0, 1).warning).toMatch(/1 record is not chained/);
  });

  it("reports a line of text inserted among records (inserted_text_line)", async () => {
    const auditDir = await trail();
    const lines = linesOf(file(auditDir));
    lines.splice(1, 0, "FORGED: eve deleted everything");
    writeLines(file(auditDir), lines);
    expect(broken(auditDir)).toEqual([expect.stringMatching(/not a record/)]);
  });

  it("reports a line cut like a crash's but where no record was due (inserted_cut_record)", async () => {
    const auditDir = await trail();
    const lines = linesOf(file(auditDir));
    lines.splice(1, 0, '{"v":1,"seq":9,"ts":"2026-');
    writeLines(file(auditDir), lines);
    expect(broken(auditDir)).toEqual([expect.stringMatching(/not a record/)]);
  });

  it("reports JSON values that are not records, without failing itself (inserted_null_line)", async () => {
    const auditDir = await trail();
    const lines = linesOf(file(auditDir));
    lines.splice(1, 0, "null", "[]", "7");
    writeLines(file(auditDir), lines);
    expect(broken(auditDir)).toEqual([expect.stringMatching(/not a record/), expect.stringMatching(/not a record/), expect.stringMatching(/not a record/)]);
  });

  it("notes what a crash leaves (a torn last line) without failing, and the next writer chains on", async () => {
    const auditDir = await trail();
    writeFileSync(file(auditDir), `${readFileSync(file(auditDir), "utf8")}{"v":1,"seq":17,"ts":"2026-`);
    const report = verifyAuditDir(auditDir);
    expect(report.ok).toBe(true);
    expect(report.findings).toEqual([expect.objectContaining({ severity: "note", message: expect.stringMatching(/unfinished last line/) })]);
    const log = new JsonlAuditLog(auditDir);
    log.append({ kind: "capability", anima: "eve", tool: "t", operation: "fs.readFile", target: "after", outcome: "ok" });
    await log.close();
    const after = verifyAuditDir(auditDir);
    expect(after.ok).toBe(true);
    expect(after.findings).toEqual([expect.objectContaining({ severity: "note", message: expect.stringMatching(/record cut off mid-line/) })]);
    expect(after.trails.find((t) => t.trail === join("animas", "eve.jsonl"))).toMatchObject({ lastSeq: 17 });
  });
});
