/*
 * The Python runtime of a Python tool's isolate: boots Pyodide (CPython compiled to WebAssembly) in the
 * context the prelude was bound in, and registers the tool's module with the prelude like a bundle's.
 * The host runs this script once per Python isolate, after binding (src/isolation/isolate/python-boot.ts),
 * with Pyodide's two JavaScript modules already evaluated; then the tool's bundle calls
 * `__awPythonTool(source, fileName)`.
 *
 * Invariants:
 *  - Python is no boundary: Python code reaches the whole JavaScript global (`import js`). What protects
 *    the host and other Animas is the host's: capabilities decided on its side for the call's Anima, the
 *    deadline, the process's caps. Host callbacks given here live in closures, never on the global.
 *  - WebAssembly exists in this context only while Pyodide boots: afterwards no code here can compile a
 *    module or make a memory. The interpreter's own memory grows only through `Memory.prototype.grow`,
 *    which is capped (the tool's memory limit above what the booted interpreter holds), so that honest
 *    code gets a MemoryError; the sandbox process's memory cap remains the enforcement.
 *  - The files Pyodide reads while booting are the host's fixed table (the wasm binary, the standard
 *    library); `readbuffer` and its kin are gone before any tool code runs.
 *  - Everything between Python and the prelude crosses as JSON text, strings and byte arrays.
 */

interface PythonProxy {
  (...args: unknown[]): unknown;
  callPromising(...args: unknown[]): Promise<unknown>;
}
interface Pyodide {
  FS: { mkdirTree(path: string): void; writeFile(path: string, data: string): void };
  registerJsModule(name: string, module: object): void;
  pyimport(name: string): Record<string, PythonProxy>;
  runPython(code: string): unknown;
}
interface PyodideModules {
  create: unknown;
  loadPyodide(options: Record<string, unknown>): Promise<Pyodide>;
}
interface ToolApiForPython {
  logger: Record<string, (message: string) => void>;
  fetch(url: string, init: Record<string, unknown>): Promise<{ status: number; statusText: string; url: string; headers: unknown; body: unknown }>;
  getCredential(name: string, tool: string, key?: string, envVar?: string): Promise<string>;
  fs: {
    readFile(path: string, encoding: "bytes"): Promise<Uint8Array>;
    writeFile(path: string, data: Uint8Array): Promise<void>;
    appendFile(path: string, data: Uint8Array): Promise<void>;
    readdir(path: string): Promise<unknown>;
    stat(path: string): Promise<unknown>;
    exists(path: string): Promise<boolean>;
    mkdir(path: string, options: { recursive: boolean }): Promise<void>;
    rm(path: string, options: { recursive: boolean }): Promise<void>;
    rename(from: string, to: string): Promise<void>;
  };
  progress(fraction: number, message?: string): Promise<void>;
  isCancelled(): boolean;
  ToolError: new (message: string) => Error;
  ToolConfigError: new (message: string) => Error;
}

/** The outcome of a Python call as _animaworks_runtime.py frames it. */
type PythonOutcome = { ok: true; value: unknown } | { ok: false; type: string; message: string; where: string; host?: boolean; config?: boolean };

const WASM_PAGE_BYTES = 65_536;
/** Largest memory the interpreter may reach while booting, bytes (it needs ≈ 20–30 MB). */
const BOOT_MEMORY_BYTES = 512 * 2 ** 20;
/**
 * Standard library modules the runtime (_animaworks_runtime.py, httpx.py) and most tools import, imported
 * before a memory snapshot is taken, so that a restored interpreter has them: each import reads and runs
 * modules from the standard library's zip (compiling their source where the build made no bytecode:
 * ≈ 2 s for these).
 */
const SNAPSHOT_IMPORTS =
  "import asyncio, base64, datetime, email.message, hashlib, http.client, inspect, io, json, logging, re, traceback, types, typing, " +
  "urllib.error, urllib.parse, urllib.request, urllib.response";
/**
 * The runtime's own modules, imported before the snapshot is taken (≈ 45–85 ms less per restore than
 * compiling them each time), over a stand-in for the host's module whose functions each boot puts in.
 */
const IMPORT_RUNTIME = [
  "import sys, types",
  "sys.path.insert(0, '/animaworks')",
  "sys.modules['_animaworks_host'] = types.ModuleType('_animaworks_host', 'The host capabilities, put in by each boot.')",
  "import _animaworks_runtime",
  "del sys, types",
].join("\n");
/** Growth of an interpreter's memory beyond its boot after which it is not kept warm, bytes. */
const RETIRE_GROWTH_BYTES = 32 * 2 ** 20;
/** Largest `crypto.getRandomValues` request, bytes (as in the Web Crypto API). */
const MAX_RANDOM_BYTES = 65_536;

/**
 * Run before Pyodide's modules are evaluated (they read their environment as they load): installs what
 * Pyodide's non-browser path needs, and `__awPythonBoot`, which the host calls once they are evaluated.
 */
// eslint-disable-next-line @typescript-eslint/no-unused-vars
function preparePython(global: Record<string, unknown>, readFile: (name: string) => ArrayBuffer, randomBytes: (count: number) => ArrayBuffer): void {
  const jsonParse = JSON.parse;
  const jsonStringify = JSON.stringify;
  const objectCreate = Object.create;
  const defineProperty = Object.defineProperty;
  const reflectApply = Reflect.apply;
  const uint8ArrayCtor = Uint8Array;
  const weakSetCtor = WeakSet;
  const api = global["__animaworksTool"] as ToolApiForPython;
  const wasm = global["WebAssembly"] as {
    Module: new (bytes: unknown) => object;
    Instance: new (module: object, imports: unknown) => object;
    Memory: { prototype: { grow(delta: number): number; buffer: ArrayBuffer } };
    instantiate: unknown;
    compile: unknown;
  };

  // ---- the memory cap --------------------------------------------------------------------------------
  // Tool code can reach Pyodide's memory object and redefine any getter it inherits (Memory's `buffer`,
  // ArrayBuffer's `byteLength`) or pass a `deltaPages` whose valueOf answers differently when asked again:
  // the cap reads the size through the native getters taken here, before any tool code ran, and coerces
  // the request once, so the number it checks is the number the native grow gets.
  let memoryCapBytes = BOOT_MEMORY_BYTES;
  const grow: (this: unknown, deltaPages: number) => number = wasm.Memory.prototype.grow;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const memoryBuffer = getOwnPropertyDescriptor(wasm.Memory.prototype, "buffer")!.get!;
  const bufferByteLength = getOwnPropertyDescriptor(ArrayBuffer.prototype, "byteLength")!.get!;
  const heldBytesOf = (memory: unknown): number => reflectApply(bufferByteLength, reflectApply(memoryBuffer, memory, []), []) as number;
  const bufferResizable = getOwnPropertyDescriptor(ArrayBuffer.prototype, "resizable")?.get;
  const toNumber = Number;
  defineProperty(wasm.Memory.prototype, "grow", {
    value: function (this: unknown, deltaPages: unknown): number {
      const pages = toNumber(deltaPages);
      if (!(heldBytesOf(this) + pages * WASM_PAGE_BYTES <= memoryCapBytes)) throw new RangeError("the tool's memory limit was reached");
      return reflectApply(grow, this, [pages]);
    },
  });

  // ---- what Pyodide's non-browser path needs ----------------------------------------------------------
  // Synchronous compilation: an isolate's asynchronous WebAssembly.compile settles only when the host
  // enters it again (isolated-vm), which nothing here would do.
  const instantiate = (bytes: unknown, imports: unknown) => {
    const module = bytes instanceof wasm.Module ? bytes : new wasm.Module(bytes);
    const instance = new wasm.Instance(module, imports);
    return Promise.resolve(bytes instanceof wasm.Module ? instance : { module, instance });
  };
  wasm.instantiate = instantiate;
  wasm.compile = (bytes: unknown) => Promise.resolve(new wasm.Module(bytes));
  const bootGlobals: Record<string, unknown> = {
    // Emscripten then takes its random bytes from crypto.getRandomValues (not the d8 shell's `os`).
    WorkerGlobalScope: class WorkerGlobalScope {},
    // Pyodide's "shell" path: `read`/`load` mark it, `readbuffer` reads its two files.
    read: (name: string) => new TextDecoderImpl().decode(new uint8ArrayCtor(readFile(name))),
    load: (name: string) => {
      throw new Error(`cannot load ${name}`);
    },
    readbuffer: (name: string) => readFile(name),
    // Pyodide's "call soon" (its event loop's, and its promise glue's) posts to a MessageChannel it makes as
    // it loads. Here a message is a microtask: it runs within the entry that posted it, so also in a
    // describe, which has no host timers (the prelude's setTimeout serves calls only).
    MessageChannel: class MessageChannel {
      readonly port1: { onmessage: (() => void) | null; start(): void } = { onmessage: null, start() {} };
      readonly port2 = {
        postMessage: () => {
          void Promise.resolve().then(() => this.port1.onmessage?.());
        },
      };
    },
  };
  for (const key of Object.keys(bootGlobals)) defineProperty(global, key, { value: bootGlobals[key], configurable: true, writable: true });
  const start = Date.now();
  defineProperty(global, "performance", { value: { now: () => Date.now() - start }, configurable: true, writable: true });
  defineProperty(global, "crypto", {
    value: {
      getRandomValues<T extends ArrayBufferView>(view: T): T {
        if (view.byteLength > MAX_RANDOM_BYTES) throw new RangeError(`getRandomValues: at most ${MAX_RANDOM_BYTES} bytes`);
        new uint8ArrayCtor(view.buffer, view.byteOffset, view.byteLength).set(new uint8ArrayCtor(randomBytes(view.byteLength)));
        return view;
      },
    },
    configurable: true,
    writable: true,
  });
  defineProperty(global, "TextEncoder", { value: TextEncoderImpl, configurable: true, writable: true });
  defineProperty(global, "TextDecoder", { value: TextDecoderImpl, configurable: true, writable: true });
  defineProperty(global, "__awPythonBoot", {
    configurable: true,
    value(pythonFilesJson: string, lockFileJson: string, toolMemoryBytes: number, fromSnapshot: boolean): Promise<ArrayBuffer | undefined> {
      delete global["__awPythonBoot"];
      const modules = global["__awPyodideModules"] as PyodideModules;
      delete global["__awPyodideModules"];
      return boot(modules, pythonFilesJson, lockFileJson, toolMemoryBytes, fromSnapshot);
    },
  });

  /**
   * Boots the interpreter: from the process's memory snapshot when the host has one (`fromSnapshot`: it
   * serves it as the file "snapshot"), else from scratch, and then answers a snapshot of the interpreter
   * with the standard library modules the runtime uses and the runtime's own modules already imported,
   * taken before anything of the host's (its functions come after, into `_animaworks_host`) or the tool's
   * is in it, for the host to keep for this process's next boots.
   */
  async function boot(
    modules: PyodideModules,
    pythonFilesJson: string,
    lockFileJson: string,
    toolMemoryBytes: number,
    fromSnapshot: boolean,
  ): Promise<ArrayBuffer | undefined> {
    const pyodide = await modules.loadPyodide({
      ...(fromSnapshot ? { _loadSnapshot: new uint8ArrayCtor(readFile("snapshot")) } : { _makeSnapshot: true }),
      indexURL: "/pyodide/",
      stdLibURL: "/pyodide/python_stdlib.zip",
      createPyodideModule: modules.create,
      lockFileContents: lockFileJson,
      checkAPIVersion: true,
      env: { HOME: "/home/pyodide" },
      stdout: (line: string) => api.logger["info"]!(line),
      stderr: (line: string) => api.logger["warn"]!(line),
    });
    // The runtime's own Python files: imported into the snapshot, and on every interpreter's file system
    // (tracebacks read them).
    const files = jsonParse(pythonFilesJson) as Record<string, string>;
    for (const path of Object.keys(files)) {
      pyodide.FS.mkdirTree(`/animaworks/${path.slice(0, path.lastIndexOf("/") + 1)}`);
      pyodide.FS.writeFile(`/animaworks/${path}`, files[path]!);
    }
    let snapshot: ArrayBuffer | undefined;
    if (fromSnapshot) {
      // Every interpreter restored in this process would otherwise draw the same `random` sequence.
      pyodide.runPython("import sys\nif 'random' in sys.modules:\n    sys.modules['random'].seed()");
    } else {
      pyodide.runPython(SNAPSHOT_IMPORTS);
      pyodide.runPython(IMPORT_RUNTIME);
      const bytes = (pyodide as unknown as { makeMemorySnapshot(): Uint8Array }).makeMemorySnapshot();
      // Its own buffer as it is when it holds exactly the snapshot (a copy would count twice against the heap).
      const whole = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
      snapshot = (whole ? bytes.buffer : bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)) as ArrayBuffer;
    }
    // PYTHON_BOOT_GLOBALS of src/contract/tool-globals.ts (this script is not the prelude: its constants are not
    // inlined here). WebAssembly's constructors stay reachable from the objects Pyodide keeps (its memory's
    // `constructor`), so each prototype loses that link first: nothing here can make a module or a memory.
    const wasmNamespace = global["WebAssembly"] as Record<string, { prototype?: Record<string, unknown> } | undefined>;
    for (const name of Object.getOwnPropertyNames(wasmNamespace)) {
      const prototype = wasmNamespace[name]?.prototype;
      if (prototype && Object.prototype.hasOwnProperty.call(prototype, "constructor")) delete prototype["constructor"];
    }
    for (const key of [...Object.keys(bootGlobals), "WebAssembly", "FinalizationRegistry"]) delete global[key];

    // ---- the host's side, as Python sees it (_animaworks_host) -------------------------------------------
    /** Errors the host's capabilities rejected with: only these can leave a call as the host's. */
    const hostRejections = new weakSetCtor<object>();
    let hostError: object | undefined;
    const fromHost = <T>(promise: Promise<T>): Promise<T> =>
      promise.then(undefined, (error: unknown) => {
        if (typeof error === "object" && error !== null) hostRejections.add(error);
        throw error;
      });
    // Into the stand-in the runtime's modules imported (`IMPORT_RUNTIME`): a snapshot holds no JavaScript object.
    const hostModule = pyodide.pyimport("_animaworks_host") as unknown as Record<string, unknown> & { destroy(): void };
    const hostFunctions: Record<string, unknown> = {
      log: (level: string, message: string) => (api.logger[level] ?? api.logger["info"]!)(String(message)),
      get_credential: (name: string, tool: string, key?: string | null, envVar?: string | null) =>
        fromHost(api.getCredential(String(name), String(tool), key ?? undefined, envVar ?? undefined)),
      fetch: (url: string, initJson: string, body?: { toJs?: () => unknown } | Uint8Array | null) =>
        fromHost(
          api
            .fetch(String(url), { ...(jsonParse(initJson) as Record<string, unknown>), responseType: "bytes", ...(body ? { body } : {}) })
            .then((response) => ({
              status: response.status,
              statusText: response.statusText,
              url: response.url,
              headersJson: jsonStringify(response.headers),
              body: response.body,
            })),
        ),
      progress: (fraction: number, message?: string | null) => fromHost(api.progress(fraction, message ?? undefined)),
      // The Anima's files (_animaworks_files.py): paths relative to its folder, decided by the host.
      fs_read: (path: string) => fromHost(api.fs.readFile(String(path), "bytes")),
      fs_write: (path: string, data: Uint8Array, append: boolean) =>
        fromHost(append ? api.fs.appendFile(String(path), data) : api.fs.writeFile(String(path), data)),
      fs_readdir: (path: string) => fromHost(api.fs.readdir(String(path)).then((entries) => jsonStringify(entries))),
      fs_stat: (path: string) => fromHost(api.fs.stat(String(path)).then((stat) => jsonStringify(stat))),
      fs_exists: (path: string) => fromHost(api.fs.exists(String(path))),
      fs_mkdir: (path: string, recursive: boolean) => fromHost(api.fs.mkdir(String(path), { recursive: recursive === true })),
      fs_rm: (path: string, recursive: boolean) => fromHost(api.fs.rm(String(path), { recursive: recursive === true })),
      fs_rename: (from: string, to: string) => fromHost(api.fs.rename(String(from), String(to))),
      is_cancelled: () => api.isCancelled(),
      host_error: (error: unknown) => {
        if (typeof error !== "object" || error === null || !hostRejections.has(error)) return false;
        hostError = error;
        return true;
      },
    };
    for (const name of Object.keys(hostFunctions)) hostModule[name] = hostFunctions[name];
    hostModule.destroy();

    // ---- the runtime, then the tool -----------------------------------------------------------------------
    const runtime = pyodide.pyimport("_animaworks_runtime");
    // Each property read of a Python object makes a proxy: these two are made once.
    const callTool = runtime["call"]!;
    const loadTool = runtime["load_tool"]!;
    // From here on, only what the interpreter holds now plus the tool's own limit.
    const wasmMemory = (pyodide as unknown as { _module: { memory: unknown } })._module.memory;
    const bootBytes = heldBytesOf(wasmMemory);
    memoryCapBytes = bootBytes + toolMemoryBytes;
    // An interpreter whose memory grew well past its boot keeps that memory (WebAssembly memory never
    // shrinks): it serves no further call, the next one gets a fresh interpreter. Nor does one whose
    // memory the tool made resizable (`toResizableBuffer`): that detached the buffer every Pyodide view
    // was on, and the interpreter is broken for good.
    const grownTooFar = (): boolean => {
      try {
        const buffer = reflectApply(memoryBuffer, wasmMemory, []) as ArrayBuffer;
        if (bufferResizable && reflectApply(bufferResizable, buffer, []) === true) return true;
        return (reflectApply(bufferByteLength, buffer, []) as number) > bootBytes + RETIRE_GROWTH_BYTES;
      } catch {
        return true;
      }
    };

    /** `animaDir` is given for cli_main only (a dispatch call's arguments carry their own anima_dir). */
    async function callPython(name: string, args: unknown[], animaDir?: unknown): Promise<unknown> {
      hostError = undefined;
      const given = typeof animaDir === "string" ? animaDir : null;
      const outcome = jsonParse((await callTool.callPromising(name, jsonStringify(args), given)) as string) as PythonOutcome;
      if (outcome.ok) return outcome.value;
      // A host refusal the tool let through stays the host's (its type: SandboxViolation, Timeout, …).
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the host's own error object, whatever it is
      if (outcome.host && hostError) throw hostError;
      if (outcome.config) throw new api.ToolConfigError(`${outcome.message}${outcome.where}`);
      throw new api.ToolError(`${outcome.type}: ${outcome.message}${outcome.where}`);
    }

    defineProperty(global, "__awPythonTool", {
      configurable: true,
      value(source: string, fileName: string): void {
        delete global["__awPythonTool"];
        const loaded = jsonParse(loadTool(source, fileName) as string) as PythonOutcome;
        if (!loaded.ok) throw new Error(`${loaded.type}: ${loaded.message}${loaded.where}`);
        const toolModule = objectCreate(null) as Record<string, unknown>;
        const exported = (loaded.value ?? {}) as Record<string, unknown>;
        for (const name of Object.keys(exported)) {
          if (exported[name] !== "function") toolModule[name] = exported[name];
          else if (name === "cli_main" || name === "cliMain") toolModule[name] = (argv: unknown, animaDir: unknown) => callPython(name, [argv], animaDir);
          else toolModule[name] = (...args: unknown[]) => callPython(name, args);
        }
        (global["__awRegister"] as (module: unknown, retireWhen: () => boolean) => void)(toolModule, grownTooFar);
      },
    });
    return snapshot;
  }
}
