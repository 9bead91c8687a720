// Build step (after tsc and python-stdlib.mjs): dist/python/interpreter.snapshot, the memory snapshot of
// a booted Python interpreter that sandbox processes restore for their first interpreter
// (src/isolation/isolate/python-snapshot.ts), with dist/python/interpreter.json naming the files it was
// made from. Made by booting the runtime once in this build's own process, through the isolate runner,
// for a tool of this script's own (trusted code only). Skipped when the snapshot on disk was made from
// the files a boot reads now. Run with --no-node-snapshot (isolated-vm's rule).
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildPythonBundle } from "../dist/src/bundling/python-bundle.js";
import { IsolateRunner } from "../dist/src/isolation/isolate/isolate-runner.js";
import { interpreterSnapshot } from "../dist/src/isolation/isolate/python-boot.js";
import { INTERPRETER_SNAPSHOT_FILE, INTERPRETER_SNAPSHOT_STAMP_FILE } from "../dist/src/isolation/isolate/python-snapshot.js";

const { stamp } = interpreterSnapshot();
let recorded;
try {
  recorded = JSON.parse(readFileSync(INTERPRETER_SNAPSHOT_STAMP_FILE, "utf8")).stamp;
} catch {
  // none yet
}
if (recorded === stamp) process.exit(0);

const dir = mkdtempSync(join(tmpdir(), "awt-python-snapshot-"));
const runner = new IsolateRunner({ startupSnapshot: false });
try {
  const path = join(dir, "snapshot_probe.py");
  writeFileSync(path, "def get_tool_schemas():\n    return []\n");
  const built = await buildPythonBundle({ path, folder: dir, displayName: "snapshot_probe.py" }, 1 << 20);
  if (!built.ok) throw new Error(built.error.message);
  const described = await runner.describe({ op: "describe", bundle: built.bundle, timeoutMs: 120_000, memoryLimitMb: 64 });
  if (!described.ok) throw new Error(`the Python runtime did not boot: ${described.error.message}`);
  const snapshot = interpreterSnapshot();
  if (snapshot.origin !== "process" || !snapshot.bytes) throw new Error("the boot made no snapshot");
  writeFileSync(`${INTERPRETER_SNAPSHOT_FILE}.tmp`, snapshot.bytes);
  renameSync(`${INTERPRETER_SNAPSHOT_FILE}.tmp`, INTERPRETER_SNAPSHOT_FILE);
  writeFileSync(INTERPRETER_SNAPSHOT_STAMP_FILE, `${JSON.stringify({ stamp })}\n`);
  console.log(`dist/python/interpreter.snapshot: a booted interpreter (${(snapshot.bytes.length / 2 ** 20).toFixed(1)} MiB)`);
} finally {
  await runner.close();
  rmSync(dir, { recursive: true, force: true });
}
