import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildPythonBundle } from "../../../src/bundling/python-bundle.js";
import { IsolateRunner } from "../../../src/isolation/isolate/isolate-runner.js";
import { interpreterSnapshot, pythonStdlibPath } from "../../../src/isolation/isolate/python-boot.js";
import { INTERPRETER_SNAPSHOT_STAMP_FILE, buildSnapshot } from "../../../src/isolation/isolate/python-snapshot.js";
import { makeDataDir } from "../../helpers/data-dir.js";
import { PROJECT_ROOT } from "../../../src/project-root.js";

/**
 * The build gives interpreters a standard library with bytecode (scripts/python-stdlib.mjs): a fresh
 * interpreter then imports without compiling source (its boot ≈ 1.2 s instead of ≈ 2.7 s).
 */
describe("the Python standard library of the build", () => {
  it("is the one interpreters boot from, and holds an unchecked hash-based .pyc beside each module", () => {
    const path = pythonStdlibPath();
    expect(path).toBe(join(PROJECT_ROOT, "dist", "python", "python_stdlib.zip"));
    const zip = readFileSync(path);
    // Entry names are stored as they are in a zip's headers.
    for (const name of ["json/__init__.py", "json/__init__.pyc", "urllib/request.pyc", "asyncio/base_events.pyc"]) {
      expect(zip.includes(Buffer.from(name)), name).toBe(true);
    }
  });
});

describe("the interpreter snapshot of the build", () => {
  it("is for the files a boot reads now, and a process's first interpreter is restored from it", async () => {
    expect(JSON.parse(readFileSync(INTERPRETER_SNAPSHOT_STAMP_FILE, "utf8"))).toEqual({ stamp: interpreterSnapshot().stamp });
    const data = makeDataDir();
    const runner = new IsolateRunner({});
    try {
      const path = data.write("tools/probe.py", 'def get_tool_schemas():\n    return [{"name": "probe_run", "description": "d"}]\n');
      const built = await buildPythonBundle({ path, folder: `${data.dir}/tools`, displayName: "probe.py" }, 1 << 20);
      if (!built.ok) throw new Error(built.error.message);
      const described = await runner.describe({ op: "describe", bundle: built.bundle, timeoutMs: 60_000, memoryLimitMb: 64 });
      expect(described.ok).toBe(true);
      expect(interpreterSnapshot().origin).toBe("build");
    } finally {
      await runner.close();
      data.cleanup();
    }
  }, 120_000);

  it("is not used for other files (another Pyodide, runtime or standard library)", () => {
    expect(buildSnapshot(interpreterSnapshot().stamp)).toBeInstanceOf(Buffer);
    expect(buildSnapshot("0".repeat(64))).toBeUndefined();
  });
});
