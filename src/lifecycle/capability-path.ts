import type { ErrorInfo } from "../errors.js";
import type { ToolHost } from "../host-api.js";

/**
 * Each host's capability path, registered by the composition root for the management service
 * (management.ts): what `read_memory_file` reads through. A module of its own, importing nothing, so
 * that wiring a host loads none of the lifecycle code.
 */

/** The host's capability path (its CapabilityService's `invoke`): runs capability `name` as a call of `context.tool`. */
export type CapabilityPath = (
  context: { anima: string; animaDir: string; tool: string },
  name: string,
  argsJson: string,
) => Promise<{ ok: true; value: unknown } | { ok: false; error: ErrorInfo }>;

const paths = new WeakMap<ToolHost, CapabilityPath>();

/** For the composition root only. */
export function provideCapabilityPath(host: ToolHost, path: CapabilityPath): void {
  paths.set(host, path);
}

export function capabilityPathOf(host: ToolHost): CapabilityPath | undefined {
  return paths.get(host);
}
