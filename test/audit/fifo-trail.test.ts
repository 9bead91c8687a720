import { spawnSync } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, readSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { readHead } from "../../src/audit/trail-head.js";

/**
 * A FIFO put in place of a trail file or its head (red team, t-fifo.sh): an open of a FIFO blocks until
 * its other end is opened, so a writer froze a daemon's event loop for every Anima, and `audit verify` /
 * `audit events` never ended. Every open of a trail's files is non-blocking and takes regular files only
 * (src/audit/trail-file.ts). The blocking cases run in a child process (the built dist) under a bounded
 * wait: a blocked open cannot be timed out from inside the process it blocks.
 */

let dir: string;
let auditDir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awt-fifo-"));
  auditDir = join(dir, "audit");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const trailFile = (name = "eve.jsonl") => join(auditDir, "animas", name);
const record = (i: number) => ({ kind: "capability" as const, anima: "eve", tool: "t", operation: "fs.readFile", target: `f${i}`, outcome: "ok" as const });

function mkfifo(path: string): void {
  const made = spawnSync("mkfifo", [path]);
  if (made.status !== 0) throw new Error(`mkfifo ${path} failed: ${String(made.stderr)}`);
}

describe("a FIFO in place of a trail's files", () => {
  it("fails the writer's append, reported, and keeps its records for the regular file (fifo_trail_writer)", async () => {
    const errors: string[] = [];
    const log = new JsonlAuditLog(auditDir, { onWriteError: (error) => errors.push(String(error)) });
    log.append(record(0));
    await log.flush();
    renameSync(trailFile(), `${trailFile()}.moved`);
    mkfifo(trailFile());
    // A reader on the FIFO, so that even a blocking open for writing returns: the records must not go into the pipe.
    const reader = openSync(trailFile(), constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      log.append(record(1));
      await log.flush();
      expect(errors).toEqual([expect.stringMatching(/AUDIT_TRAIL_NOT_REGULAR/)]);
      let piped = 0;
      try {
        piped = readSync(reader, Buffer.alloc(4096));
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).toBe("EAGAIN"); // nothing in the pipe
      }
      expect(piped).toBe(0);
    } finally {
      closeSync(reader);
    }
    rmSync(trailFile());
    renameSync(`${trailFile()}.moved`, trailFile());
    await log.close();
    expect(readHead(trailFile())).toMatchObject({ seq: 2 }); // the kept record, written once the file is back
  });

  it("neither blocks a writer, nor audit verify, nor audit events, with no process at the FIFO's other end (fifo_trail_reader)", async () => {
    const log = new JsonlAuditLog(auditDir);
    log.append(record(0));
    log.append({ ...record(1), anima: "ann" });
    await log.close();
    rmSync(trailFile());
    mkfifo(trailFile());
    rmSync(`${trailFile("ann.jsonl")}.head`);
    mkfifo(`${trailFile("ann.jsonl")}.head`);
    const dist = (module: string) => pathToFileURL(resolve("dist/src/audit", module)).href;
    const script = `
      import { JsonlAuditLog } from ${JSON.stringify(dist("jsonl-audit-log.js"))};
      import { verifyAuditDir } from ${JSON.stringify(dist("verify.js"))};
      const dir = ${JSON.stringify(auditDir)};
      const errors = [];
      const log = new JsonlAuditLog(dir, { onWriteError: (error) => errors.push(String(error)) });
      log.append({ kind: "capability", anima: "eve", tool: "t", operation: "fs.readFile", target: "g", outcome: "ok" });
      log.append({ kind: "capability", anima: "ann", tool: "t", operation: "fs.readFile", target: "g", outcome: "ok" });
      await log.flush();
      const read = await log.read();
      const report = verifyAuditDir(dir);
      console.log(JSON.stringify({ errors, read: read.length, ok: report.ok, broken: report.findings.filter((f) => f.severity === "broken").map((f) => f.trail + ": " + f.message) }));
    `;
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 20_000, killSignal: "SIGKILL" });
    expect(child.signal, `the child was killed after 20 s (blocked on the FIFO); stderr: ${child.stderr}`).toBeNull();
    const out = JSON.parse(child.stdout) as { errors: string[]; read: number; ok: boolean; broken: string[] };
    // The trail: the append fails (ENXIO: no reader; or not regular), and is reported.
    expect(out.errors.length).toBeGreaterThan(0);
    for (const error of out.errors) expect(error).toMatch(/ENXIO|AUDIT_TRAIL_NOT_REGULAR/);
    // The head: a FIFO is no head, replaced by a regular one.
    expect(out.broken).toContainEqual(expect.stringMatching(/animas\/eve\.jsonl: animas\/eve\.jsonl cannot be read as a trail file \(AUDIT_TRAIL_NOT_REGULAR/));
    expect(out.ok).toBe(false);
    expect(readHead(trailFile("ann.jsonl"))).toMatchObject({ seq: 2 });
  }, 30_000);
});
