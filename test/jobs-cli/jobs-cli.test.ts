import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { noticePath } from "../../src/jobs/notices.js";
import { JobService } from "../../src/jobs/service.js";
import { MAX_JOB_ARGS_BYTES } from "../../src/jobs/limits.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { CLI_MODES, type CliRunner, cliRunner } from "../helpers/cli-modes.js";
import { jobRows, jobsTool } from "./helpers.js";

// The whole suite runs in both CLI modes: in-process, and through a running host's endpoint.
describe.each(CLI_MODES)("job commands (%s)", (mode) => {
  let data: TempDataDir;
  /** The worker's host: real sandbox processes, as `serve` uses. */
  let workerHost: ToolHost;
  let runner: CliRunner;

  const cli = async (argv: string[], onStdout?: (text: string) => void) =>
    runner.run(["--data-dir", data.dir, ...argv], onStdout ? { onStdout: (text) => onStdout(text.replace(/\n$/, "")) } : {});
  const run = (...argv: string[]) => cli(argv);
  const asAlice = (...argv: string[]) => cli(["--anima", "alice", ...argv]);

  /** Runs every queued job through a real worker (sandbox processes) until the store is drained. */
  async function drain(): Promise<void> {
    const service = new JobService({ host: workerHost, worker: { pollIntervalMs: 20, idleCheckIntervalMs: 20 } });
    try {
      await service.runWorker({ untilDrained: true });
    } finally {
      await service.close();
    }
  }

  beforeAll(async () => {
    data = makeDataDir({ "animas/alice/tools/bg.ts": jobsTool(), "animas/bob/tools/bg.ts": jobsTool() });
    workerHost = createHost({ dataDir: data.dir, isolation: "process", sandboxProcesses: 1, onLog: () => {} });
    runner = await cliRunner(mode, data.dir);
  });
  afterAll(async () => {
    await runner.close();
    await workerHost.close();
    data.cleanup();
  });

  describe("animaworks-tool submit", () => {
    it("prints the id only once the job is durable, and exits 2 for bad arguments with nothing queued", async () => {
      const seenAtPrint: unknown[] = [];
      // At the very moment the id is printed, another connection must already find the job.
      const ok = await cli(["--anima", "alice", "submit", "--no-worker", "bg", "echo", "hello"], (text) => {
        seenAtPrint.push(jobRows(data.dir).find((row) => row.id === text.trim()));
      });
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.stdout).toMatch(/^[0-9a-f]{12}$/);
      expect(seenAtPrint).toEqual([{ id: ok.stdout, anima: "alice", status: "queued" }]);

      const before = jobRows(data.dir).length;
      const badType = await asAlice("submit", "--no-worker", "bg", "echo", "x", "--times", "many");
      expect(badType.code).toBe(2);
      expect(badType.stderr).toContain("--times expects integer");
      const missing = await asAlice("submit", "--no-worker", "bg", "echo");
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain("InvalidArguments");
      const unknownAction = await asAlice("submit", "--no-worker", "bg", "nope");
      expect(unknownAction.code).toBe(5);
      const badPriority = await asAlice("submit", "--no-worker", "--priority", "high", "bg", "echo", "x");
      expect(badPriority.code).toBe(2);
      // job_args_over_limit: arguments a direct call would take (≤ 64 MiB) but over a job's 1 MiB.
      const bigArgs = join(data.dir, "big-args.json");
      writeFileSync(bigArgs, JSON.stringify({ text: "x".repeat(MAX_JOB_ARGS_BYTES) }));
      const tooBig = await asAlice("submit", "--no-worker", "bg", "echo", "--args-file", bigArgs);
      expect(tooBig.code).toBe(2);
      expect(tooBig.stderr).toContain("Error (InvalidArguments): the job's arguments are 1,048,587 bytes of JSON, over the 1,048,576-byte (1 MiB) limit");
      expect(jobRows(data.dir)).toHaveLength(before);
    });

    it("prints {job_id, status, tool, action} with --json, and warns in AnimaWorks' words for an action not marked long-running", async () => {
      const quick = await asAlice("--json", "submit", "--no-worker", "bg", "quick");
      expect(quick.code).toBe(0);
      expect(quick.stderr).toBe("Warning: bg quick is not marked as long-running (expected ~5s). Consider running directly instead.");
      const envelope = JSON.parse(quick.stdout);
      expect(envelope).toEqual({ job_id: expect.stringMatching(/^[0-9a-f]{12}$/), status: "queued", tool: "bg", action: "quick", created: true });
      expect(jobRows(data.dir).find((row) => row.id === envelope.job_id)?.status).toBe("queued");
      const eligible = await asAlice("submit", "--no-worker", "bg", "echo", "x");
      expect(eligible.stderr).toBe("");
      // Queued jobs left here are drained by later tests; cancel them so they do not run there.
      await asAlice("jobs", "cancel", envelope.job_id);
      await asAlice("jobs", "cancel", eligible.stdout);
    });

    it("deduplicates by idempotency key, whatever the order of the arguments, and refuses the key for other work", async () => {
      const first = await asAlice("submit", "--no-worker", "--idempotency-key", "k1", "bg", "echo", "--text", "a", "--times", "2");
      const again = await asAlice("submit", "--no-worker", "--idempotency-key=k1", "bg", "echo", "--times", "2", "--text", "a");
      expect(first.code).toBe(0);
      expect(again.code).toBe(0);
      expect(again.stdout).toBe(first.stdout);
      expect(jobRows(data.dir).filter((row) => row.id === first.stdout)).toHaveLength(1);
      const other = await asAlice("submit", "--no-worker", "--idempotency-key", "k1", "bg", "echo", "b");
      expect(other.code).toBe(2);
      expect(other.stderr).toContain("already used");
      // Keys are per Anima: bob's k1 is a job of his own.
      const bobs = await cli(["--anima", "bob", "submit", "--no-worker", "--idempotency-key", "k1", "bg", "echo", "--text", "a", "--times", "2"]);
      expect(bobs.code).toBe(0);
      expect(bobs.stdout).not.toBe(first.stdout);
      await asAlice("jobs", "cancel", first.stdout);
      await cli(["--anima", "bob", "jobs", "cancel", bobs.stdout]);
    });
  });

  describe("animaworks-tool jobs", () => {
    it("shows an Anima only its own jobs: another Anima's id is NotFound (exit 2) for every command", async () => {
      const id = (await asAlice("submit", "--no-worker", "bg", "echo", "private")).stdout;
      for (const command of ["show", "wait", "cancel", "result"]) {
        const r = await cli(["--anima", "bob", "jobs", command, id, ...(command === "wait" ? ["--no-worker", "--timeout", "0"] : [])]);
        expect(r.code, command).toBe(2);
        expect(r.stderr, command).toContain(`Error (NotFound): Anima "bob" has no job "${id}"`);
      }
      const bobList = JSON.parse((await cli(["--anima", "bob", "--json", "jobs", "list"])).stdout);
      expect(bobList.jobs.map((j: { job_id: string }) => j.job_id)).not.toContain(id);
      // bob's cancel changed nothing.
      const shown = JSON.parse((await asAlice("--json", "jobs", "show", id)).stdout);
      expect(shown.job).toMatchObject({ job_id: id, status: "queued", args: { text: "private" }, tool: "bg", action: "echo" });
      const unknown = await asAlice("jobs", "show", "000000000000");
      expect(unknown.code).toBe(2);
      await asAlice("jobs", "cancel", id);
    });

    it("cancels a queued job at once, writes its notice under the same id, and no worker runs it", async () => {
      const id = (await asAlice("submit", "--no-worker", "bg", "echo", "never")).stdout;
      const cancel = await asAlice("jobs", "cancel", id);
      expect(cancel.code).toBe(0);
      expect(cancel.stdout).toBe(`job ${id} cancelled`);
      const notice = noticePath(data.anima("alice"), id);
      expect(readFileSync(notice, "utf8")).toContain(`- Task ID: ${id}`);
      expect(readFileSync(notice, "utf8")).toMatch(
        /^# Background task cancelled: bg:echo\n[^]*- Status: cancelled\n- Result: \[bg:echo\] cancelled: [^\n]*\n$/,
      );
      await drain();
      const job = JSON.parse((await asAlice("--json", "jobs", "show", id)).stdout).job;
      expect(job).toMatchObject({ status: "cancelled", attempts: 0 });
      const result = await asAlice("jobs", "result", id);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain("was cancelled");
      const listed = JSON.parse((await asAlice("--json", "jobs", "list", "--status", "cancelled")).stdout);
      expect(listed.jobs.map((j: { job_id: string }) => j.job_id)).toContain(id);
      expect(listed.jobs.every((j: { status: string }) => j.status === "cancelled")).toBe(true);
    });

    it("runs a job end to end in a sandbox process: result, plain progress lines, and the notice named by the submit id", async () => {
      const id = (await asAlice("submit", "--no-worker", "bg", "echo", "hi", "--times", "3")).stdout;
      const pending = await asAlice("jobs", "result", id);
      expect(pending.code).toBe(2);
      expect(pending.stderr).toContain(`job ${id} is queued and has no result yet`);
      const waiting = asAlice("jobs", "wait", id, "--no-worker", "--timeout", "20");
      await drain();
      const waited = await waiting;
      expect(waited.code, waited.stderr).toBe(0);
      expect(waited.stdout).toBe("hi hi hi");
      // One plain line per change (which of queued/running it saw first depends on timing), ending in the outcome.
      const lines = waited.stderr.split("\n");
      for (const line of lines) expect(line).toMatch(new RegExp(`^job ${id}: (queued|running|succeeded)$`));
      expect(lines.at(-1)).toBe(`job ${id}: succeeded`);
      const result = JSON.parse((await asAlice("--json", "jobs", "result", id)).stdout);
      expect(result).toEqual({ status: "ok", job_id: id, job_status: "succeeded", output: "hi hi hi" });
      const notice = readFileSync(noticePath(join(data.dir, "animas", "alice"), id), "utf8");
      expect(notice).toContain("# Background task completed: bg:echo");
      expect(notice).toContain(`- Task ID: ${id}`);
      expect(notice).toContain("[bg:echo] completed: hi hi hi");
      const shown = await asAlice("jobs", "show", id);
      expect(shown.stdout).toContain(`Job ${id}: succeeded`);
      expect(shown.stdout).toContain(`notice:     state/background_notifications/${id}.md`);
    });

    it("runs a job with the tool version current at submit, even after the tool is edited", async () => {
      data.write("animas/alice/tools/bg.ts", jobsTool("v1"));
      const id = (await asAlice("submit", "--no-worker", "bg", "version")).stdout;
      data.write("animas/alice/tools/bg.ts", jobsTool("v2"));
      // The edit took effect for new calls and submits...
      expect((await asAlice("bg", "version")).stdout).toBe("v2");
      const later = (await asAlice("submit", "--no-worker", "bg", "version")).stdout;
      await drain();
      // ...but the job submitted before it still ran the old code.
      expect((await asAlice("jobs", "result", id)).stdout).toBe("v1");
      expect((await asAlice("jobs", "result", later)).stdout).toBe("v2");
    });

    it("fails a job that outlives its profile's timeout_seconds with Timeout (exit 3), in its notice too", async () => {
      const id = (await asAlice("submit", "--no-worker", "bg", "spin")).stdout;
      const shown = JSON.parse((await asAlice("--json", "jobs", "show", id)).stdout).job;
      expect(shown.timeout_seconds).toBe(1);
      const startedAt = Date.now();
      await drain();
      expect(Date.now() - startedAt).toBeLessThan(30_000); // its 1 s timeout stopped it: it would spin forever
      const waited = await asAlice("--json", "jobs", "wait", id, "--no-worker");
      expect(waited.code).toBe(3);
      expect(JSON.parse(waited.stdout)).toMatchObject({ status: "error", error_type: "Timeout", job_id: id, job_status: "failed" });
      expect(readFileSync(noticePath(data.anima("alice"), id), "utf8")).toContain("[bg:spin] failed: Timeout:");
    });

    it("gives up waiting after --timeout with exit 3 while the job stays queued", async () => {
      const id = (await asAlice("submit", "--no-worker", "bg", "echo", "later")).stdout;
      const r = await asAlice("--json", "jobs", "wait", id, "--no-worker", "--timeout", "0.2");
      expect(r.code).toBe(3);
      expect(JSON.parse(r.stdout)).toMatchObject({ status: "error", error_type: "Timeout", job_id: id, job_status: "queued" });
      await asAlice("jobs", "cancel", id);
      expect(existsSync(noticePath(data.anima("alice"), id))).toBe(true);
    });

    it("answers usage errors with exit 2", async () => {
      expect((await asAlice("jobs")).code).toBe(2);
      expect((await asAlice("jobs", "frobnicate")).code).toBe(2);
      expect((await asAlice("jobs", "show")).code).toBe(2);
      expect((await asAlice("jobs", "list", "--status", "done")).stderr).toContain('unknown job status "done"');
      // list_limit_ceiling: one listing is at most 1,000 jobs.
      const tooMany = await asAlice("jobs", "list", "--limit", "1001");
      expect(tooMany.code).toBe(2);
      expect(tooMany.stderr).toContain('--limit must be a whole number from 1 to 1,000, got "1001"');
      expect((await run("jobs", "list")).stderr).toContain("no Anima selected");
      const help = await run("jobs", "--help");
      expect(help.code).toBe(0);
      expect(help.stdout).toContain("wait ID [--timeout S]");
    });
  });
});
