import type { CreateTaskOptions, TaskStore } from "@modelcontextprotocol/sdk/experimental/tasks/interfaces.js";
import type { Request, RequestId, Result, Task } from "@modelcontextprotocol/sdk/types.js";
import { ToolHostError, errorEnvelope } from "../errors.js";
import { type JobService, resultOf } from "../jobs/service.js";
import { jobFailure, jobOutputValue } from "../jobs/view.js";
import { type Job, isTerminal } from "../jobs/store.js";
import { JOB_DEFAULTS } from "../jobs/defaults.js";

/** How often clients are asked to poll a task, ms (a job's progress is seen at least this often). */
export const TASK_POLL_INTERVAL_MS = 1_000;
/**
 * Every task's `ttl`, ms, the same in every answer (creation, tasks/get, tasks/list, notifications): the
 * time from creation the task is kept at least. A job is purged `retentionMs` (7 days) after it finished,
 * so never sooner than that after it was created. The ttl a client asks for is overridden, as the revision
 * allows: the job store, not the session, decides how long a job is kept.
 */
export const TASK_TTL_MS = JOB_DEFAULTS.retentionMs;
/**
 * How long `tasks/result` of a cancelled task waits for its job to stop, ms: the worker sees the cancel at
 * its next heartbeat and gives the tool `cancelGraceMs` to return its partial result (and as long again before
 * it gives up on it); a worker that died loses its lease, and the job is recovered as cancelled.
 */
const CANCEL_SETTLE_MS = JOB_DEFAULTS.leaseMs + 2 * JOB_DEFAULTS.cancelGraceMs;
/** Tasks listed by `tasks/list` at most: the Anima's newest jobs. */
const MAX_LISTED_TASKS = 100;

/**
 * MCP tasks (protocol revision 2025-11-25; the SDK's experimental `TaskStore`) as background jobs of the
 * server's Anima: a `tools/call` that asks for a task submits a job, whose id is the task id, and
 * `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` read and cancel that job. The job store is
 * the record (the job worker writes results, not this store), so a task outlives the MCP session, and
 * every id is scoped to the Anima: another Anima's job is "not found", exactly as for `jobs`.
 *
 * Cancelling: a running job is only told to stop (its worker ends it shortly after, keeping a partial result
 * the tool returns), but the revision wants the task `cancelled` before `tasks/cancel` answers, and cancelled
 * for good. So a job whose cancel was requested is a `cancelled` task from then on, whatever it ends as, and
 * `tasks/result` of such a task waits (bounded) for the job to stop and answers with what it left.
 */
export class JobTaskStore implements TaskStore {
  constructor(
    private readonly jobs: JobService,
    private readonly anima: string,
    private readonly onSubmitted: (job: Job) => void = () => {},
  ) {}

  async createTask(_options: CreateTaskOptions, _requestId: RequestId, request: Request): Promise<Task> {
    const params = (request.params ?? {}) as { name?: unknown; arguments?: unknown };
    if (typeof params.name !== "string") throw new ToolHostError("InvalidArguments", "a task needs the name of the tool action to run");
    const { job } = await this.jobs.submit(this.anima, params.name, params.arguments ?? {});
    this.onSubmitted(job);
    return taskOf(job);
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
    if (isTerminal(job.status)) return callResultOf(job);
    // Only a cancelled task is terminal before its job is (see above): its result is what the job leaves.
    const ended = await this.jobs.wait(this.anima, taskId, { timeoutMs: CANCEL_SETTLE_MS }).catch(() => undefined);
    if (ended && isTerminal(ended.status)) return callResultOf(ended);
    const failure = errorEnvelope({ type: "ExecutionError", fault: "host", message: `task ${taskId} was cancelled, and its job has not stopped yet` });
    return { content: [{ type: "text", text: JSON.stringify(failure) }], isError: true };
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

/**
 * A job as an MCP task: queued and running jobs are `working`; interrupted ones `failed`; a job whose cancel
 * was requested is `cancelled` at once and for good (see JobTaskStore).
 */
export function taskOf(job: Job): Task {
  const status: Task["status"] =
    job.cancelRequested || job.status === "cancelled"
      ? "cancelled"
      : job.status === "succeeded"
        ? "completed"
        : job.status === "failed" || job.status === "interrupted"
          ? "failed"
          : "working";
  const updatedAt = job.finishedAt ?? job.startedAt ?? job.submittedAt;
  const message = isTerminal(job.status)
    ? job.status === "succeeded"
      ? undefined
      : resultOfMessage(job)
    : status === "cancelled"
      ? "cancelled by request; the tool is stopping"
      : job.progress?.message || (job.status === "queued" ? "queued" : undefined);
  return {
    taskId: job.id,
    status,
    ttl: TASK_TTL_MS,
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
    // Structured as the job recorded it (an object result), not guessed from text that looks like one.
    const output = jobOutputValue(job);
    return { content: [{ type: "text", text: job.result ?? "" }], ...(typeof output === "object" ? { structuredContent: output } : {}) };
  }
  // The CLI's `jobs result -j` envelope: a cancelled job's partial result is its `output`.
  return { content: [{ type: "text", text: JSON.stringify(resultOf(job)) }], isError: true };
}
