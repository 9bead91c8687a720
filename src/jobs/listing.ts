import type { Job } from "./store.js";
import { type JobView, jobView } from "./view.js";

/**
 * A job of a listing (`jobs list --json`, MCP `list_jobs`) as JSON: `jobView`'s shape, told from the cut
 * texts a listing reads (`Job.listed`): arguments too long to list are `args_bytes` and `args_preview` (their
 * JSON's first characters) instead of `args`, and `result_bytes` is the whole result's size. `jobs show`
 * and `job_status` give a job whole.
 */
export type ListedJobView = Omit<JobView, "args"> & {
  /** The arguments, when their JSON was listed whole. */
  args?: unknown;
  /** Instead of `args`, for arguments too long to list: their JSON's UTF-8 bytes and its first characters. */
  args_bytes?: number;
  args_preview?: string;
};

export function listedJobView(job: Job): ListedJobView {
  const view: ListedJobView = jobView(job);
  const listed = job.listed;
  if (!listed) return view;
  if (Buffer.byteLength(job.argsJson) < listed.argsBytes) {
    delete view.args;
    view.args_bytes = listed.argsBytes;
    view.args_preview = job.argsJson;
  }
  if (job.result !== undefined && listed.resultBytes !== undefined && Buffer.byteLength(job.result) < listed.resultBytes) {
    view.result_bytes = listed.resultBytes;
    // jobView tells an object from its text, which is cut here: only the recorded flag can say.
    if (job.resultStructured !== undefined) view.result_structured = job.resultStructured;
    else delete view.result_structured;
  }
  return view;
}
