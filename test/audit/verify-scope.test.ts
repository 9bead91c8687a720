import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { verifyAuditDirYielding } from "../../src/audit/verify.js";

/**
 * `audit events --anima A` and `audit --anima A` check the trails their records come from (A's pair and
 * the host's), not every Anima's at each run: with many Animas at full retention, each run walked
 * gigabytes of other Animas' trails on the shared daemon (audit_events_verifies_everything). What they do
 * not show they do not vouch for; unscoped, verify walks everything as before.
 */

let auditDir: string;
beforeEach(async () => {
  auditDir = join(mkdtempSync(join(tmpdir(), "awt-verify-scope-")), "audit");
  const log = new JsonlAuditLog(auditDir);
  for (const anima of ["alice", "bob"]) {
    for (let i = 0; i < 5; i++)
      log.append({ kind: "capability", anima, tool: "t", operation: "fs.readFile", target: `f${i}`, outcome: i === 0 ? "denied" : "ok" });
  }
  await log.close();
});
afterEach(() => rmSync(join(auditDir, ".."), { recursive: true, force: true }));

const trailsOf = async (anima?: string) => (await verifyAuditDirYielding(auditDir, 3, anima)).trails.map((t) => t.trail).sort();
const brokenOf = async (anima?: string) =>
  (await verifyAuditDirYielding(auditDir, 3, anima)).findings.filter((f) => f.severity === "broken").map((f) => `${f.trail}: ${f.message}`);
const editSecond = (file: string) => {
  const lines = readFileSync(file, "utf8").trimEnd().split("\n");
  lines[1] = (lines[1] as string).replace('"target":"f2"', '"target":"fX"');
  writeFileSync(file, `${lines.join("\n")}\n`);
};

it("audit_events_verifies_everything: scoped to an Anima, walks its pair and the host's only", async () => {
  expect(await trailsOf("alice")).toEqual(["animas/alice.jsonl", "animas/alice.security.jsonl", "host.security.jsonl"]);
  expect(await trailsOf()).toEqual([
    "animas/alice.jsonl",
    "animas/alice.security.jsonl",
    "animas/bob.jsonl",
    "animas/bob.security.jsonl",
    "host.security.jsonl",
  ]);
});

it("reports a broken trail of the Anima in scope, and of any Anima unscoped, never of another in scope", async () => {
  editSecond(join(auditDir, "animas", "bob.jsonl"));
  expect(await brokenOf("alice")).toEqual([]);
  expect(await brokenOf("bob")).toEqual([expect.stringMatching(/^animas\/bob\.jsonl: .*seq 2 was changed/)]);
  expect(await brokenOf()).toEqual([expect.stringMatching(/^animas\/bob\.jsonl: .*seq 2 was changed/)]);
});

it("reports an announced trail of the Anima in scope that is gone, and the host's security trail gone", async () => {
  for (const name of ["alice.jsonl", "alice.jsonl.head"]) rmSync(join(auditDir, "animas", name));
  expect(await brokenOf("bob")).toEqual([]);
  expect(await brokenOf("alice")).toEqual([expect.stringMatching(/trail animas\/alice\.jsonl was announced but its files are gone/)]);
  for (const name of ["host.security.jsonl", "host.security.jsonl.head"]) rmSync(join(auditDir, name));
  expect(await brokenOf("bob")).toEqual([expect.stringMatching(/host's security trail .* is gone/)]);
});

it("walks the host's pair alone for a name that is no Anima's, never a path out of the folder", async () => {
  expect(await trailsOf("../../etc/passwd")).toEqual(["host.security.jsonl"]);
  expect(await trailsOf("carol")).toEqual(["host.security.jsonl"]);
});

it("scoped_verify_deleted_host_trail: reports the host's security trail deleted with the Anima's own trails, when another Anima's are left", async () => {
  for (const name of ["bob.jsonl", "bob.jsonl.head", "bob.security.jsonl", "bob.security.jsonl.head"]) rmSync(join(auditDir, "animas", name));
  for (const name of ["host.security.jsonl", "host.security.jsonl.head"]) rmSync(join(auditDir, name));
  expect(await brokenOf("bob")).toEqual([expect.stringMatching(/host's security trail .* is gone/)]);
});
