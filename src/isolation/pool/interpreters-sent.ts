import type { SandboxRequest } from "../wire/messages.js";
import { isPythonBundle } from "../wire/tool-bundle.js";
import { DESCRIBED_KEPT_MS } from "../isolate/python-spares.js";

/**
 * What one sandbox process (one incarnation of a slot) was sent of Python tools, from the host's own
 * record: whether a request finds an interpreter ready there, or must boot one first (and may then get
 * its Anima's boot allowance: scheduling/boot-allowance.ts).
 *
 * Invariants:
 *  - A process sent a Python call at a memory limit holds an interpreter for the next request at that
 *    limit: the call's own warm isolate, and the spare it keeps after making a Python isolate for a call
 *    (isolate/python-spares.ts; unless spares are off). A describe takes that spare too.
 *  - A describe leaves its isolate for that tool's first call, for `DESCRIBED_KEPT_MS`.
 *  - Only what the host sent counts: nothing the process says.
 */
export class InterpretersSent {
  /** Memory limits at which a Python call was sent. */
  private readonly called = new Set<number>();
  /** Python calls sent, by bundle hash and memory limit (what the call's warm isolate serves without spares). */
  private readonly calledTools = new Set<string>();
  /** When each Python tool (bundle hash, memory limit) was last described here. */
  private readonly described = new Map<string, number>();

  /** @param spares whether the process keeps a spare interpreter (`PythonInterpreterSettings.spare`) */
  constructor(private readonly spares: boolean) {}

  /** Notes `request`, sent now: true when it is a Python tool's that must boot an interpreter there first. */
  needsBoot(request: SandboxRequest, now: number): boolean {
    if (!isPythonBundle(request.bundle.code)) return false;
    const limit = request.memoryLimitMb;
    const tool = `${request.bundle.hash}\0${limit}`;
    const spareThere = this.spares && this.called.has(limit);
    if (request.op === "describe") {
      this.described.set(tool, now);
      return !spareThere;
    }
    const describedAt = this.described.get(tool);
    const ready = spareThere || this.calledTools.has(tool) || (describedAt !== undefined && now - describedAt < DESCRIBED_KEPT_MS);
    this.called.add(limit);
    this.calledTools.add(tool);
    return !ready;
  }
}
