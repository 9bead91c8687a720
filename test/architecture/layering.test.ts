import { describe, expect, it } from "vitest";
import { code, importsOf, show, sourceFiles, within } from "./source-imports.js";

/**
 * Which code may import which: imports read with simple regular expressions over the sources (as the MCP
 * TypeScript SDK's tests check theirs), comments left out. A rule broken here is a design decision to
 * make in this file, not a side effect.
 */

const SRC = sourceFiles("src");
const SANDBOX = sourceFiles("sandbox");
const IMPORTS = [...SRC, ...SANDBOX].flatMap(importsOf);

/**
 * The host ↔ isolate contract, type-checked under both tsconfigs: the one thing sandbox/ takes from src/
 * (and src/ nothing from sandbox/). It is the bottom layer: any part of src/ may import it, and it
 * imports nothing.
 */
const SHARED_CONTRACT = ["src/contract/isolate.ts", "src/contract/tool-globals.ts", "src/contract/tool-api.ts"];

/** The folder (or top-level module) of a file under src/, e.g. "cli", "host.ts". */
function unitOf(file: string): string {
  return file.split("/")[1] as string;
}

/**
 * What each part of src/ may import (besides itself and packages), in layers: each part is listed above
 * every part it may import, so this order is a topological order of the folder graph and the graph has
 * no cycle — static, type-only and dynamic imports alike (the test below holds both). Entry points on
 * top, leaf modules (errors, clock, the file lock…) at the bottom. Notes:
 *  - cli → endpoint only: the endpoint runs an invocation through the `InvocationRunner` the CLI hands
 *    it (endpoint/invocation.ts), and the thin client lives in cli/.
 *  - jobs → prepared-calls.ts, not host.ts: the job service prepares and runs calls through the host's
 *    `PreparedCallRunner`, an internal interface kept off the public `ToolHost` (host-api.ts).
 */
const MAY_IMPORT: Record<string, string[]> = {
  "index.ts": ["host.ts", "host-api.ts", "host-options.ts", "errors.ts", "jobs", "audit", "mcp"],
  cli: [
    "endpoint",
    "mcp",
    "jobs",
    "host.ts",
    "host-api.ts",
    "lifecycle",
    "audit",
    "registry",
    "isolation",
    "config.ts",
    "host-options.ts",
    // init writes the operator's settings, with their defaults, as notes in a new config.json.
    "operator-config.ts",
    "host-defaults.ts",
    "node-runtime.ts",
    "project-root.ts",
    "regular-file.ts",
    "environment.ts",
    "errors.ts",
    "terminal-text.ts",
  ],
  endpoint: [
    "prepared-calls.ts",
    "host-api.ts",
    "registry",
    "config.ts",
    "host-options.ts",
    "project-root.ts",
    "file-lock.ts",
    "environment.ts",
    "errors.ts",
    "clock.ts",
  ],
  mcp: ["jobs", "host-api.ts", "lifecycle", "execution", "registry", "errors.ts"],
  jobs: [
    "prepared-calls.ts",
    "host-api.ts",
    "registry",
    "config.ts",
    "host-options.ts",
    "node-runtime.ts",
    "project-root.ts",
    "errors.ts",
    "clock.ts",
    "byte-lru.ts",
    "process-alive.ts",
    "canonical-json.ts",
    // jobs → terminal-text.ts: a job's error and progress text (the tool's) stays inside its line of a table or notice.
    "terminal-text.ts",
  ],
  "host.ts": [
    "composition.ts",
    "anima-views.ts",
    "host-support.ts",
    "prepared-calls.ts",
    "host-api.ts",
    "audit",
    "capabilities",
    "execution",
    "isolation",
    "registry",
    "config.ts",
    "host-options.ts",
    "errors.ts",
    "clock.ts",
  ],
  "composition.ts": [
    "lifecycle",
    "prepared-calls.ts",
    "host-api.ts",
    "audit",
    "bundling",
    "capabilities",
    "credentials",
    "isolation",
    "registry",
    "config.ts",
    "host-options.ts",
    "errors.ts",
  ],
  // What each Anima sees: its tools discovered once, each loaded on first use (host.ts's views).
  "anima-views.ts": ["host-support.ts", "audit", "registry", "config.ts", "errors.ts"],
  "host-support.ts": ["host-api.ts", "registry", "errors.ts"],
  // lifecycle → source-file.ts: validate reads a tool file, and copies a draft's imports, as the bundler reads sources.
  // lifecycle → isolation: the source-checks process speaks the framed channel (isolation/wire/frames.ts).
  lifecycle: [
    "host-api.ts",
    "audit",
    "isolation",
    "capabilities",
    "policy",
    "registry",
    "config.ts",
    "host-options.ts",
    "source-file.ts",
    "project-root.ts",
    "errors.ts",
    "terminal-text.ts",
  ],
  "prepared-calls.ts": ["host-api.ts", "capabilities", "isolation", "registry", "host-options.ts"],
  "host-api.ts": ["capabilities", "audit", "isolation", "policy", "registry", "config.ts", "host-options.ts", "errors.ts"],
  capabilities: [
    "audit",
    "credentials",
    "policy",
    "isolation",
    "fs-limits.ts",
    "host-options.ts",
    "config.ts",
    // capabilities → regular-file.ts: fetch's resolver reads /etc/hosts and /etc/resolv.conf as data-dir files are read (no FIFO, bounded).
    "regular-file.ts",
    "errors.ts",
  ],
  // audit → credentials: the report lists which credential names each Anima can read (credentials/inventory.ts), never a value.
  audit: [
    "registry",
    "policy",
    "bundling",
    "isolation",
    "credentials",
    "config.ts",
    "operator-config.ts",
    "file-lock.ts",
    "process-alive.ts",
    "canonical-json.ts",
    // audit → regular-file.ts: a trail's files are read as data-dir files are (no FIFO, regular files only).
    "regular-file.ts",
    // audit → terminal-text.ts: report lines escape the line breaks of what tools wrote.
    "terminal-text.ts",
  ],
  // credentials → json-syntax.ts: a credential file's parse error says where, never quotes the file.
  credentials: ["config.ts", "host-options.ts", "regular-file.ts", "errors.ts", "json-syntax.ts"],
  execution: ["registry", "isolation", "validation", "errors.ts"],
  registry: ["bundling", "isolation", "validation", "errors.ts", "clock.ts", "terminal-text.ts"],
  // bundling → regular-file.ts: a Python tool's source is read as data-dir files are (no FIFO, bounded).
  // bundling → source-file.ts: every tool source is read by the one reader that judges the descriptor it opened.
  bundling: ["isolation", "regular-file.ts", "source-file.ts", "errors.ts", "byte-lru.ts"],
  isolation: ["config.ts", "node-runtime.ts", "project-root.ts", "errors.ts", "clock.ts", "byte-lru.ts"],
  policy: ["regular-file.ts", "errors.ts"],
  "config.ts": [
    "operator-config.ts",
    "operator-environment.ts",
    "host-defaults.ts",
    "host-options.ts",
    "fs-limits.ts",
    "project-root.ts",
    "environment.ts",
    "errors.ts",
    // config.ts → terminal-text.ts: the default log sink's lines escape what tools wrote (formatLogRecord).
    "terminal-text.ts",
  ],
  "operator-environment.ts": ["operator-config.ts", "errors.ts"],
  "operator-config.ts": ["host-defaults.ts", "host-options.ts", "fs-limits.ts", "validation", "regular-file.ts", "errors.ts", "json-syntax.ts"],
  "host-defaults.ts": ["host-options.ts", "fs-limits.ts"],
  // validation → canonical-json.ts: uniqueItems compares items by their canonical JSON (linear time).
  validation: ["canonical-json.ts"],
  "host-options.ts": ["fs-limits.ts"],
  "fs-limits.ts": [],
  "node-runtime.ts": ["project-root.ts"],
  "project-root.ts": [],
  "source-file.ts": ["regular-file.ts", "errors.ts"],
  "regular-file.ts": ["errors.ts"],
  "file-lock.ts": ["process-alive.ts"],
  "environment.ts": [],
  "errors.ts": [],
  "clock.ts": [],
  "byte-lru.ts": [],
  "process-alive.ts": [],
  "canonical-json.ts": [],
  "terminal-text.ts": [],
  "json-syntax.ts": [],
  contract: [],
};

/**
 * The rooms of src/isolation/, by the process their code runs in and what it is, and what each may
 * import of the others (besides itself). The sandbox process runs `child/` (its entry), `isolate/`
 * (isolated-vm and the isolates) and the wire; the host runs `pool/` (its handles of sandbox
 * processes), `os/` (bubblewrap, seccomp, priorities, /proc readings), `scheduling/` (placement, the
 * per-Anima queues) and `executor.ts`. The child's code never imports the host's rooms: a sandbox
 * process holds nothing of the pool's or the scheduler's state. `call-ledger.ts` runs on both sides
 * (the isolate runner keeps a call's limits in the sandbox process too): the child's entry starts its
 * runner with the in-flight limits the host holds every process to (`SANDBOX_PROCESS_IN_FLIGHT`).
 */
const ISOLATION_ROOMS: Record<string, string[]> = {
  "executor.ts": ["pool", "scheduling", "os", "isolate", "wire", "call-ledger.ts"],
  pool: ["os", "scheduling", "isolate", "wire", "call-ledger.ts"],
  scheduling: ["wire"],
  os: [],
  child: ["isolate", "wire", "call-ledger.ts"],
  isolate: ["wire", "call-ledger.ts"],
  "call-ledger.ts": ["wire"],
  wire: [],
};
const roomOf = (file: string): string => file.split("/")[2] as string;

describe("layering", () => {
  it("finds the imports it checks (the reader works)", () => {
    expect(IMPORTS.some((i) => i.from === "src/host.ts" && i.target === "src/composition.ts")).toBe(true);
    expect(IMPORTS.some((i) => i.from === "src/bundling/bundler.ts" && i.specifier === "esbuild" && i.dynamic)).toBe(true);
    expect(IMPORTS.some((i) => i.from === "src/index.ts" && i.typeOnly)).toBe(true);
    expect(IMPORTS.some((i) => i.from === "src/cli/main.ts" && i.target === "src/cli/jobs.ts" && i.dynamic)).toBe(true);
  });

  it("each part of src/ imports only the parts it may", () => {
    const unknown = [...new Set(SRC.map(unitOf))].filter((unit) => !(unit in MAY_IMPORT));
    expect(unknown, "new parts of src/: say in MAY_IMPORT what they may import").toEqual([]);
    const broken = IMPORTS.filter((i) => within(i.from, "src") && within(i.target, "src")).filter((i) => {
      const [from, to] = [unitOf(i.from), unitOf(i.target as string)];
      if (SHARED_CONTRACT.includes(i.target as string) && from !== "contract") return false;
      return from !== to && !(MAY_IMPORT[from] ?? []).includes(to);
    });
    expect(show(broken)).toEqual([]);
  });

  it("MAY_IMPORT lists each part above every part it may import (a topological order: the folder graph has no cycle)", () => {
    const order = Object.keys(MAY_IMPORT);
    const upward = order.flatMap((unit, index) =>
      (MAY_IMPORT[unit] ?? []).filter((to) => order.indexOf(to) <= index).map((to) => `${unit} may import ${to}, listed above it or unlisted`),
    );
    expect(upward).toEqual([]);
  });

  it("nothing outside src/cli imports it (the endpoint, the MCP server and the library never do)", () => {
    const broken = IMPORTS.filter((i) => within(i.target, "src/cli") && !within(i.from, "src/cli"));
    expect(show(broken)).toEqual([]);
  });

  it("each room of src/isolation/ imports only the rooms it may (the child's never the host's)", () => {
    const files = SRC.filter((file) => within(file, "src/isolation"));
    expect(
      [...new Set(files.map(roomOf))].filter((room) => !(room in ISOLATION_ROOMS)),
      "new rooms: say what they may import",
    ).toEqual([]);
    const broken = IMPORTS.filter((i) => within(i.from, "src/isolation") && within(i.target, "src/isolation")).filter((i) => {
      const [from, to] = [roomOf(i.from), roomOf(i.target as string)];
      return from !== to && !(ISOLATION_ROOMS[from] ?? []).includes(to);
    });
    expect(show(broken)).toEqual([]);
  });

  it("the contract imports nothing", () => {
    expect(show(IMPORTS.filter((i) => SHARED_CONTRACT.includes(i.from)))).toEqual([]);
  });

  it("sandbox/ and src/ share nothing but the shared contract", () => {
    const broken = IMPORTS.filter((i) => i.target !== undefined && !SHARED_CONTRACT.includes(i.target)).filter(
      (i) => (within(i.from, "sandbox") && !within(i.target, "sandbox")) || (within(i.from, "src") && within(i.target, "sandbox")),
    );
    expect(show(broken)).toEqual([]);
  });

  it("only the isolate runner imports isolated-vm (others its types), and only src/bundling/ imports esbuild", () => {
    const isolatedVm = IMPORTS.filter(
      (i) => i.specifier === "isolated-vm" && i.from !== "src/isolation/isolate/isolate-runner.ts" && !(i.typeOnly && within(i.from, "src/isolation/isolate")),
    );
    const esbuild = IMPORTS.filter((i) => (i.specifier === "esbuild" || i.specifier.startsWith("esbuild/")) && !within(i.from, "src/bundling"));
    expect(show([...isolatedVm, ...esbuild])).toEqual([]);
  });

  it("only the audit export imports the OpenTelemetry SDK, and loads it on use (its types aside): a host without a collector never does", () => {
    const otel = IMPORTS.filter((i) => i.specifier.startsWith("@opentelemetry/"));
    expect(otel.length).toBeGreaterThan(0);
    expect(show(otel.filter((i) => i.from !== "src/audit/otel-export.ts" || !(i.dynamic || i.typeOnly)))).toEqual([]);
  });

  it("the host starts no threads: work kept off its event loop runs in a process of its own (a V8 abort there ends that process only)", () => {
    const workers = IMPORTS.filter((i) => i.specifier === "node:worker_threads" || i.specifier === "worker_threads");
    expect(show(workers)).toEqual([]);
  });

  it("only src/config.ts reads process.env", () => {
    const readers = [...SRC, ...SANDBOX].filter((file) => file !== "src/config.ts" && /\bprocess\.env\b/.test(code(file)));
    expect(readers).toEqual([]);
  });

  it("hosts are wired in one place: the composition root, reached through host.ts's entry points", () => {
    const calls = (pattern: RegExp) => SRC.filter((file) => pattern.test(code(file)));
    // The host's parts are made by src/composition.ts only (each may make more of itself).
    for (const part of ["CapabilityService", "ToolRegistry", "ToolBundler", "JsonlAuditLog"]) {
      const makers = calls(new RegExp(`new ${part}\\(`)).filter((file) => file !== "src/composition.ts" && !code(file).includes(`class ${part} `));
      expect(makers, part).toEqual([]);
    }
    expect(calls(/\bcreateExecutor\(/).filter((file) => file !== "src/composition.ts" && file !== "src/isolation/executor.ts")).toEqual([]);
    expect(calls(/\bcomposeHost\(/).filter((file) => file !== "src/composition.ts" && file !== "src/host.ts")).toEqual([]);
    // A host is made by the library's entry (createHost) or the CLI's (its main hands hostFromConfig down).
    expect(calls(/\b(createHost|hostFromConfig)\(/).filter((file) => file !== "src/host.ts" && file !== "src/cli/main.ts")).toEqual([]);
    const hostImports = IMPORTS.filter((i) => i.target === "src/host.ts" && !i.typeOnly && i.from !== "src/index.ts" && i.from !== "src/cli/main.ts");
    expect(show(hostImports), "take the host's types from host-api.ts").toEqual([]);
    // A host's parts are its members, never side tables keyed by the host or its config (a copied
    // config, as a CLI invocation's view of a running host holds, would silently find nothing).
    expect(calls(/\b(?:Weak)?Map<\s*(?:HostConfig|ToolHost)\b/), "keep the part on the host: the composition root hands it over").toEqual([]);
  });

  it("no module imports itself back (static, type-only and dynamic imports alike)", () => {
    const graph = new Map<string, string[]>();
    for (const i of IMPORTS) {
      if (i.target === undefined || !within(i.from, "src")) continue;
      graph.set(i.from, [...(graph.get(i.from) ?? []), i.target]);
    }
    expect(findCycles(graph)).toEqual([]);
    // The search finds cycles, dynamic edges included.
    expect(
      findCycles(
        new Map([
          ["a", ["b"]],
          ["b", ["c"]],
          ["c", ["a"]],
        ]),
      ),
    ).toEqual(["a → b → c → a"]);
  });
});

/** Each cycle once, as `a → b → a` starting from its smallest module. */
function findCycles(graph: Map<string, string[]>): string[] {
  const cycles = new Set<string>();
  const visit = (node: string, path: string[], onPath: Set<string>, done: Set<string>): void => {
    if (onPath.has(node)) {
      const cycle = path.slice(path.indexOf(node));
      const start = cycle.indexOf([...cycle].sort()[0] as string);
      const rotated = [...cycle.slice(start), ...cycle.slice(0, start)];
      cycles.add([...rotated, rotated[0]].join(" → "));
      return;
    }
    if (done.has(node)) return;
    onPath.add(node);
    for (const next of graph.get(node) ?? []) visit(next, [...path, node], onPath, done);
    onPath.delete(node);
    done.add(node);
  };
  const done = new Set<string>();
  for (const node of [...graph.keys()].sort()) visit(node, [], new Set(), done);
  return [...cycles];
}
