import type { SourceMaps } from "./source-maps.js";
import type { SandboxHandle } from "../isolation/executor.js";
import type { CallOutcome, CallRequest, DescribeOutcome, DescribeRequest, Executor } from "../isolation/wire/messages.js";

/**
 * Names the tool's own lines in the error of a tool that threw: `TypeError: … (in lib/parse.ts:7:3,
 * called from weather.ts:42:13)`. The message is what every caller sees of a failure (the CLI's line, the
 * `-j` envelope, MCP results, the audit record), so the lines go into it: after the tool's words, which
 * stay as they were (bounded by `MAX_TOOL_MESSAGE_CHARS`; the host's addition is bounded by
 * `MAX_NAMED_FRAMES` paths of at most 160 characters). "in", not "at": nothing in a message reads as a
 * stack frame (the host strips those from what a tool says).
 *
 * Invariants:
 *  - Mapping happens here, in the host, with the source map of the bundle the host itself sent
 *    (`request.bundle.hash`): the positions an outcome carries (`toolFrames`) are untrusted, and only
 *    those that map into a file of the tool's own folder are named (source-maps.ts). No host path, no
 *    frame of the prelude, nothing of the stack's text can reach the message.
 *  - Only a failure the tool caused itself (an `ExecutionError` whose fault is the tool's) gets lines:
 *    a denial, a limit or a stop is about something else.
 *  - Only on failure: a call that succeeds costs one property check. `toolFrames` never leaves here.
 */
export class ToolFrameExecutor implements Executor {
  constructor(
    private readonly inner: Executor,
    private readonly maps: Pick<SourceMaps, "locate">,
  ) {}

  describe(request: DescribeRequest): Promise<DescribeOutcome> {
    return this.inner.describe(request);
  }

  async call(request: CallRequest, signal?: AbortSignal): Promise<CallOutcome> {
    const outcome = await this.inner.call(request, signal);
    if (outcome.ok || outcome.toolFrames === undefined) return outcome;
    const { toolFrames, ...failure } = outcome;
    if (failure.error.type !== "ExecutionError" || failure.error.fault !== "tool") return failure;
    const named = await this.maps.locate(request.bundle.hash, toolFrames).catch((): string[] => []);
    if (named.length === 0) return failure;
    return { ...failure, error: { ...failure.error, message: withToolLines(failure.error.message, named) } };
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  stuckEntries(): number {
    return this.inner.stuckEntries();
  }
}

/** `handle` whose calls name the tool's lines in their errors (the composition root wraps every host's executor). */
export function withToolFrames(handle: SandboxHandle, maps: Pick<SourceMaps, "locate">): SandboxHandle {
  return { ...handle, executor: new ToolFrameExecutor(handle.executor, maps) };
}

/** `message (in A, called from B, C)`: where it was thrown, then its callers, innermost first. */
export function withToolLines(message: string, named: readonly string[]): string {
  const [thrownIn, ...callers] = named;
  const from = callers.length > 0 ? `, called from ${callers.join(", ")}` : "";
  return `${message} (in ${thrownIn}${from})`;
}
