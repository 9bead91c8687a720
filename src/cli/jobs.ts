import { EXIT_CODES, type ErrorInfo, ToolHostError, errorEnvelope } from "../errors.js";
import type { InvocationRunner } from "../endpoint/invocation.js";
import type { HostFactory, ToolHost } from "../host-api.js";
import { JobService, eligibilityWarning, resultOf } from "../jobs/service.js";
import { type Job, describeServer, isTerminal } from "../jobs/store.js";
import { MAX_LISTED_JOBS } from "../jobs/limits.js";
import { listedJobView } from "../jobs/listing.js";
import { jobFailure, jobText, jobView, jobsTable, parseStatuses, progressBar, progressLine } from "../jobs/view.js";
import { actionOf, actionsHint } from "../registry/actions.js";
import { parseToolFlags, splitAction } from "./flags.js";
import { type OptionSpec, scanArgs } from "./options.js";
import { actionHelp } from "./help.js";
import { type Output, printError } from "./output.js";

/** The CLI's background-job commands: `submit`, `jobs list|show|wait|cancel|result`, `serve` (docs/design.md §4, §8). */
export interface JobsCliContext {
  /** The CLI's host: validates and pins calls at submit. `serve` starts its own host with process isolation. */
  host: ToolHost;
  anima: string | undefined;
  json: boolean;
  help: boolean;
  out: Output;
  /** The arguments object from --args-json / --args-file, exactly as for a normal call. */
  argumentsFromJson: () => Promise<Record<string, unknown>>;
  /** Makes `serve`'s own host (the composition root's `hostFromConfig`, handed down by the CLI's entry). */
  hostFactory: HostFactory;
  /** Runs the invocations of CLI clients `serve` takes (the CLI's `main`, handed down by it). */
  runInvocation: InvocationRunner;
  /** While waiting, draw a bar (true) or print plain lines (false). Default: whether stderr is a terminal. */
  terminal?: boolean;
  /** Aborted when the caller is gone (a CLI client of a running host disconnected): `wait` ends. */
  signal?: AbortSignal;
}

export const SUBMIT_USAGE = `Usage: animaworks-tool submit [--priority N] [--idempotency-key KEY] [--no-worker] <tool> <action> [args…] [--param value…]
Validates the arguments, queues a background job and prints its id (with --json: {job_id, status, tool, action}).
Options before the tool name are submit's own; after it, arguments work as for a normal call.
  --priority N            integer; higher runs first among your own jobs (default 0)
  --idempotency-key KEY   a second submit with the same key returns the first job instead of queueing another
  --no-worker             only queue: do not start a background worker if none is running`;

export const JOBS_USAGE = `Usage: animaworks-tool jobs <command> [--json]
  list [--status S[,S…]] [--limit N]   this Anima's jobs, newest first (statuses: queued, running, succeeded, failed, cancelled, interrupted;
                                       N: 1 to 1,000, default 100)
  show ID                              one job's state
  wait ID [--timeout S] [--no-worker]  wait until the job finishes, then print its result; exits with its outcome's code
                                       (3 also when S seconds pass first; the job goes on)
  cancel ID                            cancel a queued job now, or ask its worker to stop a running one
  result ID                            a finished job's output (or its error, with its exit code)`;

export const SERVE_USAGE = `Usage: animaworks-tool serve [--until-drained] [--concurrency N] [--per-anima N]
Runs the background job worker until SIGINT/SIGTERM (a first signal lets running jobs finish, a second aborts them).
  --until-drained   exit once no job is queued or running (how submit starts a worker on demand)
  --concurrency N   jobs run at once (default 4)
  --per-anima N     jobs of one Anima run at once, across all workers (default 2)`;

export async function runJobsCommand(command: "submit" | "jobs" | "serve", argv: string[], ctx: JobsCliContext): Promise<number> {
  if (command === "submit") return submit(argv, ctx);
  if (command === "serve") return serve(argv, ctx);
  const [sub, ...rest] = argv;
  if (sub === undefined || !["list", "show", "wait", "cancel", "result"].includes(sub)) {
    if (ctx.help) return (ctx.out.stdout(JOBS_USAGE), 0);
    throw new ToolHostError(
      "InvalidArguments",
      sub === undefined ? "jobs needs a command" : `unknown jobs command "${sub}"`,
      "commands: list, show, wait, cancel, result",
    );
  }
  if (ctx.help) return (ctx.out.stdout(JOBS_USAGE), 0);
  const anima = requireAnima(ctx);
  const service = new JobService({ host: ctx.host });
  try {
    if (sub === "list") return await list(service, anima, rest, ctx);
    const { values, positionals } = takeOptions(rest, sub === "wait" ? { "--timeout": "value", "--no-worker": "flag" } : {});
    const id = onePositional(positionals, `jobs ${sub} needs a job id`);
    if (sub === "show") {
      const job = await service.get(anima, id);
      ctx.out.stdout(ctx.json ? JSON.stringify({ status: "ok", job: jobView(job) }) : jobText(job));
      return 0;
    }
    if (sub === "cancel") return printCancel(await service.cancel(anima, id), ctx);
    if (sub === "result") return printOutcome(await resultReady(service, anima, id), ctx);
    return await wait(service, anima, id, values, ctx);
  } finally {
    await service.close();
  }
}

async function submit(argv: string[], ctx: JobsCliContext): Promise<number> {
  // Submit's options come before the tool name, so they can never clash with a parameter of the tool.
  const { values, positionals: rest } = takeOptions(argv, { "--priority": "value", "--idempotency-key": "value", "--no-worker": "flag" }, true);
  const [toolName, ...toolArgv] = rest;
  if (toolName === undefined) {
    if (ctx.help) return (ctx.out.stdout(SUBMIT_USAGE), 0);
    throw new ToolHostError("InvalidArguments", "submit needs a tool and an action", "animaworks-tool submit --help");
  }
  // Without an Anima only core and shared tools are visible: say what is missing rather than "unknown tool".
  if (!ctx.help) requireAnima(ctx);
  const tool = await ctx.host.describe(ctx.anima, toolName);
  if (tool.status === "error") throw ToolHostError.fromInfo(tool.error ?? { type: "LoadError", fault: "tool", message: "the tool failed to load" });
  const { action, flags: flagArgv } = splitAction(toolArgv);
  if (action === undefined) throw new ToolHostError("InvalidArguments", `no action given for tool "${toolName}"`, actionsHint(tool));
  const schema = actionOf(tool, action);
  if (ctx.help) return (ctx.out.stdout(`${SUBMIT_USAGE}\n\n${actionHelp(tool, schema)}`), 0);
  const anima = requireAnima(ctx);
  const args = { ...(await ctx.argumentsFromJson()), ...parseToolFlags(schema.parameters, flagArgv) };
  const priority = values.get("--priority");
  const key = values.get("--idempotency-key");

  const service = new JobService({ host: ctx.host });
  try {
    const submitted = await service.submit(anima, schema.name, args, {
      ...(typeof priority === "string" ? { priority: wholeNumber(priority, "--priority", -1_000_000) } : {}),
      ...(typeof key === "string" ? { idempotencyKey: key } : {}),
    });
    // Only now is the job durable: everything below reports on a job that exists.
    const warning = eligibilityWarning(submitted);
    if (warning) ctx.out.stderr(warning);
    const { job, created } = submitted;
    if (!values.has("--no-worker") && !isTerminal(job.status)) startWorker(service, ctx);
    if (ctx.json) ctx.out.stdout(JSON.stringify({ job_id: job.id, status: job.status, tool: job.tool, action: job.action, created }));
    else {
      if (!created) ctx.out.stderr(`(idempotency key matched job ${job.id}, ${job.status}; nothing new queued)`);
      ctx.out.stdout(job.id);
    }
    return 0;
  } finally {
    await service.close();
  }
}

async function list(service: JobService, anima: string, argv: string[], ctx: JobsCliContext): Promise<number> {
  const { values, positionals, repeated } = takeOptions(argv, { "--status": "value", "--limit": "value" });
  if (positionals.length > 0)
    throw new ToolHostError("InvalidArguments", `unexpected argument "${positionals[0]}"`, "usage: animaworks-tool jobs list [--status S] [--limit N]");
  const statuses = parseStatuses(repeated.get("--status") ?? []);
  const limit = values.get("--limit");
  const jobs = await service.list(anima, {
    ...(statuses.length > 0 ? { status: statuses } : {}),
    ...(typeof limit === "string" ? { limit: wholeNumber(limit, "--limit", 1, MAX_LISTED_JOBS) } : {}),
  });
  ctx.out.stdout(ctx.json ? JSON.stringify({ status: "ok", anima, jobs: jobs.map(listedJobView) }) : jobsTable(jobs));
  return 0;
}

async function wait(service: JobService, anima: string, id: string, values: Map<string, string | true>, ctx: JobsCliContext): Promise<number> {
  const timeout = values.get("--timeout");
  const timeoutMs = typeof timeout === "string" ? seconds(timeout, "--timeout") * 1000 : undefined;
  const first = await service.get(anima, id);
  // Waiting on a queued job nobody will run would only time out: start a worker as submit would.
  if (!isTerminal(first.status) && !values.has("--no-worker")) startWorker(service, ctx);
  const display = ctx.json ? undefined : progressDisplay(ctx);
  let job: Job;
  try {
    job = await service.wait(anima, id, {
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      ...(ctx.signal ? { signal: ctx.signal } : {}),
      onProgress: (j) => display?.(j),
    });
  } catch (error) {
    if (!(error instanceof ToolHostError) || error.type !== "Timeout" || !ctx.json) throw error;
    // The envelope says where the job stands, so a script can tell this from the job's own timeout.
    const now = await service.get(anima, id);
    return printJobError(ctx, error.toInfo(), now);
  }
  return printOutcome(job, ctx);
}

/** `serve`: the worker, in this process, with its own host using sandbox processes. */
async function serve(argv: string[], ctx: JobsCliContext): Promise<number> {
  if (ctx.help) return (ctx.out.stdout(SERVE_USAGE), 0);
  const { values, positionals } = takeOptions(argv, { "--until-drained": "flag", "--concurrency": "value", "--per-anima": "value" });
  if (positionals.length > 0) throw new ToolHostError("InvalidArguments", `unexpected argument "${positionals[0]}"`, "animaworks-tool serve --help");
  const concurrency = values.get("--concurrency");
  const perAnima = values.get("--per-anima");
  const worker = {
    ...(typeof concurrency === "string" ? { concurrency: wholeNumber(concurrency, "--concurrency", 1) } : {}),
    ...(typeof perAnima === "string" ? { perAnimaConcurrency: wholeNumber(perAnima, "--per-anima", 1) } : {}),
  };
  const untilDrained = values.has("--until-drained");
  const { jobsUrl } = ctx.host.config;
  // The invocation's own configuration (flags, environment, config.json), with processes and a watcher.
  const host = ctx.hostFactory({ ...ctx.host.config, isolation: "process", watch: true });
  const service = new JobService({ host, worker });
  // A standing worker also serves CLI calls for its data dir (unless a daemon does already).
  const endpoint = untilDrained ? undefined : await openEndpoint(host, ctx.out, ctx.runInvocation);
  const stop = new AbortController();
  const abortRunning = new AbortController();
  const onSignal = (): void => {
    if (!stop.signal.aborted) {
      ctx.out.stderr("animaworks-tool serve: stopping; running jobs may finish (signal again to abort them)");
      stop.abort();
    } else abortRunning.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    const store = jobsUrl ? describeServer(jobsUrl) : service.paths.store;
    ctx.out.stderr(
      `animaworks-tool serve: worker ${process.pid} running jobs from ${store}${untilDrained ? " until the queue is drained" : "; stop with Ctrl-C"}`,
    );
    const stats = await service.runWorker({ untilDrained, signal: stop.signal, abortRunning: abortRunning.signal });
    const summary = `ran ${stats.started} job(s): ${stats.succeeded} succeeded, ${stats.failed} failed, ${stats.cancelled} cancelled`;
    if (ctx.json) ctx.out.stdout(JSON.stringify({ status: "ok", ...stats }));
    else ctx.out.stderr(`animaworks-tool serve: stopped; ${summary}`);
    return 0;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await endpoint?.close();
    await service.close();
    await host.close();
  }
}

async function openEndpoint(host: ToolHost, out: Output, runInvocation: InvocationRunner): Promise<{ close(): Promise<void> } | undefined> {
  try {
    const { Endpoint } = await import("../endpoint/server.js");
    const endpoint = await Endpoint.open({ host, kind: "serve", runInvocation, log: (message) => out.stderr(`animaworks-tool serve: ${message}`) });
    out.stderr(
      endpoint
        ? `animaworks-tool serve: serving CLI calls on ${endpoint.paths.socket}`
        : "animaworks-tool serve: another host serves CLI calls for this data dir",
    );
    return endpoint;
  } catch (error) {
    out.stderr(`animaworks-tool serve: not serving CLI calls (${error instanceof Error ? error.message : String(error)})`);
    return undefined;
  }
}

// ---- output -------------------------------------------------------------------------------------

/**
 * A finished job as a direct call's result: its output and exit 0 (with `-j`, an object result as the
 * object, as cli/output.ts gives a call's), or its error with the error's exit code. A cancelled job's
 * partial result is printed too: on stdout before the error line, or as `output` in the `-j` envelope.
 */
function printOutcome(job: Job, ctx: JobsCliContext): number {
  const result = resultOf(job);
  if (result.status === "error") {
    if (!ctx.json && job.result !== undefined) ctx.out.stdout(job.result);
    return printJobError(ctx, jobFailure(job), job, result.output);
  }
  ctx.out.stdout(ctx.json ? JSON.stringify({ status: "ok", job_id: job.id, job_status: job.status, output: result.output }) : (job.result ?? ""));
  return 0;
}

function printJobError(ctx: JobsCliContext, error: ErrorInfo, job: Job, output?: unknown): number {
  if (!ctx.json) return printError(ctx.out, error, false);
  ctx.out.stdout(JSON.stringify({ ...errorEnvelope(error), job_id: job.id, job_status: job.status, ...(output !== undefined ? { output } : {}) }));
  return EXIT_CODES[error.type];
}

function printCancel(job: Job, ctx: JobsCliContext): number {
  const outcome = job.status === "cancelled" ? "cancelled" : job.status === "running" ? "requested" : "already-finished";
  if (ctx.json) ctx.out.stdout(JSON.stringify({ status: "ok", cancel: outcome, job: jobView(job) }));
  else if (outcome === "cancelled") ctx.out.stdout(`job ${job.id} cancelled`);
  else if (outcome === "requested") ctx.out.stdout(`job ${job.id} is running; its worker will stop it (see: animaworks-tool jobs show ${job.id})`);
  else ctx.out.stdout(`job ${job.id} already ${job.status}; nothing to cancel`);
  return 0;
}

/** Progress while waiting, on stderr: a bar redrawn in place on a terminal, else one line per change. */
function progressDisplay(ctx: JobsCliContext): (job: Job) => void {
  if (!(ctx.terminal ?? process.stderr.isTTY === true)) return (job) => ctx.out.stderr(progressLine(job));
  let drawn = false;
  return (job) => {
    // The redraw's cursor moves are the CLI's own (output.ts); all other stderr text is made terminal-safe,
    // so they cannot be written as text (they printed as "\u001b[1A\u001b[2K").
    if (drawn && ctx.out.stderrRedraw) ctx.out.stderrRedraw(progressBar(job));
    else ctx.out.stderr(progressBar(job));
    drawn = true;
  };
}

function startWorker(service: JobService, ctx: JobsCliContext): void {
  try {
    service.ensureWorker();
  } catch (error) {
    // The job is queued either way; say how to get it run.
    ctx.out.stderr(
      `Warning: could not start a background worker (${error instanceof Error ? error.message : String(error)}); run "animaworks-tool serve" to run queued jobs`,
    );
  }
}

// ---- argument helpers ---------------------------------------------------------------------------

async function resultReady(service: JobService, anima: string, id: string): Promise<Job> {
  await service.result(anima, id); // throws for an unknown or unfinished job
  return service.get(anima, id);
}

function requireAnima(ctx: JobsCliContext): string {
  if (ctx.anima === undefined) throw new ToolHostError("InvalidArguments", "no Anima selected", "pass --anima NAME or set ANIMAWORKS_ANIMA_DIR");
  return ctx.anima;
}

/**
 * Splits a command's own options (`--name value`, `--name=value`, flags) from positionals. Unknown options
 * are errors. With `leadingOnly`, parsing stops at the first positional (submit: the tool name).
 */
function takeOptions(argv: string[], spec: OptionSpec, leadingOnly = false) {
  const values = new Map<string, string | true>();
  const repeated = new Map<string, string[]>();
  const positionals: string[] = [];
  for (const token of scanArgs(argv, spec, { longOnly: true })) {
    if (token.kind === "end" || token.kind === "positional") {
      if (leadingOnly) {
        positionals.push(...argv.slice(token.kind === "end" ? token.index + 1 : token.index));
        break;
      }
      if (token.kind === "positional") positionals.push(token.text);
      continue;
    }
    if (token.kind === "unknown") {
      if (spec[token.name] === "flag") throw new ToolHostError("InvalidArguments", `option ${token.name} takes no value`);
      throw new ToolHostError(
        "InvalidArguments",
        `unknown option ${token.name}`,
        Object.keys(spec).length > 0 ? `options: ${Object.keys(spec).join(", ")}` : "this command takes no options",
      );
    }
    if (spec[token.name] === "flag") {
      values.set(token.name, true);
      continue;
    }
    if (token.value === undefined) throw new ToolHostError("InvalidArguments", `option ${token.name} needs a value`);
    values.set(token.name, token.value);
    repeated.set(token.name, [...(repeated.get(token.name) ?? []), token.value]);
  }
  return { values, positionals, repeated };
}

function onePositional(positionals: string[], missing: string): string {
  if (positionals.length === 0) throw new ToolHostError("InvalidArguments", missing, "animaworks-tool jobs --help");
  if (positionals.length > 1) throw new ToolHostError("InvalidArguments", `unexpected argument "${positionals[1]}"`, "animaworks-tool jobs --help");
  return positionals[0] as string;
}

function wholeNumber(text: string, option: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const value = /^[-+]?\d+$/.test(text.trim()) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max.toLocaleString("en-US")}`;
    throw new ToolHostError("InvalidArguments", `${option} must be a whole number ${range}, got "${text}"`);
  }
  return value;
}

function seconds(text: string, option: string): number {
  const value = Number(text);
  if (text.trim() === "" || !Number.isFinite(value) || value < 0 || value > 2_147_483) {
    throw new ToolHostError("InvalidArguments", `${option} must be a number of seconds from 0 to 2,147,483, got "${text}"`);
  }
  return value;
}
