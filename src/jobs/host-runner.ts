import { ToolHostError } from "../errors.js";
import type { PreparedCall, ToolHost } from "../host.js";
import type { JobRunner } from "./scheduler.js";
import type { Job } from "./store.js";

/** Tool versions a worker keeps in memory (each is one bundle's code). */
const MAX_CACHED_BUNDLES = 64;

/**
 * The scheduler's `runJob` for real jobs: the stored bundle back into a `PreparedCall`, run by the host in
 * the sandbox with the job's hooks (progress, isCancelled).
 *
 * On abort (cancel, timeout, shutdown) the tool first sees it through `isCancelled()` and may wrap up for
 * `cancelGraceMs`; then its isolate is stopped by force. The scheduler records the abort's reason.
 */
export function hostJobRunner(host: ToolHost, getBundle: (hash: string) => Promise<string | undefined>, cancelGraceMs: number): JobRunner {
  // Content-addressed: an entry is never stale. Most recently used last.
  const bundleCode = new Map<string, string>();
  const bundle = async (hash: string): Promise<string | undefined> => {
    const code = bundleCode.get(hash) ?? (await getBundle(hash));
    if (code === undefined) return undefined;
    bundleCode.delete(hash);
    bundleCode.set(hash, code);
    if (bundleCode.size > MAX_CACHED_BUNDLES) bundleCode.delete(bundleCode.keys().next().value as string);
    return code;
  };

  return async (job: Job, context) => {
    const code = await bundle(job.bundleHash);
    if (code === undefined) {
      return { ok: false, error: { type: "LoadError", message: `the tool version job ${job.id} was submitted with (bundle ${job.bundleHash.slice(0, 12)}) is no longer stored` } };
    }
    const prepared: PreparedCall = {
      anima: job.anima,
      tool: job.tool,
      action: job.action,
      schemaName: job.schemaName,
      argsJson: job.argsJson,
      bundle: { hash: job.bundleHash, code, displayName: `${job.tool} (job ${job.id})` },
      // The job's own timeout, not the host's cap for direct calls (maxCallTimeoutMs): background jobs are
      // the long-running ones. The scheduler enforces the same deadline from outside.
      timeoutMs: job.timeoutMs,
    };
    const force = new AbortController();
    const onAbort = () => {
      const timer = setTimeout(() => force.abort(), cancelGraceMs);
      force.signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
    };
    if (context.signal.aborted) onAbort();
    else context.signal.addEventListener("abort", onAbort, { once: true });
    const result = await host
      .runPrepared(prepared, {
        signal: force.signal,
        job: { id: job.id, reportProgress: context.reportProgress, cancelled: () => context.signal.aborted },
      })
      .finally(() => {
        context.signal.removeEventListener("abort", onAbort);
        force.abort();
      });
    if (context.signal.aborted) return { ok: false, error: abortError(context.signal) };
    if (result.status === "ok") return { ok: true, result: result.output };
    const message = result.hint ? `${result.message} (${result.hint})` : result.message;
    return { ok: false, error: { type: result.error_type, message } };
  };
}

/** Why an aborted run ended, as the scheduler said when it aborted it. */
function abortError(signal: AbortSignal): { type: ToolHostError["type"]; message: string } {
  const reason: unknown = signal.reason;
  if (reason instanceof ToolHostError) return { type: reason.type, message: reason.message };
  return { type: "ExecutionError", message: reason instanceof Error ? reason.message : "job aborted" };
}
