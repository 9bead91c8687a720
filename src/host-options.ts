import type { FsLimits } from "./fs-limits.js";
import type { LogLevel } from "./contract/isolate.js";

/**
 * What a host is made of (`createHost(options)`, the CLI's flags): a types-only leaf module, so that
 * the configuration (src/config.ts, which resolves these to a `HostConfig`) and the operator's file
 * settings (src/operator-config.ts, a subset of them) both depend on it and not on each other.
 *
 * Every option is listed with its default and unit; the values themselves are `HOST_DEFAULTS`
 * (src/host-defaults.ts), the one place code takes them from. Each option an operator sets
 * (src/operator-config.ts lists them with their keys in the data dir's config.json and their variables)
 * is taken from, in this order: the option given here (a flag of the CLI), its environment variable, the
 * `animaworks_tool` section of `{dataDir}/config.json`, the default.
 */
export interface HostOptions {
  /** Data dir. Default: `$ANIMAWORKS_DATA_DIR`, else `~/.animaworks`. */
  dataDir?: string;
  /** Folder of core tools. Default: the project's `tools/`. */
  coreToolsDir?: string;
  /** Where tool bundles are cached. Default: `{dataDir}/cache/animaworks-tool/bundles`. */
  cacheDir?: string;
  /** Default per-call timeout in milliseconds. Default: 30,000. */
  timeoutMs?: number;
  /** Upper bound on any call's timeout, whatever the tool's profile asks for, in ms. Default: 600,000. */
  maxCallTimeoutMs?: number;
  /** Per-isolate V8 heap limit in MB. Default: 128 (isolated-vm's minimum is 8). */
  memoryLimitMb?: number;
  /** Timeout for loading a tool (running its top level and `get_tool_schemas`), ms. Default: 5,000. */
  loadTimeoutMs?: number;
  /** Result text cap in UTF-8 bytes before the truncation notice. Default: 50,000 (docs/design.md §3). */
  maxOutputBytes?: number;
  /** Hard cap on the serialised result a tool may hand back, in bytes; larger is cut inside the isolate. Default: 1,048,576 (1 MiB). */
  maxResultTransferBytes?: number;
  /**
   * Where isolates run. `"process"`: supervised sandbox processes (a native crash fails only the calls in
   * flight there). `"in-process"`: inside this process (fast start; for one-shot CLI calls). Default: "process".
   */
  isolation?: "process" | "in-process";
  /**
   * How Animas are grouped into cordons (src/isolation/scheduling/cordons.ts): a sandbox process runs the
   * code of one cordon only, for its whole life. `"anima"`: each Anima a cordon of its own. `"all"`: all
   * Animas in one (they share processes: an isolate escape reaches all of them). An object names groups
   * of Animas that trust each other, `{ "team": ["alice", "bob"] }`; every other Anima is a cordon of its
   * own. Default: "anima".
   */
  cordons?: "anima" | "all" | Record<string, string[]>;
  /** Normal sandbox processes per cordon. Default: 2 when all Animas share one cordon, else 1. */
  sandboxProcesses?: number;
  /**
   * Sandbox processes alive at most, spares, retiring and demoted ones included (an idle one holds ≈ 50
   * MB): beyond it, the cordon least recently used without a call in flight has its processes ended, and
   * a slot replacing a process still alive waits for it. Default: 64.
   */
  maxSandboxProcesses?: number;
  /** Blank sandbox processes kept started for the first call of a new cordon. Default: 1 (0 with `cordons: "all"`). */
  spareSandboxProcesses?: number;
  /**
   * The OS sandbox around sandbox processes (bubblewrap; see src/isolation/os/os-sandbox.ts). `"auto"`: used
   * when bwrap is installed and works, else the host runs without it and says so in its log and in
   * `audit`. `"required"`: the host refuses to start without it. `"off"`: never. Default:
   * `$ANIMAWORKS_OS_SANDBOX`, else "auto". Only for `isolation: "process"`.
   */
  osSandbox?: "auto" | "required" | "off";
  /**
   * Memory the idle warm isolates of the host may hold in all, MB, split evenly over the sandbox
   * processes; the least recently used beyond it are disposed (a call then builds a fresh isolate). Each
   * isolate counts what V8 holds for it: ≈ 1.8 MB for a small tool, ≈ 0.5 MB more for each further tool
   * of the same Anima it holds (`toolsPerIsolate`). Default: one sixth of the machine's memory, between
   * 256 and 8,192 MB (4,096 MB on a 24 GiB machine: ≈ 2,200 small tools warm, more with sharing).
   */
  warmIsolatesMb?: number;
  /** Idle warm isolates kept per sandbox process at most, whatever their size. Default: no limit (`warmIsolatesMb` decides). */
  maxIdleIsolates?: number;
  /**
   * Whether a process makes its isolates from a V8 startup snapshot holding the installed prelude (made
   * on its third isolate; ≈ 0.4 ms saved per new isolate). isolated-vm calls `createSnapshot` unstable
   * across V8 versions: `false` runs the prelude in each new context instead. Default: true.
   */
  isolateSnapshot?: boolean;
  /**
   * How long an isolate is idle in a sandbox process's warm pool before the process compacts it, ms: a
   * full collection in the isolate that gives back the memory its calls left (a tool that parses 230 KB
   * of JSON: 5.3 → 2.1 MB resident while idle), paid by its next call, which commits those pages again
   * (+3 ms for that tool; +0.03 ms for a small one). 0 never compacts; isolation "in-process" never
   * does. Default: 30,000 (longer than a model's usual turn between one Anima's calls).
   */
  compactIdleIsolatesAfterMs?: number;
  /**
   * Tools of one Anima (JavaScript tools at one memory limit) whose contexts one idle warm isolate may
   * hold, each with its own global: a further small tool of an Anima then costs ≈ 0.3 MB resident instead
   * of a new isolate's ≈ 1.5 MB. The price, within the Anima: a stop or the memory limit of one tool ends
   * the warm contexts of all, and one's heap counts against the others' memory limit while it is held (an
   * isolate holding more than 8 MiB of heap takes no further tool). An isolate is shared only while idle,
   * never across Animas, never by Python tools. 1: an isolate per tool. Default: 4.
   */
  toolsPerIsolate?: number;
  /**
   * Idle Python interpreters a sandbox process keeps warm for the Python tools it ran (each ≈ 130–190 MB
   * resident: WebAssembly memory, which no isolate's limit counts), least recently used disposed first;
   * 0 keeps none, so every Python call restores an interpreter (≈ 0.5 s). Default: 2.
   */
  warmPythonInterpreters?: number;
  /**
   * Whether a sandbox process that ran a Python tool keeps one booted interpreter holding no tool ready,
   * so that the next Python tool's first call there takes ≈ 20 ms instead of ≈ 0.5 s (≈ 130 MB more per
   * such process). Default: true.
   */
  sparePythonInterpreter?: boolean;
  /**
   * Direct calls of one Anima running at once while another Anima has calls in flight; further calls of
   * that Anima wait in its queue (an Anima alone on the host is not held back). Default: 8.
   */
  maxConcurrentCallsPerAnima?: number;
  /** Calls of one Anima waiting for a turn; beyond it a call fails at once with `Busy`. Default: 1,000. */
  maxQueuedCallsPerAnima?: number;
  /**
   * Where background jobs are kept: a `postgres://user:password@host:port/database` URL puts them in
   * PostgreSQL, shared by workers on many machines (which also share the data dir, e.g. over NFS).
   * Default: `$ANIMAWORKS_JOBS_URL`, else the embedded SQLite file in the data dir.
   */
  jobsUrl?: string;
  /** Log lines a single call may emit before further lines are dropped. Default: 200. */
  maxLogLinesPerCall?: number;
  /** Longest log line kept, in characters; longer lines are cut. Default: 2,000. */
  maxLogLineChars?: number;
  /** Receives log lines from tools and host warnings. Default: write to stderr. */
  onLog?: (record: LogRecord) => void;
  /** Least level of the lines `onLog` receives: "debug", "info", "warn" or "error". Default: "info". */
  logLevel?: LogRecord["level"];
  /**
   * Environment variables `getCredential` may fall back to (by exact name). The host's environment is
   * otherwise invisible to tools. Default: none.
   */
  allowedEnvironment?: string[];
  /** Values for `allowedEnvironment`. Default: read from this process's environment. */
  environment?: Record<string, string>;
  /**
   * Audit log folder: chained JSON-lines trails, one pair per Anima and one for the host, each rotated on its
   * own (audit/jsonl-audit-log.ts). Default: `{dataDir}/logs/animaworks-tool/audit`.
   */
  auditDir?: string;
  /**
   * An OpenTelemetry collector that gets a copy of every audit record the host writes, as OTLP/HTTP log
   * records (audit/otel-export.ts; docs/audit-records.md): the collector's URL (`http://collector:4318`,
   * to which `/v1/logs` is added, or the full URL of its logs path). The export never delays or fails a
   * call; the trail on disk stays the record. Default: `$ANIMAWORKS_AUDIT_OTLP_ENDPOINT`, else none.
   */
  auditOtlpEndpoint?: string;
  /**
   * Hosts (names, IPs or CIDRs) that tools may reach although they are private or loopback, e.g. an
   * internal API. Default: `$ANIMAWORKS_ALLOW_INTERNAL_HOSTS` (comma-separated), else none.
   */
  allowInternalHosts?: string[];
  /**
   * Watch `common_tools/` and every Anima's `tools/` and reload changed tools by themselves (for
   * long-running hosts). Calls in flight finish on the version they started with. Default: false.
   */
  watch?: boolean;
  /** File-capability limits (bytes, counts; see src/capabilities/fs.ts). Default: DEFAULT_FS_LIMITS. */
  fsLimits?: Partial<FsLimits>;
  /** Core tools the MCP server offers, by name. Default: every core tool. */
  mcpCoreTools?: string[];
  /**
   * Test seam, not a setting: a script every sandbox process of the host runs instead of its entry, under
   * the very same launch (bubblewrap, seccomp, empty environment, descriptors), so that a test can put a
   * compromised sandbox process behind a real host's doors (the daemon, the MCP server:
   * test/security/compromised-doors-*.test.ts). Only code that makes a host sets it: no flag, variable or
   * config.json key does (src/operator-config.ts does not list it), so neither a tool nor a data dir can.
   * `isolation: "process"` only. Default: the real entry (src/isolation/child/main.ts).
   */
  sandboxEntryScript?: string;
}

export interface LogRecord {
  level: LogLevel;
  /** Logger name: `animaworks.tools` for tool lines, `animaworks.host` for the host's own. */
  logger: string;
  message: string;
  anima?: string;
  tool?: string;
}
