import { ToolHostError } from "../errors.js";
import { type JobService, eligibilityWarning, resultOf } from "../jobs/service.js";
import { isTerminal } from "../jobs/store.js";
import { MAX_LISTED_JOBS } from "../jobs/limits.js";
import { listedJobView } from "../jobs/listing.js";
import { jobView, parseStatuses } from "../jobs/view.js";
import type { ManagementTool } from "./management-tool.js";

/**
 * Background jobs over MCP: the same operations as `animaworks-tool submit` and `jobs …`, for the Anima the
 * server was started for, with the same JSON shapes (`jobView`, `{status, output}` / `{status, error_type,
 * message}`). Every argument is checked here; the JobService scopes every id to the Anima.
 */
export interface JobToolsOptions {
  /** Start a detached worker when a job is submitted and none is running (as the CLI does). Default: true. */
  startWorkers?: boolean;
  /**
   * The core tool a schema name belongs to when the operator does not offer it over MCP (exposure.ts),
   * else undefined: submit_job refuses it as tools/call does, or a job would run what `mcp_core_tools`
   * keeps to Bash. Default: every tool may be submitted.
   */
  hiddenCoreTool?: (schemaName: string) => Promise<string | undefined>;
}

/** Longest `wait_seconds` of `job_result`: a tool call should not hold the client for longer. */
export const MAX_JOB_WAIT_SECONDS = 300;
const WAIT_POLL_MS = 200;

export function jobTools(service: JobService, anima: string, options: JobToolsOptions = {}): ManagementTool[] {
  return definitions(service, anima, options).map(withKnownKeys);
}

/**
 * The job tools take exactly the arguments their schemas declare (`additionalProperties: false`): a key
 * of another shape (`tool` and `action` for submit_job's `name`) is named, with the keys expected, rather
 * than left to a later check that can only say what is missing.
 */
function withKnownKeys(tool: ManagementTool): ManagementTool {
  const known = Object.keys(tool.inputSchema.properties);
  const required = new Set(tool.inputSchema.required ?? []);
  return {
    ...tool,
    inputSchema: { ...tool.inputSchema, additionalProperties: false },
    run: (args) => {
      const unknown = Object.keys(args).filter((key) => !known.includes(key));
      if (unknown.length > 0) {
        const expected = known.map((key) => (required.has(key) ? `${key} (required)` : key)).join(", ");
        throw new ToolHostError(
          "InvalidArguments",
          `${tool.name}: unknown argument${unknown.length === 1 ? "" : "s"} ${unknown.map((key) => JSON.stringify(key)).join(", ")}; it takes ${expected}`,
          hintFor(tool.name, args),
        );
      }
      return tool.run(args);
    },
  };
}

/** submit_job called with a tool and an action, as the CLI's `submit <tool> <action>` takes them: the name they make. */
function hintFor(name: string, args: Record<string, unknown>): string | undefined {
  if (name !== "submit_job") return undefined;
  const { tool, action } = args;
  const example = typeof tool === "string" && typeof action === "string" ? `${tool}_${action}` : "weather_forecast";
  return `name is the action's schema name, {tool}_{action}: {"name": ${JSON.stringify(example)}, "arguments": {…}}`;
}

function definitions(service: JobService, anima: string, options: JobToolsOptions): ManagementTool[] {
  const startWorkers = options.startWorkers ?? true;
  return [
    {
      name: "submit_job",
      description:
        "Run one of your tool actions as a background job. The arguments are checked now; the job's id comes back at once and the job runs while you go on. Follow it with job_status / job_result.",
      inputSchema: {
        type: "object",
        properties: {
          name: { type: "string", description: "the action's schema name, {tool}_{action}" },
          arguments: { type: "object", description: "the action's arguments, as for a direct call" },
          priority: { type: "integer", description: "higher runs first among your own jobs (default 0)" },
          idempotency_key: { type: "string", description: "a second submit with the same key returns the first job" },
        },
        required: ["name"],
      },
      run: async (args) => {
        const name = requireString(args, "name");
        const callArgs = args["arguments"] ?? {};
        if (typeof callArgs !== "object" || callArgs === null || Array.isArray(callArgs)) throw invalid("arguments must be an object");
        const priority = args["priority"];
        if (priority !== undefined && (typeof priority !== "number" || !Number.isSafeInteger(priority))) throw invalid("priority must be a whole number");
        const key = args["idempotency_key"];
        if (key !== undefined && typeof key !== "string") throw invalid("idempotency_key must be a string");
        const hidden = await options.hiddenCoreTool?.(name);
        if (hidden !== undefined)
          throw new ToolHostError(
            "ToolNotFound",
            `the core tool "${hidden}" is not offered over MCP on this host, as a job neither`,
            `submit it through Bash: animaworks-tool submit ${hidden} <action> …`,
          );
        const submitted = await service.submit(anima, name, callArgs, {
          ...(priority !== undefined ? { priority: priority } : {}),
          ...(key !== undefined ? { idempotencyKey: key } : {}),
        });
        let workerNote: string | undefined;
        if (startWorkers && !isTerminal(submitted.job.status)) {
          try {
            service.ensureWorker();
          } catch (error) {
            workerNote = `no background worker could be started (${error instanceof Error ? error.message : String(error)}); the job stays queued until "animaworks-tool serve" runs`;
          }
        }
        const warning = eligibilityWarning(submitted);
        return json({
          job_id: submitted.job.id,
          status: submitted.job.status,
          tool: submitted.job.tool,
          action: submitted.job.action,
          created: submitted.created,
          ...(warning ? { warning } : {}),
          ...(workerNote ? { worker: workerNote } : {}),
        });
      },
    },
    {
      name: "list_jobs",
      description:
        "List your background jobs, newest first, optionally only those with given statuses (queued, running, succeeded, failed, cancelled, interrupted). " +
        "Arguments too long to list show as args_bytes and args_preview; job_status gives a job whole.",
      inputSchema: {
        type: "object",
        properties: {
          status: { type: "array", items: { type: "string" }, description: "only jobs with these statuses (default: all)" },
          limit: { type: "integer", minimum: 1, maximum: MAX_LISTED_JOBS, description: "most jobs returned (default 100)" },
        },
      },
      run: async (args) => {
        const status = args["status"];
        if (status !== undefined && (!Array.isArray(status) || !status.every((s) => typeof s === "string")))
          throw invalid("status must be a list of status words");
        const limit = args["limit"];
        if (limit !== undefined && (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LISTED_JOBS))
          throw invalid(`limit must be a whole number from 1 to ${MAX_LISTED_JOBS}`);
        const jobs = await service.list(anima, {
          ...(status !== undefined ? { status: parseStatuses(status) } : {}),
          ...(limit !== undefined ? { limit: limit } : {}),
        });
        return json(jobs.map(listedJobView));
      },
    },
    {
      name: "job_status",
      description: "One of your background jobs: status, progress, attempts, timestamps and any error.",
      inputSchema: { type: "object", properties: { job_id: { type: "string", description: "the id submit_job returned" } }, required: ["job_id"] },
      run: async (args) => json(jobView(await service.get(anima, requireString(args, "job_id")))),
    },
    {
      name: "job_result",
      description: `A finished job's output or error. With wait_seconds (up to ${MAX_JOB_WAIT_SECONDS}), waits that long for it to finish first; a job still not finished is reported with its status.`,
      inputSchema: {
        type: "object",
        properties: {
          job_id: { type: "string", description: "the id submit_job returned" },
          wait_seconds: { type: "number", minimum: 0, maximum: MAX_JOB_WAIT_SECONDS, description: "wait this long for the job to finish first (default 0)" },
        },
        required: ["job_id"],
      },
      run: async (args) => {
        const id = requireString(args, "job_id");
        const waitSeconds = args["wait_seconds"] ?? 0;
        if (typeof waitSeconds !== "number" || !Number.isFinite(waitSeconds) || waitSeconds < 0 || waitSeconds > MAX_JOB_WAIT_SECONDS) {
          throw invalid(`wait_seconds must be a number from 0 to ${MAX_JOB_WAIT_SECONDS}`);
        }
        const job = await service.wait(anima, id, { timeoutMs: waitSeconds * 1000, pollIntervalMs: WAIT_POLL_MS }).catch(async (error: unknown) => {
          if (error instanceof ToolHostError && error.type === "Timeout") return service.get(anima, id);
          throw error;
        });
        if (!isTerminal(job.status))
          return json({ job_id: id, status: job.status, ...(job.progress ? { progress: job.progress } : {}), note: "not finished yet; ask again later" });
        const result = resultOf(job);
        // A failed or cancelled job's result is an error result, as a failed direct call is.
        return result.status === "error" ? { text: json({ job_id: id, ...result }), isError: true as const } : json({ job_id: id, ...result });
      },
    },
    {
      name: "cancel_job",
      description: "Cancel one of your background jobs: a queued one at once; a running one is told (isCancelled) and stopped shortly after.",
      inputSchema: { type: "object", properties: { job_id: { type: "string", description: "the id submit_job returned" } }, required: ["job_id"] },
      run: async (args) => json(jobView(await service.cancel(anima, requireString(args, "job_id")))),
    },
  ];
}

function requireString(args: Record<string, unknown>, key: string): string {
  const value = args[key];
  if (typeof value !== "string" || value === "") throw invalid(`${key} must be a non-empty string`);
  return value;
}

function invalid(message: string): ToolHostError {
  return new ToolHostError("InvalidArguments", message);
}

function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
