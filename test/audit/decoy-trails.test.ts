import { mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { headFileOf } from "../../src/audit/trail-head.js";
import { verifyAuditDir } from "../../src/audit/verify.js";

/**
 * A deleted trail with something left in its place (red team, round two): an empty rotated generation,
 * a directory, a file padded past what one string holds. Each once made verify take the trail as present
 * (any generation file or head answered for an announced trail) or as absent (a read that failed was "no
 * file"). A trail is present only when it holds a record or a head, and a file verify cannot read is broken.
 */

let dir: string;
let auditDir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awt-decoy-"));
  auditDir = join(dir, "audit");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const animaFile = (name: string) => join(auditDir, "animas", name);
const broken = () =>
  verifyAuditDir(auditDir)
    .findings.filter((f) => f.severity === "broken")
    .map((f) => `${f.trail}: ${f.message}`);

/** Two Animas' ordinary and security trails, and the host's security trail announcing them. */
async function written(): Promise<void> {
  const log = new JsonlAuditLog(auditDir);
  for (const anima of ["eve", "ann"]) {
    log.append({ kind: "capability", anima, tool: "t", operation: "fs.readFile", target: "f", outcome: "ok" });
    log.append({ kind: "capability", anima, tool: "t", operation: "fs.readFile", target: "g", outcome: "denied" });
  }
  await log.close();
  expect(broken()).toEqual([]);
}

describe("a deleted trail with a decoy in its place", () => {
  it("is lost when an empty generation file is left for it (lost_trail_decoy)", async () => {
    await written();
    rmSync(animaFile("eve.jsonl"));
    rmSync(headFileOf(animaFile("eve.jsonl")));
    writeFileSync(`${animaFile("eve.jsonl")}.3`, "");
    expect(broken()).toEqual([
      expect.stringMatching(/^animas\/eve\.jsonl: the trail animas\/eve\.jsonl was announced but its files are gone \(no record and no head left/),
    ]);
  });

  it("is lost when the host's security trail is deleted and an empty generation left for it (lost_hostsec_decoy)", async () => {
    await written();
    for (const file of ["host.security.jsonl", "animas/eve.jsonl", "animas/eve.security.jsonl"]) {
      rmSync(join(auditDir, file));
      rmSync(headFileOf(join(auditDir, file)));
    }
    writeFileSync(join(auditDir, "host.security.jsonl.3"), "");
    expect(broken()).toEqual([
      expect.stringMatching(/^host\.security\.jsonl: the host's security trail .* is gone \(no record and no head left\), while other trails are left/),
    ]);
  });

  it("is broken when a directory stands in for its file (dir_trail)", async () => {
    await written();
    rmSync(animaFile("eve.jsonl"));
    rmSync(headFileOf(animaFile("eve.jsonl")));
    mkdirSync(animaFile("eve.jsonl"));
    expect(broken()).toEqual([
      expect.stringMatching(/^animas\/eve\.jsonl: animas\/eve\.jsonl cannot be read as a trail file \(AUDIT_TRAIL_NOT_REGULAR/),
      expect.stringMatching(/^animas\/eve\.jsonl: the trail animas\/eve\.jsonl was announced but its files are gone \(no record and no head left/),
    ]);
  });

  it("is broken when its file is padded past what one string holds and its head deleted (sparse_trail)", async () => {
    await written();
    truncateSync(animaFile("eve.jsonl"), 600 * 1024 * 1024); // sparse: no disk used
    rmSync(headFileOf(animaFile("eve.jsonl")));
    const found = broken();
    expect(found).toContainEqual(expect.stringMatching(/^animas\/eve\.jsonl: a line longer than 4194304 bytes: not a record/));
    expect(found).toContainEqual(expect.stringMatching(/^animas\/eve\.jsonl: the head file is missing/));
  }, 60_000);
});
