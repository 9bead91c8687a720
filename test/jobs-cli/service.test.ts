import { terminalSafeOutput } from "../../src/cli/output.js";
import { main } from "../../src/cli/main.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runJobsCommand } from "../../src/cli/jobs.js";
import { ToolHostError } from "../../src/errors.js";
import { type ToolHost, createHost, hostFromConfig } from "../../src/host.js";
import { JobService, eligibilityWarning } from "../../src/jobs/service.js";
import { SqliteJobStore } from "../../src/jobs/sqlite-store.js";
import type { Job } from "../../src/jobs/store.js";
import { parseStatuses, progressBar } from "../../src/jobs/view.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { cli, jobsTool, waitFor } from "./helpers.js";

let data: TempDataDir;
let host: ToolHost;
let service: JobService;

beforeAll(() => {
  data = makeDataDir({ "animas/alice/tools/bg.ts": jobsTool(), "animas/bob/tools/.keep": "" });
  host = createHost({ dataDir: data.dir, isolation: "process", sandboxProcesses: 1, onLog: () => {} });
  // Heartbeat every 100 ms: a cancel made by another process is seen that soon.
  service = new JobService({ host, worker: { pollIntervalMs: 20, heartbeatIntervalMs: 100, idleCheckIntervalMs: 20 } });
});
afterAll(async () => {
  await service.close();
  await host.close();
  data.cleanup();
});

async function rejection(promise: Promise<unknown>): Promise<ToolHostError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ToolHostError);
  return error as ToolHostError;
}

describe("JobService (library API)", () => {
  it("submits with the profile's eligibility, timeout and the given priority, scoped to the Anima", async () => {
    const quick = await service.submit("alice", "bg_quick", {}, { priority: 7 });
    expect(quick).toMatchObject({ created: true, backgroundEligible: false, expectedSeconds: 5 });
    expect(quick.job).toMatchObject({ anima: "alice", tool: "bg", action: "quick", priority: 7, status: "queued", timeoutMs: 1_800_000 });
    expect(eligibilityWarning(quick)).toBe("Warning: bg quick is not marked as long-running (expected ~5s). Consider running directly instead.");
    // An action without a profile entry claims no expected time.
    const { expectedSeconds: _quickSeconds, ...unprofiled } = quick;
    expect(eligibilityWarning(unprofiled)).toBe(
      "Warning: bg quick is not marked as long-running (no EXECUTION_PROFILE entry). Consider running directly instead.",
    );
    const sleep = await service.submit("alice", "bg_sleep", { ms: 1 });
    expect(sleep.job.timeoutMs).toBe(120_000);
    expect(eligibilityWarning(sleep)).toBeUndefined();

    expect((await rejection(service.get("bob", quick.job.id))).type).toBe("NotFound");
    expect((await rejection(service.cancel("bob", quick.job.id))).type).toBe("NotFound");
    expect((await rejection(service.get("carol", quick.job.id))).message).toContain('unknown Anima "carol"');
    expect(await service.list("bob")).toEqual([]);
    expect((await service.list("alice", { status: "queued" })).map((j) => j.id)).toEqual([sleep.job.id, quick.job.id]);
    expect((await rejection(service.result("alice", quick.job.id))).type).toBe("InvalidArguments");
    expect((await rejection(service.submit("alice", "bg_echo", { text: 1 }))).type).toBe("InvalidArguments");
    // A refused submission is recorded (issue #34: every refusal leaves a record).
    expect(await host.audit.read({ kind: "refusal", anima: "alice" })).toMatchObject([
      { kind: "refusal", command: "submit_job", target: "bg_echo", errorType: "InvalidArguments", errorFault: "caller" },
    ]);

    await service.cancel("alice", quick.job.id);
    await service.runWorker({ untilDrained: true });
    expect(await service.result("alice", sleep.job.id)).toEqual({ status: "ok", output: "woke" });
    expect(await service.result("alice", quick.job.id)).toMatchObject({ status: "error", error_type: "ExecutionError" });
  });

  it("cancels a running job from another process: its worker stops it and wait ends with exit 1", async () => {
    const { job } = await service.submit("alice", "bg_sleep", {});
    const stop = new AbortController();
    const worker = service.runWorker({ signal: stop.signal });
    try {
      await waitFor("the job to run", async () => (await service.get("alice", job.id)).status === "running");
      // The CLI is another store connection, as another process would be.
      const cancel = await cli(data.dir, ["--anima", "alice", "jobs", "cancel", job.id]);
      expect(cancel.stdout).toContain("is running; its worker will stop it");
      const seen: string[] = [];
      const done = await service.wait("alice", job.id, { timeoutMs: 10_000, pollIntervalMs: 20, onProgress: (j) => seen.push(j.status) });
      expect(done.status).toBe("cancelled");
      expect(seen.at(-1)).toBe("cancelled");
      const waited = await cli(data.dir, ["--anima", "alice", "jobs", "wait", job.id, "--no-worker"]);
      expect(waited.code).toBe(1);
      expect(waited.stderr).toContain(`job ${job.id} was cancelled before it finished`);
    } finally {
      stop.abort();
      await worker;
    }
  });
});

describe("job display", () => {
  const job = (over: Partial<Job>): Job => ({
    id: "abcdef012345",
    anima: "alice",
    tool: "bg",
    action: "echo",
    schemaName: "bg_echo",
    argsJson: "{}",
    bundleHash: "0",
    priority: 0,
    status: "running",
    attempts: 1,
    maxAttempts: 1,
    retryBackoffMs: 1,
    timeoutMs: 1000,
    submittedAt: 0,
    cancelRequested: false,
    ...over,
  });

  it("draws a bar for terminals and accepts AnimaWorks' status words", () => {
    expect(progressBar(job({ progress: { fraction: 0.5, message: "halfway" } }), 10)).toBe("[#####-----]  50% running halfway  (job abcdef012345)");
    expect(progressBar(job({ status: "succeeded" }), 4)).toBe("[####] 100% succeeded  (job abcdef012345)");
    expect(parseStatuses(["pending,completed", "failed"])).toEqual(["queued", "succeeded", "failed"]);
  });

  it("redraws the bar in place on a terminal while waiting", async () => {
    const { job: submitted } = await service.submit("alice", "bg_echo", { text: "bar" });
    const stderr: string[] = [];
    const stdout: string[] = [];
    const waiting = runJobsCommand("jobs", ["wait", submitted.id, "--no-worker"], {
      host,
      anima: "alice",
      json: false,
      help: false,
      terminal: true,
      // As main hands it over: every text made terminal-safe (the redraw's own cursor moves must still work).
      out: terminalSafeOutput({ stdout: (t) => stdout.push(t), stderr: (t) => stderr.push(t) }),
      argumentsFromJson: async () => ({}),
      hostFactory: hostFromConfig,
      runInvocation: main,
    });
    await waitFor("the first bar", () => stderr.length > 0);
    await service.runWorker({ untilDrained: true });
    expect(await waiting).toBe(0);
    expect(stdout).toEqual(["bar"]);
    expect(stderr[0]).toBe(`[------------------------]   0% queued  (job ${submitted.id})`);
    // Every later draw moves up one line and clears it first, so the terminal shows one bar.
    for (const line of stderr.slice(1)) expect(line.startsWith("\x1b[1A\x1b[2K[")).toBe(true);
    expect(stderr.at(-1)).toBe(`\x1b[1A\x1b[2K[########################] 100% succeeded  (job ${submitted.id})`);
  });
});

describe("a job whose worker died", () => {
  it("reads as interrupted once its lease ran out, without waiting for another worker (and gets its notice)", async () => {
    const { job } = await service.submit("alice", "bg_sleep", { ms: 60_000 });
    // A "worker" that claims the job with a 1 ms lease and dies: nobody renews it.
    const dead = new SqliteJobStore({ path: service.paths.store });
    let expiresAt = 0;
    try {
      const claimed = await dead.claim({ owner: "dead-worker", leaseMs: 1, limit: 10 });
      expiresAt = claimed.find((j) => j.id === job.id)?.leaseExpiresAt ?? Number.POSITIVE_INFINITY;
    } finally {
      await dead.close();
    }
    await waitFor("the dead worker's lease to run out", () => Date.now() > expiresAt, 1_000, 2);
    const seen = await service.get("alice", job.id);
    expect(seen.status).toBe("interrupted");
    expect(seen.error?.message).toBeTruthy();
    expect(seen.notifiedAt).toBeDefined();
  });
});
