import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { verifyAuditDir, verifyAuditDirYielding } from "../../src/audit/verify.js";

/**
 * The daemon runs `audit` and `audit verify` for whoever asks (an Anima's shell call among them). Walked in
 * one piece, 114 MB of trails held the daemon's event loop ≈ 3 s: every other Anima's call waited
 * (verify_stalls_daemon). The walk now gives the event loop a turn every few thousand lines, and a trail
 * that a writer rotates meanwhile is walked again rather than reported broken.
 */

let dir: string;
let auditDir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awt-verify-yield-"));
  auditDir = join(dir, "audit");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const record = (anima: string, i: number) => ({
  kind: "capability" as const,
  anima,
  tool: "t",
  operation: "fs.readFile",
  target: `f${i}`,
  outcome: "ok" as const,
});

async function write(log: JsonlAuditLog, anima: string, records: number): Promise<void> {
  for (let i = 0; i < records; i++) {
    log.append(record(anima, i));
    if (i % 1_000 === 999) await log.flush();
  }
  await log.flush();
}

describe("audit verify in a long-running host", () => {
  it("gives the event loop turns while it walks, and finds what the walk in one piece finds (verify_stalls_daemon)", async () => {
    const log = new JsonlAuditLog(auditDir);
    await write(log, "eve", 12_000);
    await log.close();
    let turns = 0;
    const ticker = setInterval(() => turns++, 0);
    const report = await verifyAuditDirYielding(auditDir).finally(() => clearInterval(ticker));
    // 12,000 lines in turns of 2,000: timers ran between them (walked in one piece, none would).
    expect(turns).toBeGreaterThan(0);
    expect(report).toEqual(verifyAuditDir(auditDir));
    expect(report.ok).toBe(true);

    // An edit is found the same way.
    const trail = join(auditDir, "animas", "eve.jsonl");
    const lines = readFileSync(trail, "utf8").trimEnd().split("\n");
    lines[5_000] = (lines[5_000] ?? "").replace('"target":"f', '"target":"g');
    writeFileSync(trail, `${lines.join("\n")}\n`);
    const edited = await verifyAuditDirYielding(auditDir);
    expect(edited.ok).toBe(false);
    expect(edited.findings.filter((f) => f.severity === "broken").map((f) => f.message)).toEqual([expect.stringMatching(/seq 5001 was changed/)]);
  });

  it("walks a trail again when a writer rotates it during the walk, instead of reporting it broken", async () => {
    // Small files and large records: the writer in this process rotates often while the walk yields to it
    // (walked once, generations shifted under the walk: "records seq 10001–11000 are missing").
    const options = { maxBytes: 64 * 1024, keepFiles: 50 };
    const log = new JsonlAuditLog(auditDir, options);
    await write(log, "eve", 20_000);
    let writing = true;
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        log.append({ ...record("eve", i), target: `f${i}`.padEnd(2_000, "x") });
        await new Promise((resolve) => setImmediate(resolve));
        if (i % 5 === 4) await log.flush();
      }
    })();
    try {
      for (let attempt = 0; attempt < 3; attempt++) {
        const report = await verifyAuditDirYielding(auditDir, options.keepFiles);
        expect(report.findings.filter((f) => f.severity === "broken")).toEqual([]);
      }
    } finally {
      writing = false;
      await writer;
      await log.close();
    }
    expect(verifyAuditDir(auditDir, options.keepFiles).ok).toBe(true);
  });
});
