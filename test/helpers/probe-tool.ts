import { ToolBundler } from "../../src/bundling/bundler.js";
import type { CallRequest, ToolBundle } from "../../src/isolation/wire/messages.js";
import { makeDataDir } from "./data-dir.js";

/** A tool `probe` (one action, `probe_run`) bundled as the host bundles it, for tests that drive an `IsolateRunner` directly. */
export interface ProbeTool {
  bundle: ToolBundle;
  /** A call of `probe_run` as Anima `anima` (its own isolate: isolates are pooled per Anima). */
  request(anima: string, limits?: { timeoutMs?: number; maxResultBytes?: number }): CallRequest;
  cleanup(): void;
}

export async function buildProbeTool(source: string): Promise<ProbeTool> {
  const data = makeDataDir();
  const path = data.write("tools/probe.ts", source);
  const built = await new ToolBundler(`${data.dir}/cache`).build({ path, folder: `${data.dir}/tools`, displayName: "probe.ts" });
  if (!built.ok) {
    data.cleanup();
    throw new Error(built.error.message);
  }
  const bundle = built.bundle;
  return {
    bundle,
    request: (anima, limits = {}) => ({
      op: "call",
      bundle,
      context: { anima, animaDir: `/nowhere/${anima}`, tool: "probe" },
      entry: "call",
      schemaName: "probe_run",
      payloadJson: "{}",
      timeoutMs: limits.timeoutMs ?? 2_000,
      memoryLimitMb: 32,
      maxResultBytes: limits.maxResultBytes ?? 10_000,
      maxLogLines: 10,
      maxLogLineChars: 100,
    }),
    cleanup: () => data.cleanup(),
  };
}
