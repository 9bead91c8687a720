import { describe, expect, it, vi } from "vitest";
import { JOB_DEFAULTS } from "../../src/jobs/defaults.js";
import { JobWorker, resolveWorkerSettings } from "../../src/jobs/worker.js";
import { OK, workerHarness } from "./worker-harness.js";

/**
 * The worker's settings: every default from JOB_DEFAULTS (the lease-relative ones from the lease in force),
 * and invalid options refused.
 */
describe("JobWorker: settings", () => {
  const { setup } = workerHarness();

  it("takes every default from JOB_DEFAULTS, the lease-relative ones from the lease in force", () => {
    const d = JOB_DEFAULTS;
    expect(resolveWorkerSettings({})).toMatchObject({
      concurrency: d.concurrency,
      perAnimaConcurrency: d.perAnimaConcurrency,
      leaseMs: d.leaseMs,
      heartbeatIntervalMs: 2_000,
      pollIntervalMs: d.pollIntervalMs,
      maintenanceIntervalMs: 15_000,
      cancelGraceMs: 2_000,
      noticeGraceMs: 30_000,
      retentionMs: d.retentionMs,
      purgeIntervalMs: d.purgeIntervalMs,
      notices: true,
      idleCheckIntervalMs: d.idleCheckIntervalMs,
    });
    expect(resolveWorkerSettings({ leaseMs: 900 })).toMatchObject({ heartbeatIntervalMs: 300, maintenanceIntervalMs: 450, noticeGraceMs: 900 });
    expect(resolveWorkerSettings({ cancelGraceMs: 0 }).cancelGraceMs).toBe(0);
  });

  it("rejects invalid options", async () => {
    const { store } = await setup();
    const base = { store, runJob: async () => OK, animaDirOf: (a: string) => a };
    expect(() => new JobWorker({ ...base, concurrency: 0 })).toThrow(/concurrency/);
    expect(() => new JobWorker({ ...base, leaseMs: 100, heartbeatIntervalMs: 100 })).toThrow(/heartbeatIntervalMs/);
    expect(() => new JobWorker({ ...base, cancelGraceMs: -1 })).toThrow(/cancelGraceMs/);
    expect(() => new JobWorker({ ...base, pollIntervalMs: 2 ** 31 })).toThrow(/pollIntervalMs/);
  });

  it("worker_log_escape: the default log sink escapes a record's text as every text sink does (a tool's text drove the terminal)", () => {
    const written: string[] = [];
    const write = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    try {
      const hostile = "done\u001b[2J\u001b]0;pwned\u0007\r\n[error] animaworks.host (alice/bank): credentials leaked";
      resolveWorkerSettings({}).onLog({ level: "info", logger: "animaworks.tools", message: hostile, anima: "bob", tool: "t\u001b[31m" });
    } finally {
      write.mockRestore();
    }
    expect(written).toHaveLength(1);
    const line = written[0]!;
    expect(line).toBe(
      "[info] animaworks.tools (bob/t\\u001b[31m): done\\u001b[2J\\u001b]0;pwned\\u0007\\u000d\\u000a[error] animaworks.host (alice/bank): credentials leaked\n",
    );
    expect(line.slice(0, -1)).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
  });
});
