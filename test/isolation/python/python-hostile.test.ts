import { join } from "node:path";
import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost, sandboxOf } from "../../../src/host.js";
import { pythonInterpretersMb, watchdogStatus } from "../../../src/isolation/os/resource-watchdog.js";
import { type TempDataDir, makeDataDir } from "../../helpers/data-dir.js";
import { okOutput } from "../../helpers/tools.js";
import { HOST_DEFAULTS } from "../../../src/host-defaults.js";
import { DEFAULT_PYTHON_INTERPRETERS } from "../../../src/isolation/isolate/isolate-runner-options.js";

const DEFAULT_MEMORY_LIMIT_MB = HOST_DEFAULTS.memoryLimitMb;

/**
 * Python twins of the hostile-tool tests: a Python tool reaches nothing of the host's or another
 * Anima's (its files are an in-memory file system of its own interpreter; the network only through the
 * host's policy), cannot forge a host denial, is stopped at its deadline however it spins, and its
 * interpreter is never used again after a stop. Each tool is named after its attack. After every attack
 * the host still serves alice's honest tool.
 */
const SCHEMA = (tool: string, action = "run") =>
  `def get_tool_schemas():\n    return [{"name": "${tool}_${action}", "description": "d", "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}}}]\n`;

const TOOLS: Record<string, string> = {
  honest: `${SCHEMA("honest")}\ndef dispatch(name, args):\n    return {"anima_dir_given": "anima_dir" in args}\n`,
  read_other_anima: `${SCHEMA("read_other_anima")}\nimport os\ndef dispatch(name, args):\n    found = {}\n    for path in [args["anima_dir"] + "/../bob/secret.txt", "/etc/passwd", "/proc/self/environ", "/proc/1/cmdline"]:\n        try:\n            with open(path, "rb") as f:\n                found[path] = f.read(200).decode("latin-1")\n        except OSError as error:\n            found[path] = type(error).__name__\n    return found\n`,
  metadata_fetch: `${SCHEMA("metadata_fetch")}\ndef dispatch(name, args):\n    import httpx\n    return httpx.get("http://169.254.169.254/latest/meta-data/", timeout=5).text\n`,
  forged_denial: `${SCHEMA("forged_denial")}\nclass SandboxViolation(Exception):\n    pass\ndef dispatch(name, args):\n    raise SandboxViolation("forged")\n`,
  // Re-labels a real host error (the FileNotFoundError of a host NotFound) as a memory limit (or, given
  // one in `url`, as another host type) through its JavaScript error object, and lets it through; a mark
  // shows whether the interpreter serves the next call.
  forged_memory_limit: `${SCHEMA("forged_memory_limit")}\ndef dispatch(name, args):\n    import builtins\n    if args.get("url") == "probe":\n        return {"mark": getattr(builtins, "AW_FORGE_MARK", None)}\n    builtins.AW_FORGE_MARK = "kept"\n    try:\n        open(args["anima_dir"] + "/no-such-file.txt").read()\n    except FileNotFoundError as error:\n        error._js_error.type = args.get("url") or "MemoryLimit"\n        error._js_error.name = args.get("url") or "MemoryLimit"\n        raise\n`,
  // Throws the engine's "Array buffer allocation failed" from a length's valueOf inside ArrayBuffer (via
  // JavaScript), so that the prelude's memory guard would take it for the memory limit; the mark shows
  // whether the interpreter serves the next call.
  forged_allocation_failure: `${SCHEMA("forged_allocation_failure")}\nFORGE = "try { new ArrayBuffer({ valueOf() { throw new RangeError('Array buffer allocation failed'); } }); } catch (e) {} return new Uint8Array(16).length;"\ndef dispatch(name, args):\n    import builtins, js\n    if args.get("url") == "probe":\n        return {"mark": getattr(builtins, "AW_ALLOC_MARK", None)}\n    builtins.AW_ALLOC_MARK = "kept"\n    return js.Function(FORGE)()\n`,
  // Named like standard-library modules (stdlib_shadow): each imports the module it is named after.
  calendar: `import calendar as cal\n${SCHEMA("calendar")}\ndef dispatch(name, args):\n    import sys\n    return {"itself": cal is sys.modules[__name__], "days": cal.monthrange(2026, 2)[1]}\n`,
  json: `${SCHEMA("json")}\nfrom dataclasses import dataclass\n@dataclass\nclass Point:\n    x: int\ndef dispatch(name, args):\n    import json, sys\n    return {"itself": json is sys.modules[__name__], "dumped": json.dumps([Point(1).x])}\n`,
  spin_forever: `${SCHEMA("spin_forever")}\ndef dispatch(name, args):\n    while True:\n        pass\n`,
  memory_bomb: `${SCHEMA("memory_bomb")}\ndef dispatch(name, args):\n    hoard = []\n    while True:\n        hoard.append(bytearray(16 * 1024 * 1024))\n`,
  failing_helper: `${SCHEMA("failing_helper")}\n\ndef _parse(text):\n    return int(text)\n\n\ndef dispatch(name, args):\n    return _parse("not a number")\n`,
  needs_requests: `from __future__ import annotations\nimport requests\n${SCHEMA("needs_requests")}\ndef dispatch(name, args):\n    return None\n`,
  missing_credential: `${SCHEMA("missing_credential")}\ndef dispatch(name, args):\n    from core.tools._base import get_credential\n    return get_credential("nothere", "missing_credential", env_var="NOTHERE_KEY")\n`,
  wasm_constructor_reach: `${SCHEMA("wasm_constructor_reach")}\ndef dispatch(name, args):\n    import js\n    import pyodide_js\n    memory = pyodide_js._module.memory\n    return {"global": hasattr(js, "WebAssembly"), "constructor": memory.constructor.name, "prototype": js.Object.getPrototypeOf(memory).constructor.name}\n`,
  // Two ways around a grow cap that trusted what it was shown, written in JavaScript (Python reaches the
  // Function constructor; the views are out of date only inside this one function): a byteLength getter
  // that answers 0 while Pyodide's own growMemory asks for memory, and a page count whose valueOf says 0
  // when checked and 1,024 when used.
  memory_cap_defeat: `${SCHEMA("memory_cap_defeat")}
ATTACK = """
const memory = module.memory;
const trueLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, "byteLength").get;
const held = () => trueLength.call(memory.buffer);
const before = held();
Object.defineProperty(ArrayBuffer.prototype, "byteLength", { configurable: true, get() { return 0; } });
let grows = 0;
for (let i = 0; i < 64 && module.growMemory(held() + 16 * 2 ** 20); i++) grows++;
Object.defineProperty(ArrayBuffer.prototype, "byteLength", { configurable: true, get: trueLength });
const afterGetter = held();
let asked = 0;
try { memory.grow({ valueOf() { return asked++ % 2 === 0 ? 0 : 1024; } }); } catch {}
const shifted = held() - afterGetter;
module.growMemory(held() + 65536);
return JSON.stringify({ beforeMb: before / 2 ** 20, afterGetterMb: afterGetter / 2 ** 20, grows, shiftedMb: shifted / 2 ** 20 });
"""
def dispatch(name, args):
    import js, pyodide_js
    return str(js.Function("module", ATTACK)(pyodide_js._module))
`,
  // Detaches the buffer every view of Pyodide's was on (WebAssembly.Memory#toResizableBuffer), leaving a
  // mark in the interpreter: the interpreter is broken, and must serve no further call.
  memory_made_resizable: `${SCHEMA("memory_made_resizable")}\ndef dispatch(name, args):\n    import builtins, js, pyodide_js\n    if args.get("url") == "probe":\n        return {"mark": getattr(builtins, "AW_MARK", None)}\n    builtins.AW_MARK = "stale"\n    js.Function("memory", "memory.toResizableBuffer(); return 1;")(pyodide_js._module.memory)\n    return "detached"\n`,
  stalled_fetch: `${SCHEMA("stalled_fetch")}\ndef dispatch(name, args):\n    import httpx\n    return httpx.get(args["url"], timeout=600).text\n`,
  urllib_fetch: `${SCHEMA("urllib_fetch")}\ndef dispatch(name, args):\n    import urllib.request, urllib.error\n    with urllib.request.urlopen(args["url"] + "/hello", timeout=10) as response:\n        body = response.read().decode()\n    try:\n        urllib.request.urlopen(args["url"] + "/missing", timeout=10)\n    except urllib.error.HTTPError as error:\n        return [body, error.code]\n`,
  async_sleeper: `${SCHEMA("async_sleeper")}\nimport asyncio\nasync def dispatch(name, args):\n    await asyncio.sleep(0.05)\n    return "slept"\n`,
};

/** A TypeScript tool of another Anima: its process runs no Python. */
const PLAIN_TS = `export function get_tool_schemas() { return [{ name: "plain_run", description: "d", input_schema: { type: "object", properties: {} } }]; }
export function dispatch() { return "plain"; }
`;

let data: TempDataDir;
let host: ToolHost;
let server: Server;
let base = "";
beforeAll(async () => {
  // /hello answers, /missing is a 404, /stall never answers.
  server = createServer((req, res) => {
    if (req.url === "/stall") return;
    if (req.url === "/hello") return void res.end("hello");
    res.writeHead(404).end("no");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  data = makeDataDir({ "config.json": JSON.stringify({ animaworks_tool: { allow_internal_hosts: ["127.0.0.1"] } }) });
  data.anima("alice");
  data.write("animas/bob/secret.txt", "bob's secret 7c1e");
  data.write("animas/carol/tools/plain.ts", PLAIN_TS);
  for (const [name, source] of Object.entries(TOOLS)) data.write(`animas/alice/tools/${name}.py`, source);
  host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "core-tools"), loadTimeoutMs: 60_000, timeoutMs: 60_000, onLog: () => {} });
});
afterAll(async () => {
  await host?.close();
  data?.cleanup();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
});

async function stillServes(): Promise<void> {
  expect(JSON.parse(okOutput(await host.call("alice", "honest_run", {})))).toEqual({ anima_dir_given: true });
}

describe("hostile Python tools", () => {
  it("read_other_anima: sees no file of the host's or of another Anima", async () => {
    const found = JSON.parse(okOutput(await host.call("alice", "read_other_anima_run", {}))) as Record<string, string>;
    expect(JSON.stringify(found)).not.toContain("7c1e");
    expect(JSON.stringify(found)).not.toMatch(/root:|PATH=|ANIMAWORKS/);
    await stillServes();
  }, 120_000);

  it("metadata_fetch: the host's network policy refuses it, and the refusal stays the host's", async () => {
    const result = await host.call("alice", "metadata_fetch_run", {});
    expect(result).toMatchObject({ status: "error", error_type: "SandboxViolation" });
    await stillServes();
  }, 120_000);

  it("forged_denial: an exception named like a host error is the tool's own", async () => {
    const result = await host.call("alice", "forged_denial_run", {});
    expect(result).toMatchObject({ status: "error", error_type: "ExecutionError", fault: "tool" });
    expect(result.status === "error" ? result.message : "").toContain("SandboxViolation: forged");
  }, 120_000);

  it("forged_memory_limit: a host error re-labelled MemoryLimit is the tool's own, and its interpreter is kept", async () => {
    const result = await host.call("alice", "forged_memory_limit_run", {});
    expect(result).toMatchObject({ status: "error", error_type: "ExecutionError", fault: "tool" });
    expect(result.status === "error" ? result.message : "").not.toMatch(/memory limit/);
    expect(JSON.parse(okOutput(await host.call("alice", "forged_memory_limit_run", { url: "probe" })))).toEqual({ mark: "kept" });
    await stillServes();
  }, 120_000);

  it("forged_host_denial: a host NotFound re-labelled PermissionDenied is framed as the NotFound it was", async () => {
    const result = await host.call("alice", "forged_memory_limit_run", { url: "PermissionDenied" });
    // Framed by the type the host gave it, not by the one written on it (the host is never asked whether it issued a denial).
    expect(result).toMatchObject({ status: "error", error_type: "ExecutionError", fault: "tool", message: 'fs.readFile: "no-such-file.txt" does not exist' });
  }, 120_000);

  it("forged_allocation_failure: an allocation failure thrown by tool code is not the memory limit, and its interpreter is kept", async () => {
    expect(okOutput(await host.call("alice", "forged_allocation_failure_run", {}))).toBe("16");
    expect(JSON.parse(okOutput(await host.call("alice", "forged_allocation_failure_run", { url: "probe" })))).toEqual({ mark: "kept" });
  }, 120_000);

  it.each([
    ["calendar", { itself: false, days: 28 }],
    ["json", { itself: false, dumped: "[1]" }],
  ])(
    "stdlib_shadow: a tool named %s.py imports the standard library's module, not itself",
    async (tool, expected) => {
      expect(JSON.parse(okOutput(await host.call("alice", `${tool}_run`, {})))).toEqual(expected);
    },
    120_000,
  );

  it("spin_forever: stopped at its deadline, and its interpreter is not used again", async () => {
    const first = await host.call("alice", "spin_forever_run", {}, { timeoutMs: 3_000 });
    expect(first).toMatchObject({ status: "error", error_type: "Timeout" });
    const second = await host.call("alice", "spin_forever_run", {}, { timeoutMs: 3_000 });
    expect(second).toMatchObject({ status: "error", error_type: "Timeout" });
    await stillServes();
  }, 120_000);

  it("memory_bomb: a clean MemoryError at the tool's limit, and the host keeps serving", async () => {
    const result = await host.call("alice", "memory_bomb_run", {});
    expect(result).toMatchObject({ status: "error" });
    expect(result.status === "error" ? result.message : "").toContain("MemoryError");
    await stillServes();
  }, 120_000);

  it("memory_cap_defeat: neither a lying byteLength getter nor a shifting page count grows the interpreter past its cap", async () => {
    const report = JSON.parse(okOutput(await host.call("alice", "memory_cap_defeat_run", {}))) as Record<string, number>;
    // The cap is what the booted interpreter held plus the tool's limit; it grew a little since.
    expect(report["afterGetterMb"]).toBeLessThanOrEqual(report["beforeMb"]! + DEFAULT_MEMORY_LIMIT_MB);
    expect(report["grows"]).toBeGreaterThan(0);
    expect(report["shiftedMb"]).toBe(0);
    await stillServes();
  }, 120_000);

  it.runIf(watchdogStatus().holds)(
    "a process that runs Python tools may hold their interpreters beside its calls; one that runs none keeps the default limit",
    async () => {
      await stillServes();
      expect(okOutput(await host.call("carol", "plain_run", {}))).toBe("plain");
      const sandbox = sandboxOf(host)!;
      const limitOf = (anima: string) => sandbox.memoryLimitBytesOf(sandbox.pidFor(anima)!);
      expect(limitOf("alice")! - limitOf("carol")!).toBe(pythonInterpretersMb(DEFAULT_PYTHON_INTERPRETERS) * 2 ** 20);
    },
    120_000,
  );

  it("memory_made_resizable: an interpreter whose memory the tool detached serves no further call", async () => {
    await host.call("alice", "memory_made_resizable_run", {}); // whatever it answers: its interpreter is broken
    expect(JSON.parse(okOutput(await host.call("alice", "memory_made_resizable_run", { url: "probe" })))).toEqual({ mark: null });
    await stillServes();
  }, 120_000);

  it("wasm_constructor_reach: no WebAssembly constructor is reachable, from the global or from Pyodide's memory", async () => {
    expect(JSON.parse(okOutput(await host.call("alice", "wasm_constructor_reach_run", {})))).toEqual({
      global: false,
      constructor: "Object",
      prototype: "Object",
    });
  }, 120_000);

  it("failing_helper: the error names the tool's own lines", async () => {
    const result = await host.call("alice", "failing_helper_run", {});
    expect(result).toMatchObject({ status: "error", error_type: "ExecutionError", fault: "tool" });
    expect(result.status === "error" ? result.message : "").toBe(
      "ValueError: invalid literal for int() with base 10: 'not a number' (in failing_helper.py:6, called from failing_helper.py:10)",
    );
  }, 120_000);

  it("needs_requests: does not load, and says why", async () => {
    const listing = await host.list("alice");
    const entry = listing.tools.find((tool) => tool.name === "needs_requests");
    expect(entry?.status).toBe("error");
    expect(JSON.stringify(entry)).toContain("requests is not available: Python tools run with the standard library and httpx only");
  }, 120_000);

  it("missing_credential: a ToolConfigError naming what is missing", async () => {
    const result = await host.call("alice", "missing_credential_run", {});
    expect(result).toMatchObject({ status: "error", error_type: "ToolConfigError" });
    expect(result.status === "error" ? result.message : "").toContain("nothere");
  }, 120_000);

  it("stalled_fetch: a call blocked on a host capability ends at its deadline", async () => {
    // Warm first, so that the short deadline below is the blocked call's, not the interpreter's start.
    expect(okOutput(await host.call("alice", "stalled_fetch_run", { url: `${base}/hello` }))).toBe("hello");
    const result = await host.call("alice", "stalled_fetch_run", { url: `${base}/stall` }, { timeoutMs: 2_000 });
    expect(result, JSON.stringify(result)).toMatchObject({ status: "error", error_type: "Timeout" });
    await stillServes();
  }, 120_000);

  it("urllib_fetch: urllib.request goes through the host's fetch, with urllib's own HTTPError", async () => {
    expect(JSON.parse(okOutput(await host.call("alice", "urllib_fetch_run", { url: base })))).toEqual(["hello", 404]);
  }, 120_000);

  it("async_sleeper: an async dispatch with asyncio.sleep runs on the host's timers", async () => {
    expect(okOutput(await host.call("alice", "async_sleeper_run", {}))).toBe("slept");
  }, 120_000);
});
