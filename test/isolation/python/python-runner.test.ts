import { afterAll, describe, expect, it } from "vitest";
import { buildPythonBundle } from "../../../src/bundling/python-bundle.js";
import { IsolateRunner } from "../../../src/isolation/isolate/isolate-runner.js";
import type { CallLabel, CallRequest, ToolBundle, ToolLogLine } from "../../../src/isolation/wire/messages.js";
import { isPythonBundle } from "../../../src/isolation/wire/tool-bundle.js";
import { makeDataDir, waitFor } from "../../helpers/data-dir.js";

/**
 * A Python tool in the isolate runner itself: what the prelude sees of its module (exports, schemas in
 * either spelling, EXECUTION_PROFILE), `cli_main` answering what it printed, `logging` and `print` in the
 * call's log, and the warm pool counting the interpreter's memory that V8 does not see.
 */
const SOURCE = `from __future__ import annotations
import logging
logger = logging.getLogger("animaworks.tools")

EXECUTION_PROFILE = {"slow": {"expected_seconds": 60, "background_eligible": True}}


def get_tool_schemas():
    return [
        {"name": "pyrun_fast", "description": "d", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        {"name": "pyrun_slow", "description": "d", "input_schema": {"type": "object", "properties": {}}},
    ]


def pyrun_fast(args):
    logger.info("fast with %s", args.get("n"))
    print("printed line")
    return {"n": args.get("n"), "keys": sorted(args)}


def pyrun_slow(args):
    return "slow"


def cli_main(argv):
    import os
    print("usage: pyrun", " ".join(argv), "in", os.environ.get("ANIMAWORKS_ANIMA_DIR"))
`;

/** Counts its get_tool_schemas calls in module state, which lives as long as its interpreter. */
const ADOPT = `_seen = {"schemas": 0}


def get_tool_schemas():
    _seen["schemas"] += 1
    return [{"name": "adopt_count", "description": "d", "input_schema": {"type": "object", "properties": {}}}]


def dispatch(name, args):
    return dict(_seen)
`;

/** Counts its calls in module state; a call with "hoard" makes the interpreter's memory grow by 56 MB. */
const HOARD = `_calls = {"n": 0}


def get_tool_schemas():
    return [{"name": "hoard_run", "description": "d", "input_schema": {"type": "object", "properties": {}}}]


def dispatch(name, args):
    _calls["n"] += 1
    if args.get("hoard"):
        block = bytearray(56 * 1024 * 1024)
        del block
    return _calls["n"]
`;

const data = makeDataDir();
const logs: Array<ToolLogLine<CallLabel>> = [];
// A byte budget smaller than one interpreter, as a sandbox process's share often is.
const runner = new IsolateRunner({ onLog: (line) => logs.push(line), warmPoolBytes: 16 * 2 ** 20 });
afterAll(async () => {
  await runner.close();
  data.cleanup();
});

async function bundle(): Promise<ToolBundle> {
  const path = data.write("tools/pyrun.py", SOURCE);
  const built = await buildPythonBundle({ path, folder: `${data.dir}/tools`, displayName: "personal/pyrun.py" }, 1 << 20);
  if (!built.ok) throw new Error(built.error.message);
  return built.bundle;
}

const request = (built: ToolBundle, entry: "call" | "cli", schemaName: string, payload: unknown): CallRequest<CallLabel> => ({
  op: "call",
  bundle: built,
  context: { anima: "alice", tool: "pyrun" },
  entry,
  schemaName,
  payloadJson: JSON.stringify(payload),
  timeoutMs: 60_000,
  memoryLimitMb: 64,
  maxResultBytes: 100_000,
  maxLogLines: 20,
  maxLogLineChars: 500,
});

describe("a Python tool in the isolate runner", () => {
  it("is a Python bundle, described with its exports, both schema spellings and its profile", async () => {
    const built = await bundle();
    expect(isPythonBundle(built.code)).toBe(true);
    const described = await runner.describe({ op: "describe", bundle: built, timeoutMs: 60_000, memoryLimitMb: 64 });
    if (!described.ok) throw new Error(JSON.stringify(described.error));
    expect(described.module.exports).toEqual({
      EXECUTION_PROFILE: "object",
      get_tool_schemas: "function",
      pyrun_fast: "function",
      pyrun_slow: "function",
      cli_main: "function",
    });
    expect((described.module.schemas as Array<{ name: string }>).map((schema) => schema.name)).toEqual(["pyrun_fast", "pyrun_slow"]);
    expect(described.module.profile).toEqual({ slow: { expected_seconds: 60, background_eligible: true } });
  }, 120_000);

  it("calls a function named like the schema, logs to the call's log, and keeps the interpreter warm beside the byte budget", async () => {
    const built = await bundle();
    const outcome = await runner.call(request(built, "call", "pyrun_fast", { n: 3, anima_dir: "/x" }));
    if (!outcome.ok || outcome.value.kind === "none") throw new Error(JSON.stringify(outcome));
    expect(JSON.parse(outcome.value.text)).toEqual({ n: 3, keys: ["anima_dir", "n"] });
    expect(logs.map((line) => [line.level, line.message])).toEqual(
      expect.arrayContaining([
        ["info", "fast with 3"],
        ["info", "printed line"],
      ]),
    );
    // Kept warm apart from the byte budget (a sandbox process's share of it is often less than one interpreter).
    expect(runner.warmPoolStats()).toMatchObject({ idleInterpreters: 1 });
  }, 120_000);

  it("answers cli_main with what it printed, run with ANIMAWORKS_ANIMA_DIR set as AnimaWorks runs it", async () => {
    const built = await bundle();
    const outcome = await runner.call(request(built, "cli", "", { argv: ["a", "b"], anima_dir: "/data/animas/alice" }));
    if (!outcome.ok || outcome.value.kind === "none") throw new Error(JSON.stringify(outcome));
    expect(outcome.value.text).toBe("usage: pyrun a b in /data/animas/alice\n");
  }, 120_000);
  it("hands a described tool's interpreter to its first call, and keeps a spare interpreter ready from then on", async () => {
    const path = data.write("tools/adopt.py", ADOPT);
    const built = await buildPythonBundle({ path, folder: `${data.dir}/tools`, displayName: "personal/adopt.py" }, 1 << 20);
    if (!built.ok) throw new Error(built.error.message);
    const described = await runner.describe({ op: "describe", bundle: built.bundle, timeoutMs: 60_000, memoryLimitMb: 64 });
    expect(described.ok).toBe(true);
    // get_tool_schemas ran in the interpreter the call got: the describe's, not a second one booted.
    const outcome = await runner.call({ ...request(built.bundle, "call", "adopt_count", {}), context: { anima: "alice", tool: "adopt" } });
    if (!outcome.ok || outcome.value.kind === "none") throw new Error(JSON.stringify(outcome));
    expect(JSON.parse(outcome.value.text)).toEqual({ schemas: 1 });
    await waitFor(() => runner.warmPoolStats().spareInterpreters === 1, 60_000, 50);
  }, 120_000);
  it("boot_prediction: starts a spare again after a describe took it, as after a call (the host counts on one being there)", async () => {
    await runner.call(request(await bundle(), "call", "pyrun_fast", { n: 1 })); // a spare is kept at 64 MB from now on
    await waitFor(() => runner.warmPoolStats().spareInterpreters === 1, 60_000, 50);
    const path = data.write("tools/described.py", ADOPT);
    const built = await buildPythonBundle({ path, folder: `${data.dir}/tools`, displayName: "personal/described.py" }, 1 << 20);
    if (!built.ok) throw new Error(built.error.message);
    expect((await runner.describe({ op: "describe", bundle: built.bundle, timeoutMs: 60_000, memoryLimitMb: 64 })).ok).toBe(true);
    // Held: the describe's isolate (it took the spare), and a new spare beside it.
    await waitFor(() => runner.warmPoolStats().spareInterpreters === 2, 8_000, 50);
  }, 120_000);
  it("keeps an interpreter warm across calls, but not one whose memory grew well past its boot (that memory is never given back)", async () => {
    const path = data.write("tools/hoard.py", HOARD);
    const built = await buildPythonBundle({ path, folder: `${data.dir}/tools`, displayName: "personal/hoard.py" }, 1 << 20);
    if (!built.ok) throw new Error(built.error.message);
    const calls: number[] = [];
    for (const hoard of [false, false, true, false]) {
      const outcome = await runner.call({ ...request(built.bundle, "call", "hoard_run", { hoard }), context: { anima: "alice", tool: "hoard" } });
      if (!outcome.ok || outcome.value.kind === "none") throw new Error(JSON.stringify(outcome));
      calls.push(Number(outcome.value.text));
    }
    expect(calls).toEqual([1, 2, 3, 1]);
  }, 120_000);

  it("keeps no interpreter warm when the operator keeps none (warm_python_interpreters 0): each call restores its own", async () => {
    const lean = new IsolateRunner({ warmPoolBytes: 16 * 2 ** 20, pythonInterpreters: { warm: 0, spare: false } });
    try {
      const path = data.write("tools/hoard.py", HOARD);
      const built = await buildPythonBundle({ path, folder: `${data.dir}/tools`, displayName: "personal/hoard.py" }, 1 << 20);
      if (!built.ok) throw new Error(built.error.message);
      const calls: number[] = [];
      for (let i = 0; i < 2; i++) {
        const outcome = await lean.call({ ...request(built.bundle, "call", "hoard_run", {}), context: { anima: "alice", tool: "hoard" } });
        if (!outcome.ok || outcome.value.kind === "none") throw new Error(JSON.stringify(outcome));
        calls.push(Number(outcome.value.text));
        expect(lean.warmPoolStats()).toMatchObject({ idleInterpreters: 0 });
      }
      expect(calls).toEqual([1, 1]);
    } finally {
      await lean.close();
    }
  }, 120_000);
});
