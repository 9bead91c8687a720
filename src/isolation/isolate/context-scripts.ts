import type ivm from "isolated-vm";
import type { ErrorInfo } from "../../errors.js";
import { ByteLru } from "../../byte-lru.js";
import { boundToolMessage } from "../wire/tool-text.js";
import type { ToolBundle } from "../wire/messages.js";
import { type CallGuard, remainingMs } from "./call-guard.js";
import { classifyIvmError, ivmErrorInfo, stripHostDetails } from "./ivm-errors.js";
import type { PooledIsolate } from "./pooled-isolate.js";
import { readPrelude } from "./prelude-source.js";

/**
 * The scripts a new isolate's context runs before it serves a call, for the isolate runner
 * (isolate-runner.ts): the prelude (only in a context not made from the startup snapshot, which already
 * holds it) and the tool's bundle, each compiled with a V8 code cache so that later isolates skip parsing
 * it; and how a bundle that fails to load reads.
 *
 * Invariants:
 *  - Types only from isolated-vm: the scripts are compiled and run through the isolate and context the
 *    runner made; nothing here constructs an isolated-vm object.
 *  - Bundle caches are keyed by bundle hash and bounded by `TOOL_CODE_CACHE_BYTES` (least recently used
 *    dropped first); a cache V8 rejected is dropped, and the next compile makes a new one.
 *  - Every failure to load a bundle leaves as a `SetupError` carrying what the caller sees: a bundle that
 *    does not compile or whose top level throws is the tool's `LoadError` (stack frames and host paths
 *    removed, the message bounded); the deadline, the memory limit or a host stop reached while loading
 *    is what it would be during a call, its message prefixed `while loading:`.
 */

/** Bytes of V8 code cache kept for bundles. */
const TOOL_CODE_CACHE_BYTES = 32 * 2 ** 20;

/** The prelude's file name in stack traces and V8's caches. */
export const PRELUDE_FILENAME = "animaworks:prelude.js";

/** A failure while setting an isolate up, already in the words the caller sees. */
export class SetupError extends Error {
  constructor(readonly info: ErrorInfo) {
    super(info.message);
  }
}

export class ContextScripts {
  /** The prelude script (prelude-source.ts), read once. */
  readonly prelude = readPrelude();
  /** V8 code cache for the prelude, so later isolates skip parsing it. */
  private preludeCache: ivm.ExternalCopy<ArrayBuffer> | undefined;
  /** V8 code caches of bundles by hash. */
  private readonly toolCodeCache = new ByteLru<ivm.ExternalCopy<ArrayBuffer>>(TOOL_CODE_CACHE_BYTES);

  /** Runs the prelude script in a fresh context (isolates made without the snapshot). */
  runPrelude(isolate: ivm.Isolate, context: ivm.Context): void {
    const script = isolate.compileScriptSync(this.prelude, {
      filename: PRELUDE_FILENAME,
      ...(this.preludeCache ? { cachedData: this.preludeCache } : { produceCachedData: true }),
    });
    const produced = (script as ivm.Script & { cachedData?: ivm.ExternalCopy<ArrayBuffer> }).cachedData;
    if (!this.preludeCache && produced) this.preludeCache = produced;
    script.runSync(context, { timeout: 1_000 });
  }

  /**
   * Compiles `bundle` and runs its top level in `context` of `pooled`'s isolate, within what is left until
   * `deadline`. Throws a `SetupError` if it fails (see the invariants); `guard` and `pooled` say whether the
   * host stopped it or the memory limit did.
   */
  async loadTool(
    pooled: PooledIsolate,
    context: ivm.Context,
    bundle: ToolBundle,
    limits: { timeoutMs: number; memoryLimitMb: number },
    deadline: number,
    guard: CallGuard,
  ): Promise<void> {
    const { isolate } = pooled;
    let toolScript: ivm.Script;
    try {
      const cachedData = this.toolCodeCache.get(bundle.hash);
      // Kept with the isolate: a later call of the same bundle may carry another display name.
      pooled.scriptFilename = `tool:${bundle.displayName}`;
      toolScript = await isolate.compileScript(bundle.code, {
        filename: pooled.scriptFilename,
        ...(cachedData ? { cachedData } : { produceCachedData: true }),
      });
      const compiled = toolScript as ivm.Script & { cachedData?: ivm.ExternalCopy<ArrayBuffer>; cachedDataRejected?: boolean };
      if (compiled.cachedDataRejected) this.toolCodeCache.delete(bundle.hash);
      else if (!cachedData && compiled.cachedData) this.toolCodeCache.set(bundle.hash, compiled.cachedData, compiled.cachedData.copy().byteLength);
    } catch (error) {
      throw new SetupError({ type: "LoadError", fault: "tool", message: `the tool does not compile: ${toolMessage(error)}` });
    }
    try {
      await toolScript.run(context, { timeout: remainingMs(deadline) });
    } catch (error) {
      const kind = classifyIvmError(error);
      if (kind === "Timeout" || kind === "MemoryLimit" || guard.stopReason || pooled.hitMemoryLimit) {
        const info = ivmErrorInfo(error, limits, guard.stopReason ?? (pooled.hitMemoryLimit ? "MemoryLimit" : undefined));
        throw new SetupError({ ...info, message: `while loading: ${info.message}` });
      }
      throw new SetupError({ type: "LoadError", fault: "tool", message: `the tool's top-level code threw: ${toolMessage(error)}` });
    }
  }
}

/** A load failure as a `describe` reports it: always a `LoadError`, whatever stopped the load. */
export function asLoadError(info: ErrorInfo): ErrorInfo {
  if (info.type === "LoadError") return info;
  return { type: "LoadError", fault: "tool", message: `loading the tool failed: ${info.message}`, ...(info.hint ? { hint: info.hint } : {}) };
}

/** What the tool's code said, bounded before and after the host's details are stripped. */
function toolMessage(error: unknown): string {
  return boundToolMessage(stripHostDetails(boundToolMessage(error instanceof Error ? error.message : String(error))));
}
