import { type ChildProcess, spawn } from "node:child_process";
import type { Socket } from "node:net";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import ivm from "isolated-vm";
import { afterEach, describe, expect, it } from "vitest";
import { BIND_GLOBAL, BRIDGE_METHODS, CAPABILITY_NAMES, MAX_TOOL_MESSAGE_CHARS } from "../../src/contract/isolate.js";
import { COLLECT_GARBAGE_GLOBAL } from "../../src/contract/tool-globals.js";
import { decodeCallEnvelope, decodeDescribeEnvelope, parseCallEnvelope, parseDescribeEnvelope } from "../../src/isolation/isolate/envelope.js";
import { type Bridge, bindPrelude } from "../../src/isolation/isolate/pooled-isolate.js";
import { inlineContract, readPrelude } from "../../src/isolation/isolate/prelude-source.js";
import type { FromSandbox } from "../../src/isolation/wire/messages.js";
import { CHANNEL_FD, FrameDecoder, MAX_FRAME_FROM_SANDBOX_BYTES, encodeFrame } from "../../src/isolation/wire/frames.js";
import { REPO_ROOT } from "../helpers/tools.js";

/**
 * The host ↔ isolate contract (src/contract/isolate.ts, and tool-globals.ts beside it) is declared once, type-checked under the host's and
 * the isolate's tsconfig, whose constants the prelude script inlines. These tests pin what the type
 * checker cannot see: that the module stays inlinable, that the prelude built from it binds and hands
 * out the declared entry object, and the decoders of what crosses.
 */
describe("the isolate contract", () => {
  it.each(["isolate.ts", "tool-globals.ts"])("%s holds types and exported constants only, and imports nothing", (file) => {
    const source = readFileSync(join(REPO_ROOT, "src", "contract", file), "utf8");
    expect(source).not.toMatch(/^\s*import\b/m);
    const exports = [...source.matchAll(/^export (\w+)/gm)].map((m) => m[1]);
    expect(exports.length).toBeGreaterThan(0);
    expect(exports.every((kind) => ["type", "interface", "const"].includes(kind!))).toBe(true);
  });

  it("is inlined as constants of the prelude's scope; anything else is refused", () => {
    expect(inlineContract('export const A = 1;\nexport const B = ["x"];\n')).toBe('const A = 1;\nconst B = ["x"];\n');
    expect(() => inlineContract('import { x } from "./x.js";\nexport const A = x;\n')).toThrow(/only types and exported constants/);
    expect(() => inlineContract("export function f() {}\n")).toThrow(/only types and exported constants/);
    expect(() => inlineContract("const a = 1;\nexport { a };\n")).toThrow(/only types and exported constants/);
  });

  it("the prelude script holds the contract's constants and the parts, as one strict script", () => {
    const prelude = readPrelude();
    expect(prelude.startsWith('(function () {\n"use strict";\n')).toBe(true);
    expect(prelude).toContain(`const BIND_GLOBAL = "${BIND_GLOBAL}";`);
    expect(prelude).toContain(`const COLLECT_GARBAGE_GLOBAL = "${COLLECT_GARBAGE_GLOBAL}";`);
    expect(prelude).toMatch(/^const MAX_TOOL_MESSAGE_CHARS = 4_?000;$/m);
    expect(MAX_TOOL_MESSAGE_CHARS).toBe(4_000);
    expect(prelude).not.toMatch(/^\s*(?:import|export)\b/m);
    // The parts are scripts: nothing in them is a module statement or a require.
    for (const part of readdirSync(join(REPO_ROOT, "dist", "sandbox"))) {
      expect(readFileSync(join(REPO_ROOT, "dist", "sandbox", part), "utf8"), part).not.toMatch(/^\s*(?:import|export)\b|\brequire\(/m);
    }
  });

  it("the prelude script is one-byte text without comments: each isolate holds its source (≈ 40 KB, not 130)", () => {
    // V8 keeps a script's source in every isolate that runs it (in its heap when made from the startup
    // snapshot): comments and a single character above U+00FF (which makes V8 store two bytes per
    // character) cost ≈ 90 KB per warm isolate. Non-Latin-1 text in the parts is written as escapes.
    const prelude = readPrelude();
    expect([...prelude].filter((char) => char.charCodeAt(0) > 0xff)).toEqual([]);
    expect(prelude).not.toMatch(/^\s*(?:\/\/|\/\*)/m);
    expect(prelude.length).toBeLessThan(60_000);
  });

  it("binds once, leaves nothing on the global, and hands out the entry object the contract declares", async () => {
    const isolate = new ivm.Isolate({ memoryLimit: 16 });
    try {
      const context = isolate.createContextSync();
      const before = context.evalSync("JSON.stringify(Reflect.ownKeys(globalThis).map(String).sort())") as string;
      isolate.compileScriptSync(readPrelude()).runSync(context);
      expect(context.evalSync(`typeof globalThis.${BIND_GLOBAL}`)).toBe("function");
      const calls: string[] = [];
      const bridge = Object.fromEntries(
        BRIDGE_METHODS.map((method) => [method, new ivm.Callback((...args: unknown[]) => void calls.push(`${method}(${args.join(",")})`), { ignored: true })]),
      ) as Bridge;
      const entry = bindPrelude(context, bridge);
      expect(context.evalSync(`typeof globalThis.${BIND_GLOBAL}`)).toBe("undefined");
      expect(context.evalSync("typeof globalThis.__awHost")).toBe("undefined");
      const after = JSON.parse(context.evalSync("JSON.stringify(Reflect.ownKeys(globalThis).map(String).sort())") as string) as string[];
      // What the prelude adds for tools, and nothing of the bridge, the entry object or the contract.
      expect(after.filter((key) => !(JSON.parse(before) as string[]).includes(key)).sort()).toEqual([
        "__animaworksTool",
        "__awRegister",
        "clearTimeout",
        "setTimeout",
      ]);
      for (const name of ["BIND_GLOBAL", "CAPABILITY_NAMES", "MAX_TIMERS_PER_CALL", "installPrelude", "exposeBinder"]) {
        expect(context.evalSync(`typeof ${name}`), name).toBe("undefined");
      }
      expect(entry.typeof).toBe("object");
      const keys = JSON.parse(
        context.evalClosureSync("return JSON.stringify(Object.keys($0).sort())", [entry.derefInto()], { result: { copy: true } }) as string,
      ) as string[];
      expect(keys).toEqual(["call", "compact", "describe", "fireTimer", "receiveText", "settleCapabilities"]);
      // A tool's log line and a capability request reach the host's bridge with the contract's arguments.
      isolate
        .compileScriptSync(`__awRegister({ dispatch: () => { __animaworksTool.logger.info("hello"); __animaworksTool.fs.stat("x"); return "ok"; } })`)
        .runSync(context);
      const text = await entry
        .getSync("call", { reference: true })
        .apply(undefined, ["call", "t_run", "{}", 1_000, 10, 100], { result: { promise: true, copy: true } });
      expect(JSON.parse(text)).toEqual({ ok: true, kind: "text", text: "ok", bytes: 2, truncated: false });
      await new Promise((resolve) => setImmediate(resolve));
      expect(calls).toEqual(["log(info,hello)", 'capability(1,fs.stat,["x"])']);
      expect(CAPABILITY_NAMES).toContain("fs.stat");
      entry.release();
    } finally {
      isolate.dispose();
    }
  });
});

describe("envelopes: the decoder of the contract's types", () => {
  const limits = { maxResultBytes: 100, timeoutMs: 1_000, memoryLimitMb: 32 };

  it("keeps only the declared fields of a call envelope, and measures a result without a byte count", () => {
    expect(decodeCallEnvelope('{"ok":true,"kind":"json","text":"[1]","bytes":3,"truncated":false,"extra":1}', 100)).toEqual({
      ok: true,
      kind: "json",
      text: "[1]",
      bytes: 3,
      truncated: false,
      recycle: false,
    });
    expect(decodeCallEnvelope('{"ok":true,"kind":"text","text":"é"}', 100)).toEqual({
      ok: true,
      kind: "text",
      text: "é",
      bytes: 2,
      truncated: false,
      recycle: false,
    });
    expect(decodeCallEnvelope('{"ok":true,"kind":"none","recycle":true}', 100)).toEqual({ ok: true, kind: "none", recycle: true });
    expect(decodeCallEnvelope('{"ok":false}', 100)).toEqual({ ok: false, errorType: "ExecutionError", message: "the tool failed", recycle: false });
  });

  it("measures a result's size itself: a cut one is cut to the byte, its original size believed only within bounds", () => {
    const cut = JSON.stringify({ ok: true, kind: "text", text: "é".repeat(100), bytes: 1e308, truncated: true });
    expect(decodeCallEnvelope(cut, 100)).toEqual({ ok: true, kind: "text", text: "é".repeat(50), bytes: 200, truncated: true, recycle: false });
    const claimed = JSON.stringify({ ok: true, kind: "text", text: "ok", bytes: 99, truncated: false });
    expect(decodeCallEnvelope(claimed, 100)).toMatchObject({ text: "ok", bytes: 2, truncated: false });
  });

  it.each([
    ["not JSON", "{"],
    ["not an envelope", '{"kind":"text","text":"x"}'],
    ["an unknown kind", '{"ok":true,"kind":"html","text":"x"}'],
    ["a text that is not a string", '{"ok":true,"kind":"text","text":1}'],
    ["longer than any envelope of the call's result size", JSON.stringify({ ok: true, kind: "text", text: "x".repeat(5_000) })],
    // What the prelude never frames (result-bounds.ts): the host would take it for its process's violation.
    ["a text longer than the call's result size", JSON.stringify({ ok: true, kind: "text", text: "x".repeat(101), bytes: 101, truncated: true })],
    ["a text over the call's result size in bytes, said not to be cut", JSON.stringify({ ok: true, kind: "text", text: "é".repeat(60), truncated: false })],
    ["not text", 42],
  ])("refuses %s", (_label, text) => {
    expect(decodeCallEnvelope(text, 100)).toBeUndefined();
    expect(parseCallEnvelope(text, limits)).toEqual({
      ok: false,
      error: { type: "ExecutionError", fault: "tool", message: "the tool's result could not be read" },
      recycle: true,
    });
  });

  it("passes through only the failure types a tool may carry out", () => {
    expect(parseCallEnvelope('{"ok":false,"errorType":"PermissionDenied","message":"no"}', limits)).toEqual({
      ok: false,
      error: { type: "PermissionDenied", fault: "tool", message: "no" },
      recycle: false,
    });
    expect(parseCallEnvelope('{"ok":false,"errorType":"Timeout","message":"fake"}', limits)).toEqual({
      ok: false,
      error: { type: "ExecutionError", fault: "tool", message: "fake" },
      recycle: false,
    });
    // A memory limit is the host's finding, never an envelope's claim (forged_memory_limit).
    expect(parseCallEnvelope('{"ok":false,"errorType":"MemoryLimit","message":"x"}', limits)).toEqual({
      ok: false,
      error: { type: "ExecutionError", fault: "tool", message: "x" },
      recycle: false,
    });
    expect(parseCallEnvelope('{"ok":false,"errorType":"ExecutionError","message":""}', limits)).toMatchObject({
      error: { message: "the tool failed without a message" },
    });
  });

  it("decodes a describe envelope; its failures are load errors", () => {
    expect(decodeDescribeEnvelope('{"ok":true,"exports":{"dispatch":"function","n":1},"schemas":[]}')).toEqual({
      ok: true,
      exports: { dispatch: "function" },
      schemas: [],
      profile: null,
    });
    expect(parseDescribeEnvelope('{"ok":false,"errorType":"MemoryLimit","message":"boom\\n    at x (y:1:2)"}')).toEqual({
      ok: false,
      error: { type: "LoadError", fault: "tool", message: "boom" },
    });
    expect(parseDescribeEnvelope('{"ok":true}')).toEqual({
      ok: false,
      error: { type: "LoadError", fault: "tool", message: "the tool's description could not be read" },
    });
  });
});

describe("a sandbox process and messages from the host that are not part of the protocol", () => {
  let child: ChildProcess | undefined;
  afterEach(() => {
    child?.kill("SIGKILL");
    child = undefined;
  });

  it("reports and drops them, answers a request it could not read at once, and keeps serving", async () => {
    child = spawn(process.execPath, ["--no-node-snapshot", join(REPO_ROOT, "dist", "src", "isolation", "child", "main.js")], {
      env: {},
      stdio: ["ignore", "ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const received: FromSandbox[] = [];
    const channel = (child.stdio as unknown[])[CHANNEL_FD] as Socket;
    const decoder = new FrameDecoder(MAX_FRAME_FROM_SANDBOX_BYTES);
    channel.on("data", (chunk: Buffer) => received.push(...(decoder.push(chunk) as FromSandbox[])));
    const send = (message: unknown) => channel.write(encodeFrame(message));
    const waitFor = async (predicate: () => boolean) => {
      const start = Date.now();
      while (!predicate()) {
        if (Date.now() - start > 10_000) throw new Error(`timed out; received ${JSON.stringify(received)}; stderr ${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };
    await waitFor(() => received.some((m) => m.type === "ready"));

    send({ type: "request", id: 7, request: { op: "call", bundle: { hash: "h", code: "x", displayName: "t.js" } } });
    for (const message of [{ type: "stats" }, { type: "stats", statsId: 4 }, { type: "launch", secret: "s3cret" }]) send(message);
    await waitFor(
      () =>
        received.some((m) => m.type === "response") &&
        received.some((m) => m.type === "warmPool") &&
        (stderr.match(/not part of the protocol/g) ?? []).length >= 3,
    );

    expect(received.find((m) => m.type === "response")).toEqual({
      type: "response",
      id: 7,
      outcome: { ok: false, error: { type: "ExecutionError", fault: "host", message: "the sandbox process could not read the host's request" }, durationMs: 0 },
    });
    expect(received.find((m) => m.type === "warmPool")).toMatchObject({ type: "warmPool", statsId: 4 });
    expect(stderr).toContain('the host sent a message that is not part of the protocol ("request"); dropped');
    expect(stderr).toContain('("launch")');
    expect(stderr).not.toContain("s3cret"); // reported by type only
    expect(child.exitCode).toBeNull(); // still running
  });
});
