import type ivm from "isolated-vm";
import { readFileSync, readdirSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { pyodideDir } from "../../node-runtime.js";
import { PROJECT_ROOT } from "../../project-root.js";
import { type CallGuard, remainingMs } from "./call-guard.js";
import { SetupError } from "./context-scripts.js";
import { classifyIvmError, ivmErrorInfo } from "./ivm-errors.js";
import type { PooledIsolate } from "./pooled-isolate.js";
import { type BootInputs, buildSnapshot, runtimeStamp } from "./python-snapshot.js";

/**
 * Boots the Python runtime in a Python tool's context (sandbox/python-runtime.ts), for the isolate runner:
 * Pyodide's two JavaScript modules compiled and evaluated in the context, then the runtime script, which
 * loads the interpreter (its WebAssembly binary and standard library read through one host function that
 * serves only those two files) and the runtime's own Python modules (sandbox/python/).
 *
 * Invariants:
 *  - Types only from isolated-vm: the runner hands in the two constructors this needs.
 *  - The files are read once per process; a boot's cost is the interpreter's start (≈ 2–3 s of CPU),
 *    inside the deadline of the call or load that made the isolate.
 */

/**
 * V8 heap a Python isolate gets beyond the tool's memory limit, MB: the runtime's own JavaScript (Pyodide
 * ≈ 16 MB) and a memory snapshot on its way in or out (≈ 30 MB). The tool's limit then applies to
 * Python's own allocations (the WebAssembly memory cap, sandbox/python-runtime.ts).
 */
export const PYTHON_RUNTIME_HEAP_MB = 96;

/** Bytes held outside every isolate (an isolated-vm ExternalCopy), copied into each isolate that asks. */
export interface KeptBytes {
  /** A copy in the isolate being entered, as an ArrayBuffer (what a callback may return). */
  copyInto(): unknown;
  /** A copy in the host's own heap. */
  copy(): unknown;
}

/** What the runner hands in: isolated-vm's constructors, which only it may use. */
export interface PythonBootTools {
  callback(fn: (...args: never[]) => unknown): ivm.Callback;
  /** Bytes copied into the isolate as an ArrayBuffer (what a callback may return). */
  bytesInto(bytes: Buffer): unknown;
  /** `bytes` moved outside every isolate, to be copied into many (`bytes` is detached). */
  keep(bytes: ArrayBuffer): KeptBytes;
}

/**
 * A file a boot copies into its isolate (≈ 42 MB in all: the interpreter's binary, its standard library,
 * the snapshot). Copying a Buffer in took three copies of fresh memory (a slice, the ExternalCopy, the
 * isolate's buffer), each paid in page faults (≈ 2.7 ms per MB on the VMs measured: ≈ 0.3 s a boot); the
 * first boot moves the bytes into an ExternalCopy instead, and every boot copies once, into its isolate.
 */
export class BootFile {
  private kept: KeptBytes | undefined;
  constructor(private bytes: Buffer) {}

  copyInto(tools: PythonBootTools): unknown {
    if (!this.kept) {
      // A whole Buffer's memory is moved (readFileSync's and Buffer.from(ArrayBuffer)'s are whole); a view of a larger one is copied once.
      const { buffer, byteOffset, byteLength } = this.bytes;
      const whole = byteOffset === 0 && byteLength === buffer.byteLength;
      this.kept = tools.keep((whole ? buffer : buffer.slice(byteOffset, byteOffset + byteLength)) as ArrayBuffer);
    }
    return this.kept.copyInto();
  }

  /** The bytes (copied out once they are kept). */
  get buffer(): Buffer {
    return this.kept ? Buffer.from(this.kept.copy() as ArrayBuffer) : this.bytes;
  }
}

interface RuntimeFiles extends Omit<BootInputs, "binaries"> {
  /** `runtimeStamp` of everything a boot reads (a hash of ≈ 17 MB), taken as the files are read. */
  stamp: string;
  /** The files Pyodide may read while booting, by name. */
  binaries: Map<string, BootFile>;
}

let files: RuntimeFiles | undefined;
const stampOfRuntime = (): string => runtimeFiles().stamp;
/**
 * The memory snapshot of a booted interpreter (≈ 30 MB) this process's boots restore (≈ 0.5 s instead of
 * ≈ 1.2 s): the build's (python-snapshot.ts) when it was made from these very files, else one taken by
 * this process's first boot before any tool code ran in that isolate, which never leaves the process.
 */
let memorySnapshot: BootFile | undefined;
let snapshotOrigin: "build" | "process" | undefined;
let buildSnapshotTried = false;

/** Where this process's interpreter snapshot came from, and its bytes (for tests and the build's snapshot step). */
export function interpreterSnapshot(): { origin: "build" | "process" | undefined; bytes: Buffer | undefined; stamp: string } {
  return { origin: snapshotOrigin, bytes: memorySnapshot?.buffer, stamp: stampOfRuntime() };
}

function runtimeFiles(): RuntimeFiles {
  if (files) return files;
  const dir = pyodideDir();
  const pythonDir = join(PROJECT_ROOT, "sandbox", "python");
  const python: Record<string, string> = {};
  for (const entry of readdirSync(pythonDir, { recursive: true, encoding: "utf8" })) {
    if (entry.endsWith(".py")) python[relative(pythonDir, join(pythonDir, entry)).split(sep).join("/")] = readFileSync(join(pythonDir, entry), "utf8");
  }
  const inputs: BootInputs = {
    asm: readFileSync(join(dir, "pyodide.asm.mjs"), "utf8"),
    loader: readFileSync(join(dir, "pyodide.mjs"), "utf8"),
    lockFile: readFileSync(join(dir, "pyodide-lock.json"), "utf8"),
    runtime: ["python-text.js", "python-runtime.js"].map((part) => readFileSync(join(PROJECT_ROOT, "dist", "sandbox", part), "utf8")).join("\n"),
    pythonFiles: JSON.stringify(python),
    binaries: new Map([
      ["pyodide.asm.wasm", readFileSync(join(dir, "pyodide.asm.wasm"))],
      ["python_stdlib.zip", readFileSync(pythonStdlibPath())],
    ]),
  };
  const binaries = new Map([...inputs.binaries].map(([name, bytes]) => [name, new BootFile(bytes)]));
  files = { ...inputs, stamp: runtimeStamp(inputs), binaries };
  return files;
}

/**
 * The standard library interpreters boot from: the build's copy with bytecode (scripts/python-stdlib.mjs)
 * when it was made for the installed Pyodide, else Pyodide's own, source only (imports then compile).
 */
export function pythonStdlibPath(): string {
  const built = join(PROJECT_ROOT, "dist", "python");
  try {
    const stamp = JSON.parse(readFileSync(join(built, "stdlib.json"), "utf8")) as { pyodide?: unknown };
    const installed = (JSON.parse(readFileSync(join(pyodideDir(), "package.json"), "utf8")) as { version: string }).version;
    if (stamp.pyodide === installed) return join(built, "python_stdlib.zip");
  } catch {
    // not built: Pyodide's own
  }
  return join(pyodideDir(), "python_stdlib.zip");
}

/**
 * Boots the runtime in `context`. A failure leaves as a `SetupError`: the deadline, the memory limit or a
 * host stop as it would be during a call (prefixed "while starting Python:"), anything else as the
 * host's (the runtime is the host's code, not the tool's).
 */
export async function bootPython(
  isolate: ivm.Isolate,
  context: ivm.Context,
  tools: PythonBootTools,
  limits: { timeoutMs: number; memoryLimitMb: number },
  deadline: number,
  guard: CallGuard,
  pooled: PooledIsolate,
): Promise<void> {
  try {
    await boot(isolate, context, tools, limits, deadline);
  } catch (error) {
    // A build snapshot this runtime cannot restore is not tried again: the next boot starts cold.
    if (snapshotOrigin === "build") [memorySnapshot, snapshotOrigin] = [undefined, undefined];
    const kind = classifyIvmError(error);
    if (kind === "Timeout" || kind === "MemoryLimit" || guard.stopReason || pooled.hitMemoryLimit) {
      const info = ivmErrorInfo(error, limits, guard.stopReason ?? (pooled.hitMemoryLimit ? "MemoryLimit" : undefined));
      throw new SetupError({ ...info, message: `while starting Python: ${info.message}` });
    }
    const message = error instanceof Error ? error.message : String(error);
    throw new SetupError({ type: "ExecutionError", fault: "host", message: `the Python runtime did not start: ${message.slice(0, 500)}` });
  }
}

async function boot(isolate: ivm.Isolate, context: ivm.Context, tools: PythonBootTools, limits: { memoryLimitMb: number }, deadline: number): Promise<void> {
  const runtime = runtimeFiles();
  if (!buildSnapshotTried) {
    buildSnapshotTried = true;
    const built = buildSnapshot(stampOfRuntime());
    if (built) [memorySnapshot, snapshotOrigin] = [new BootFile(built), "build"];
  }
  const readFile = tools.callback((name: string) => {
    const file = String(name).slice(String(name).lastIndexOf("/") + 1);
    const bytes = file === "snapshot" ? memorySnapshot : runtime.binaries.get(file);
    if (!bytes) throw new Error(`the Python runtime has no file ${String(name)}`);
    return bytes.copyInto(tools);
  });
  // node:crypto on first use: a cold CLI call of a TypeScript tool never loads it.
  const random = tools.callback((count: number) =>
    tools.bytesInto(process.getBuiltinModule("node:crypto").randomBytes(Math.max(0, Math.min(65_536, Number(count) | 0)))),
  );
  // Pyodide's modules read their environment as they are evaluated: it is prepared first.
  context.evalClosureSync(`${runtime.runtime}\npreparePython(globalThis, $0, $1);`, [readFile, random], { timeout: remainingMs(deadline) });
  const asm = await isolate.compileModule(runtime.asm, { filename: "pyodide:pyodide.asm.mjs" });
  const loader = await isolate.compileModule(runtime.loader, { filename: "pyodide:pyodide.mjs" });
  const entry = await isolate.compileModule(
    'import create from "pyodide.asm.mjs"; import { loadPyodide } from "pyodide.mjs"; globalThis.__awPyodideModules = { create, loadPyodide };',
    { filename: "pyodide:entry.mjs" },
  );
  await entry.instantiate(context, (specifier) => {
    if (specifier === "pyodide.asm.mjs") return asm;
    if (specifier === "pyodide.mjs") return loader;
    throw new Error(`no module ${specifier}`);
  });
  await entry.evaluate({ timeout: remainingMs(deadline) });
  const made = (await context.evalClosure(
    "return __awPythonBoot($0, $1, $2, $3);",
    [runtime.pythonFiles, runtime.lockFile, limits.memoryLimitMb * 2 ** 20, memorySnapshot !== undefined],
    { timeout: remainingMs(deadline), result: { promise: true, copy: true } },
  )) as ArrayBuffer | undefined;
  if (memorySnapshot === undefined && made instanceof ArrayBuffer && made.byteLength > 0) {
    memorySnapshot = new BootFile(Buffer.from(made));
    snapshotOrigin = "process";
  }
}
