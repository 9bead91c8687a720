import { ToolHostError } from "../errors.js";
import type { CallContext } from "../isolation/wire/messages.js";

/**
 * What a tool running as a background job can tell and ask its worker: `progress(fraction, message)` and
 * `isCancelled()` from `@animaworks/tool`. The worker registers each job run here for its duration; the
 * capability service answers the tool's requests from it.
 *
 * Invariants:
 *  - A request reaches a job only through the call context the host made for that run (its `jobId` and its
 *    Anima must both match): a tool cannot report progress for, or ask about, any other job.
 *  - Outside a job (a direct call), `progress` does nothing and `isCancelled` is false, so one tool body
 *    works both ways.
 */
export interface JobCallHooks {
  /** `fraction` is checked (0 to 1) and `message` cut to `MAX_PROGRESS_MESSAGE_CHARS` before this is called. */
  reportProgress(fraction: number, message: string): void;
  /** True once the job was cancelled, timed out, or its worker is stopping: the tool should wrap up. */
  cancelled(): boolean;
}

/** Longest progress message kept, in characters. */
export const MAX_PROGRESS_MESSAGE_CHARS = 500;

export class JobCalls {
  private readonly runs = new Map<string, { anima: string; hooks: JobCallHooks }>();

  /** Registers a running job; the returned function unregisters it. */
  register(jobId: string, anima: string, hooks: JobCallHooks): () => void {
    const entry = { anima, hooks };
    this.runs.set(jobId, entry);
    return () => {
      if (this.runs.get(jobId) === entry) this.runs.delete(jobId);
    };
  }

  /** Runs `job.progress` / `job.cancelled` for the call of `context`. */
  invoke(context: CallContext, operation: string, args: unknown[]): boolean | null {
    const run = context.jobId === undefined ? undefined : this.runs.get(context.jobId);
    const hooks = run && run.anima === context.anima ? run.hooks : undefined;
    if (operation === "cancelled") return hooks?.cancelled() ?? false;
    if (operation !== "progress") throw new ToolHostError("InvalidArguments", `unknown capability job.${operation}`);
    const [fraction, message] = args;
    if (typeof fraction !== "number" || !Number.isFinite(fraction) || fraction < 0 || fraction > 1) {
      throw new ToolHostError("InvalidArguments", "progress: fraction must be a number from 0 to 1", 'e.g. progress(0.5, "half done")');
    }
    if (message !== undefined && message !== null && typeof message !== "string") {
      throw new ToolHostError("InvalidArguments", "progress: message must be a string");
    }
    hooks?.reportProgress(fraction, (message ?? "").slice(0, MAX_PROGRESS_MESSAGE_CHARS));
    return null;
  }
}
