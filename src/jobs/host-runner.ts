import { ByteLru } from "../byte-lru.js";
import { monotonicMs } from "../clock.js";
import { infoOfWire } from "../errors.js";
import type { PreparedCall, PreparedCallRunner } from "../prepared-calls.js";
import type { JobRunner } from "./worker.js";
import type { Job } from "./store.js";

/** Characters of tool code a worker keeps in memory, most recently used kept (the sandbox process's bound too). */
const MAX_CACHED_BUNDLE_CHARS = 64 * 2 ** 20;

/**
 * The worker's `runJob` for real jobs: the stored bundle back into a `PreparedCall`, run by the host in
 * the sandbox with the job's hooks (progress, isCancelled).
 *
 * It times nothing itself. The worker's run signal is the call's signal: the tool sees a stop request
 * through `isCancelled()` at once, and its call is stopped when the signal aborts (the job's deadline, or
 * the end of the grace after a cancel or a shutdown). The call's own timeout is the time left until that
 * same deadline, so the isolate's limit and the signal name one instant. The worker records the reason.
 */
export function hostJobRunner(calls: PreparedCallRunner, getBundle: (hash: string) => Promise<string | undefined>): JobRunner {
  // Content-addressed: an entry is never stale.
  const bundleCode = new ByteLru<string>(MAX_CACHED_BUNDLE_CHARS);
  const bundle = async (hash: string): Promise<string | undefined> => {
    const cached = bundleCode.get(hash);
    if (cached !== undefined) return cached;
    const code = await getBundle(hash);
    if (code !== undefined) bundleCode.set(hash, code, code.length);
    return code;
  };

  return async (job: Job, context) => {
    const code = await bundle(job.bundleHash);
    if (code === undefined) {
      return {
        ok: false,
        error: {
          type: "LoadError",
          fault: "host",
          message: `the tool version job ${job.id} was submitted with (bundle ${job.bundleHash.slice(0, 12)}) is no longer stored`,
        },
      };
    }
    const prepared: PreparedCall = {
      anima: job.anima,
      tool: job.tool,
      action: job.action,
      schemaName: job.schemaName,
      argsJson: job.argsJson,
      bundle: { hash: job.bundleHash, code, displayName: `${job.tool} (job ${job.id})` },
      // The job's own deadline, not the host's cap for direct calls (maxCallTimeoutMs): background jobs are
      // the long-running ones.
      timeoutMs: Math.max(1, Math.ceil(context.deadline - monotonicMs())),
    };
    const result = await calls.runPrepared(prepared, {
      signal: context.signal,
      job: { id: job.id, reportProgress: context.reportProgress, cancelled: () => context.stopRequested() !== undefined },
      // Whether an object came back is part of the result: `jobs result -j` and MCP give it as a direct call does.
      structured: true,
    });
    // A run asked to stop ends that way, even when the tool wrapped up and returned within the grace; what
    // it returned then is its partial result (the worker keeps it for a cancelled job).
    const stopped = context.stopRequested();
    if (result.status !== "ok") return { ok: false, error: stopped ? stopped.toInfo() : infoOfWire(result) };
    // An object result that was cut for size is text, as for a direct call (cli/output.ts).
    const value = { result: result.output, structured: result.structured !== undefined && !result.truncated };
    return stopped ? { ok: false, error: stopped.toInfo(), partial: value } : { ok: true, ...value };
  };
}
