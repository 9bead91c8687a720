import { describe, expect, it } from "vitest";
import { InterpretersSent } from "../../../src/isolation/pool/interpreters-sent.js";
import { DESCRIBED_KEPT_MS } from "../../../src/isolation/isolate/python-spares.js";
import type { SandboxRequest } from "../../../src/isolation/wire/messages.js";
import { PYTHON_BUNDLE_MARKER } from "../../../src/isolation/wire/tool-bundle.js";

const python = (hash: string) => ({ hash, code: `${PYTHON_BUNDLE_MARKER}print(1)` });
const call = (hash: string, memoryLimitMb = 64, code = python(hash).code) =>
  ({ op: "call", bundle: { hash, code }, memoryLimitMb }) as unknown as SandboxRequest;
const describeOf = (hash: string, memoryLimitMb = 64) =>
  ({ op: "describe", bundle: python(hash), memoryLimitMb, timeoutMs: 1_000, owner: "eve" }) as unknown as SandboxRequest;

/**
 * The host's record of what a sandbox process was sent of Python tools (interpreters-sent.ts): a request
 * that finds an interpreter there gets no boot allowance (scheduling/boot-allowance.ts).
 */
describe("interpreters sent", () => {
  it("python_first_call_grace: after one Python call, the next tool's first call finds the process's spare and needs no boot", () => {
    const sent = new InterpretersSent(true);
    expect(sent.needsBoot(call("a"), 0)).toBe(true);
    expect(sent.needsBoot(call("b"), 10)).toBe(false);
    expect(sent.needsBoot(call("a"), 20)).toBe(false);
    expect(sent.needsBoot(describeOf("c"), 30)).toBe(false);
    // Another memory limit has no spare of its own yet.
    expect(sent.needsBoot(call("a", 128), 40)).toBe(true);
  });

  it("without spares, only the tool's own warm isolate, or its describe's, is an interpreter for it", () => {
    const sent = new InterpretersSent(false);
    expect(sent.needsBoot(call("a"), 0)).toBe(true);
    expect(sent.needsBoot(call("a"), 1)).toBe(false);
    expect(sent.needsBoot(call("b"), 2)).toBe(true);
    expect(sent.needsBoot(describeOf("c"), 3)).toBe(true);
    expect(sent.needsBoot(call("c"), 4)).toBe(false); // takes the described isolate
    expect(sent.needsBoot(describeOf("d"), 5)).toBe(true);
    expect(sent.needsBoot(call("d"), 5 + DESCRIBED_KEPT_MS)).toBe(true); // dropped by then
  });

  it("a JavaScript tool's request never boots an interpreter", () => {
    expect(new InterpretersSent(true).needsBoot(call("js", 64, '"use strict";'), 0)).toBe(false);
  });
});
