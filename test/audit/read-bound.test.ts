import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AuditReadTooLarge, AuditReadersBusy } from "../../src/audit/audit-log.js";
import { JsonlAuditLog, type JsonlAuditLogOptions } from "../../src/audit/jsonl-audit-log.js";
import { RecordRuns } from "../../src/audit/record-order.js";
import { runAuditEvents } from "../../src/cli/audit-events.js";
import { ToolHostError } from "../../src/errors.js";
import type { ToolHost } from "../../src/host-api.js";

/**
 * A read holds every record it returns (their order is defined over all of them): an unfiltered `audit
 * events` of a data dir of many Animas at full retention (≈ 280,000 records a trail pair, ≈ 420 bytes of
 * memory each) grew the shared daemon past its heap (audit_events_unbounded_read). A read past
 * `maxReadRecords` now rejects, asking for a narrower query, and holds nothing more.
 */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awt-read-bound-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const capability = (anima: string, i: number) => ({
  kind: "capability" as const,
  anima,
  tool: "t",
  operation: "fs.readFile",
  target: `n/${i}`,
  outcome: "ok" as const,
});

it("audit_events_unbounded_read: a read matching more than maxReadRecords rejects; narrower ones answer, and the log keeps working", async () => {
  const log = new JsonlAuditLog(join(dir, "audit"), { maxReadRecords: 10 });
  for (let i = 0; i < 8; i++) log.append(capability("alice", i));
  for (let i = 0; i < 8; i++) log.append(capability("bob", i));
  const refused = await log.read().catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(AuditReadTooLarge);
  expect((refused as AuditReadTooLarge).message).toBe("more than 10 audit records match, more than one read holds");
  expect(await log.read({ anima: "alice" })).toHaveLength(8);
  log.append(capability("alice", 8));
  expect(await log.read({ anima: "alice" })).toHaveLength(9);
  await log.close();
});

it("audit events answers a read past the bound with InvalidArguments saying how to narrow it", async () => {
  const log = new JsonlAuditLog(join(dir, "audit"), { maxReadRecords: 2 });
  for (let i = 0; i < 3; i++) log.append(capability("alice", i));
  const host = { audit: log, config: { auditDir: join(dir, "audit") } } as unknown as ToolHost;
  const out = { stdout: () => undefined, stderr: () => undefined };
  const refused = await runAuditEvents(host, [], undefined, out).catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(ToolHostError);
  expect(refused).toMatchObject({
    type: "InvalidArguments",
    fault: "caller",
    message: "audit events: more than 2 audit records match, more than one read holds",
  });
  expect((refused as ToolHostError).hint).toMatch(/--since, --until/);
  await log.close();
});

it("audit_events_concurrent_reads: reads run one at a time, so concurrent ones hold one read's records at once, each answered in full", async () => {
  const log = new JsonlAuditLog(join(dir, "audit"));
  // Past 2,000 lines a read gives the event loop turns: concurrent reads would interleave there.
  for (let i = 0; i < 5_000; i++) log.append(capability("alice", i));
  await log.flush();
  const active = new Set<RecordRuns>();
  let most = 0;
  const startTrail = RecordRuns.prototype.startTrail;
  const merged = RecordRuns.prototype.merged;
  const starting = vi.spyOn(RecordRuns.prototype, "startTrail").mockImplementation(function (this: RecordRuns) {
    active.add(this);
    most = Math.max(most, active.size);
    return startTrail.call(this);
  });
  const merging = vi.spyOn(RecordRuns.prototype, "merged").mockImplementation(function (this: RecordRuns, turn) {
    active.delete(this);
    return merged.call(this, turn);
  });
  try {
    const answers = await Promise.all(Array.from({ length: 8 }, () => log.read({ anima: "alice" })));
    for (const records of answers) expect(records).toHaveLength(5_000);
    expect(most).toBe(1);
  } finally {
    starting.mockRestore();
    merging.mockRestore();
    await log.close();
  }
});

/** A log of `count` reload records in a throwaway dir, handed to `use`, then closed and removed. */
async function withRecords(count: number, options: JsonlAuditLogOptions, use: (log: JsonlAuditLog) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "awt-held-"));
  const log = new JsonlAuditLog(join(dir, "audit"), options);
  try {
    for (let i = 0; i < count; i++) log.append({ kind: "reload", tool: `t${i}`, origin: "personal", change: "loaded" });
    await use(log);
  } finally {
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("records held while a reader uses them (audit_events_stalled_clients)", () => {
  it("makes a further readWith wait while readers still using theirs hold the bound; plain reads go on", async () => {
    // `audit events` streams its records to a client that may stop reading: 48 stalled clients held
    // 1.3 GB of the daemon after their reads' turns had ended. Held records now count until streamed.
    await withRecords(150, { maxHeldRecords: 100 }, async (log) => {
      let release!: () => void;
      const using = new Promise<void>((resolve) => (release = resolve));
      let started!: () => void;
      const holding = new Promise<void>((resolve) => (started = resolve));
      const stalled = log.readWith({}, async (records) => {
        started();
        await using;
        return records.length;
      });
      await holding;
      // A plain read (the report's) does not wait for held records.
      expect(await log.read({})).toHaveLength(150);
      let answered = false;
      const next = log.readWith({}, async (records) => {
        answered = true;
        return records.length;
      });
      // Many turns of the event loop: the further readWith waits for room while 150 records are held.
      for (let i = 0; i < 50; i++) await new Promise<void>((resolve) => setImmediate(resolve));
      expect(answered).toBe(false);
      release();
      expect(await stalled).toBe(150);
      expect(await next).toBe(150);
    });
  });

  it("refuses a readWith with AuditReadersBusy once it has waited its time, and holds nothing for it", async () => {
    await withRecords(20, { maxHeldRecords: 10, maxHeldWaitMs: 100 }, async (log) => {
      let release!: () => void;
      const using = new Promise<void>((resolve) => (release = resolve));
      const stalled = log.readWith({}, async () => using);
      await expect(log.readWith({}, async () => "read")).rejects.toBeInstanceOf(AuditReadersBusy);
      release();
      await stalled;
      // Nothing is held once the stalled reader is done: the next is answered at once.
      expect(await log.readWith({}, async (records) => records.length)).toBe(20);
    });
  });

  it("lets readWith go beside a reader still using fewer records than the bound", async () => {
    await withRecords(40, { maxHeldRecords: 100 }, async (log) => {
      let release!: () => void;
      const using = new Promise<void>((resolve) => (release = resolve));
      const stalled = log.readWith({}, async () => using);
      expect(await log.readWith({}, async (records) => records.length)).toBe(40);
      release();
      await stalled;
    });
  });
});
