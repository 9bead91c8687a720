import type { Task } from "@modelcontextprotocol/sdk/types.js";
import type { JobService } from "../jobs/service.js";
import { type Job, isTerminal } from "../jobs/store.js";
import { TASK_POLL_INTERVAL_MS, taskOf } from "./job-tasks.js";

/**
 * Task status notifications (`notifications/tasks/status`) for the tasks this MCP session created: their
 * jobs run in a worker, so the server looks at them every poll interval and tells the client when a
 * status or progress message changes, until each ends. A notification the client misses costs nothing:
 * `tasks/get` reads the job itself.
 */
export class TaskStatusWatch {
  private readonly watched = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly jobs: JobService,
    private readonly anima: string,
    private readonly notify: (task: Task) => Promise<void>,
  ) {}

  add(job: Job): void {
    this.watched.set(job.id, signature(taskOf(job)));
    this.timer ??= setInterval(() => void this.look(), TASK_POLL_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.watched.clear();
  }

  private async look(): Promise<void> {
    for (const [id, seen] of [...this.watched]) {
      const job = await this.jobs.get(this.anima, id).catch(() => undefined);
      if (!job) {
        this.watched.delete(id);
        continue;
      }
      const task = taskOf(job);
      if (signature(task) !== seen) {
        this.watched.set(id, signature(task));
        await this.notify(task).catch(() => {});
      }
      if (isTerminal(job.status)) this.watched.delete(id);
    }
    if (this.watched.size === 0) this.stop();
  }
}

function signature(task: Task): string {
  return `${task.status}\0${task.statusMessage ?? ""}`;
}

/** Starts a detached job worker unless one runs (as `submit` does); the job stays queued if none can start. */
export function startWorker(jobs: JobService): void {
  try {
    jobs.ensureWorker();
  } catch {
    // queued until "animaworks-tool serve" runs; tasks/get shows it as working ("queued")
  }
}
