import type { CallRequest } from "../../src/isolation/wire/messages.js";

/**
 * Requests straight to a sandbox pool (no host around it), for tests that play a compromised or faulty
 * sandbox process: the bundle `waiting` answers `waiting_quick` with "done" and never answers anything
 * else, so a call stays in flight for as long as a test needs.
 */
export const WAITING_BUNDLE = {
  hash: "waiting-tool",
  displayName: "personal/waiting.js",
  code: `__awRegister({ dispatch: (name) => name === "waiting_quick" ? "done" : new Promise(() => {}) });`,
};

export function waitingRequest(anima: string, schemaName: string, args: Record<string, unknown> = {}): CallRequest {
  return {
    op: "call",
    bundle: WAITING_BUNDLE,
    context: { anima, animaDir: `/nonexistent/animas/${anima}`, tool: "waiting" },
    entry: "call",
    schemaName,
    payloadJson: JSON.stringify(args),
    timeoutMs: 20_000,
    memoryLimitMb: 32,
    maxResultBytes: 10_000,
    maxLogLines: 10,
    maxLogLineChars: 100,
  };
}
