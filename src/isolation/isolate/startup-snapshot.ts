import type ivm from "isolated-vm";
import { type ContextScripts, PRELUDE_FILENAME } from "./context-scripts.js";
import { SNAPSHOT_AFTER_ISOLATES } from "./isolate-runner-options.js";
import { type Bridge, bindPrelude } from "./pooled-isolate.js";
import { SHAPE_PROBE } from "./prelude-source.js";

/** The isolated-vm constructors the snapshot needs (the runner's: this module imports isolated-vm's types only). */
export interface SnapshotTools {
  createSnapshot(scripts: Array<{ code: string; filename: string }>): ivm.ExternalCopy<ArrayBuffer>;
  newIsolate(options: ivm.IsolateOptions): ivm.Isolate;
  noopCallback(): ivm.Callback;
}

/**
 * The startup snapshot holding the installed prelude, made on the `SNAPSHOT_AFTER_ISOLATES`-th isolate
 * (making it costs ≈ 10 ms, more than a one-shot CLI call would save; later isolates save ≈ 0.4 ms
 * each). It is used only if a context made from it, once bound, has the same shape as one that ran the
 * script (`SHAPE_PROBE`); otherwise, or if V8 cannot make it, isolates run the script.
 */
export class StartupSnapshot {
  /** Undefined until made, false when it is off, could not be made or failed its check. */
  private snapshot: ivm.ExternalCopy<ArrayBuffer> | false | undefined;
  private isolatesBuilt = 0;

  constructor(
    private readonly tools: SnapshotTools,
    private readonly scripts: ContextScripts,
    enabled: boolean,
  ) {
    if (!enabled) this.snapshot = false;
  }

  /** True once isolates are made from it. */
  get inUse(): boolean {
    return this.snapshot !== undefined && this.snapshot !== false;
  }

  /** The snapshot a new isolate is made from, if any; counts the isolate. */
  forNextIsolate(): ivm.ExternalCopy<ArrayBuffer> | undefined {
    if (this.snapshot !== undefined || ++this.isolatesBuilt < SNAPSHOT_AFTER_ISOLATES) return this.snapshot || undefined;
    this.snapshot = false;
    try {
      const snapshot = this.tools.createSnapshot([{ code: this.scripts.prelude, filename: PRELUDE_FILENAME }]);
      if (this.shapeOf(undefined) === this.shapeOf(snapshot)) this.snapshot = snapshot;
    } catch {
      // isolates run the script
    }
    return this.snapshot || undefined;
  }

  /** `SHAPE_PROBE` of a bound context made from `snapshot`, or by running the script without one. */
  private shapeOf(snapshot: ivm.ExternalCopy<ArrayBuffer> | undefined): string {
    const isolate = this.tools.newIsolate({ memoryLimit: 16, ...(snapshot ? { snapshot } : {}) });
    try {
      const context = isolate.createContextSync();
      if (!snapshot) this.scripts.runPrelude(isolate, context);
      const noop = () => this.tools.noopCallback();
      bindPrelude(context, { log: noop(), setTimer: noop(), clearTimer: noop(), stop: noop(), capability: noop() } satisfies Bridge).release();
      return context.evalSync(SHAPE_PROBE, { timeout: 1_000 }) as string;
    } finally {
      isolate.dispose();
    }
  }
}
