import type { CreateTaskOptions, TaskStore } from "@modelcontextprotocol/sdk/experimental/tasks/interfaces.js";
import type { Request, RequestId, Result, Task } from "@modelcontextprotocol/sdk/types.js";
import { ToolHostError, errorEnvelope } from "../errors.js";
import { objectFromJson } from "../execution/result-check.js";
import type { JobService } from "../jobs/service.js";
import { jobFailure } from "../jobs/view.js";
import { type Job, isTerminal } from "../jobs/store.js";

/** How often clients are asked to poll a task, ms (a job's progress is seen at least this often). */
export const TASK_POLL_INTERVAL_MS = 1_000;
/** Tasks listed by `tasks/list` at most: the Anima's newest jobs. */
const MAX_LISTED_TASKS = 100;

/**
 * MCP tasks (protocol revision 2025-11-25; the SDK's experimental `TaskStore`) as background jobs of the
 * server's Anima: a `tools/call` that asks for a task submits a job, whose id is the task id, and
 * `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` read and cancel that job. The job store is
 * the record (the job worker writes results, not this store), so a task outlives the MCP session, and
 * every id is scoped to the Anima: another Anima's job is "not found", exactly as for `jobs`.
 */
export class JobTaskStore implements TaskStore {
  constructor(
    private readonly jobs: JobService,
    private readonly anima: string,
    private readonly onSubmitted: (job: Job) => void = () => {},
  ) {}

  async createTask(options: CreateTaskOptions, _requestId: RequestId, request: Request): Promise<Task> {
    const params = (request.params ?? {}) as { name?: unknown; arguments?: unknown };
    if (typeof params.name !== "string") throw new ToolHostError("InvalidArguments", "a task needs the name of the tool action to run");
    const { job } = await this.jobs.submit(this.anima, params.name, params.arguments ?? {});
    this.onSubmitted(job);
    return taskOf(job, options.ttl ?? null);
  }

  async getTask(taskId: string): Promise<Task | null> {
    const job = await this.job(taskId);
    return job ? taskOf(job) : null;
  }

  /** Results are written by the job worker that ran the job; nothing else stores them. */
  async storeTaskResult(taskId: string): Promise<void> {
    throw new ToolHostError("InvalidArguments", `the result of task ${taskId} is recorded by the job worker that runs it`);
  }

  async getTaskResult(taskId: string): Promise<Result> {
    const job = await this.job(taskId);
    if (!job) throw new ToolHostError("NotFound", `Anima "${this.anima}" has no task "${taskId}"`);
    return callResultOf(job);
  }

  /** The protocol cancels through this; other status changes belong to the job worker. */
  async updateTaskStatus(taskId: string, status: Task["status"]): Promise<void> {
    if (status === "cancelled") await this.jobs.cancel(this.anima, taskId);
  }

  async listTasks(): Promise<{ tasks: Task[] }> {
    const jobs = await this.jobs.list(this.anima, { limit: MAX_LISTED_TASKS });
    return { tasks: jobs.map((job) => taskOf(job)) };
  }

  private async job(taskId: string): Promise<Job | undefined> {
    try {
      return await this.jobs.get(this.anima, taskId);
    } catch (error) {
      if (error instanceof ToolHostError && error.type === "NotFound") return undefined;
      throw error;
    }
  }
}

/** A job as an MCP task: queued and running jobs are `working`; interrupted ones `failed`. */
export function taskOf(job: Job, ttl: number | null = null): Task {
  const status: Task["status"] =
    job.status === "succeeded"
      ? "completed"
      : job.status === "cancelled"
        ? "cancelled"
        : job.status === "failed" || job.status === "interrupted"
          ? "failed"
          : "working";
  const updatedAt = job.finishedAt ?? job.startedAt ?? job.submittedAt;
  const message = isTerminal(job.status)
    ? job.status === "succeeded"
      ? undefined
      : resultOfMessage(job)
    : job.progress?.message || (job.status === "queued" ? "queued" : undefined);
  return {
    taskId: job.id,
    status,
    ttl,
    createdAt: new Date(job.submittedAt).toISOString(),
    lastUpdatedAt: new Date(updatedAt).toISOString(),
    pollInterval: TASK_POLL_INTERVAL_MS,
    ...(message ? { statusMessage: message } : {}),
  };
}

function resultOfMessage(job: Job): string {
  if (job.status === "succeeded") return "";
  const failure = jobFailure(job);
  return `${failure.type}: ${failure.message}`;
}

/** A finished job as the `tools/call` result it stands for (a failed or cancelled one is `isError`). */
export function callResultOf(job: Job): Result {
  if (job.status === "succeeded") {
    const output = job.result ?? "";
    const structured = objectFromJson(output);
    return { content: [{ type: "text", text: output }], ...(structured ? { structuredContent: structured } : {}) };
  }
  return { content: [{ type: "text", text: JSON.stringify(errorEnvelope(jobFailure(job))) }], isError: true };
}
