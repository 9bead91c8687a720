import type { HostOptions } from "./host-options.js";
import { DEFAULT_FS_LIMITS } from "./fs-limits.js";

/**
 * Every default of a host's options (`HostOptions`, and the daemon's `DaemonSettings`), in one place, as
 * `JOB_DEFAULTS` (src/jobs/defaults.ts) holds those of background jobs. An option that is not given (by the
 * caller, its environment variable or config.json; src/config.ts resolves them) takes the value here; the
 * few that depend on another setting are functions of it. Units are in the names (Ms, Mb, Bytes, Chars).
 * Each option's own documentation names its default and refers here; the paths (data dir, caches, the
 * audit file) derive from the data dir and are resolved in src/config.ts.
 */
export const HOST_DEFAULTS = {
  // ---- a call ----------------------------------------------------------------------------------------
  /** Per-call timeout when neither the caller nor the action's profile gives one: 30,000 ms. */
  timeoutMs: 30_000,
  /** Upper bound on any direct call's timeout, whatever the tool's profile asks for: 600,000 ms (10 min). */
  maxCallTimeoutMs: 600_000,
  /** Time to load a tool (its top level and `get_tool_schemas`): 5,000 ms. */
  loadTimeoutMs: 5_000,
  /** V8 heap limit per isolate: 128 MB (at least `MIN_MEMORY_LIMIT_MB`). */
  memoryLimitMb: 128,
  /** Result text kept before the truncation notice: 50,000 UTF-8 bytes (docs/design.md §3). */
  maxOutputBytes: 50_000,
  /** Largest serialised result a tool hands back (cut inside the isolate): 1,048,576 bytes (1 MiB). */
  maxResultTransferBytes: 1_048_576,
  /** Log lines one call may emit before further lines are dropped: 200. */
  maxLogLinesPerCall: 200,
  /** Longest log line kept: 2,000 characters (longer lines are cut). */
  maxLogLineChars: 2_000,
  /** Least level of the lines `onLog` receives: "info". */
  logLevel: "info",
  /** File-capability limits (bytes, counts): `DEFAULT_FS_LIMITS` (src/fs-limits.ts). */
  fsLimits: DEFAULT_FS_LIMITS,

  // ---- where isolates run ------------------------------------------------------------------------------
  /** Supervised sandbox processes: "process" ("in-process" runs isolates in the host's own process). */
  isolation: "process",
  /** Each Anima a cordon of its own: "anima". */
  cordons: "anima",
  /** Normal sandbox processes per cordon: 2 when all Animas share one cordon, else 1. */
  sandboxProcesses: (cordons: NonNullable<HostOptions["cordons"]>): number => (cordons === "all" ? 2 : 1),
  /** Sandbox processes alive at most, spares included (≈ 50 MB each idle): 64. */
  maxSandboxProcesses: 64,
  /** Blank sandbox processes kept started for a new cordon's first call: 1 (0 when all Animas share one cordon). */
  spareSandboxProcesses: (cordons: NonNullable<HostOptions["cordons"]>): number => (cordons === "all" ? 0 : 1),
  /** The OS sandbox (bubblewrap) around sandbox processes: "auto" (used when it works). */
  osSandbox: "auto",
  /**
   * Memory all idle warm isolates may hold: one sixth of the machine's memory, between 256 and 8,192 MB
   * (4,096 MB on a 24 GiB machine).
   */
  warmIsolatesMb: (machineMemoryMb: number): number => Math.round(Math.min(8_192, Math.max(256, machineMemoryMb / 6))),
  /** Idle warm isolates per sandbox process: no limit (`warmIsolatesMb` decides). */
  maxIdleIsolates: Number.POSITIVE_INFINITY,
  /** Isolates made from a V8 startup snapshot of the prelude: true. */
  isolateSnapshot: true,
  /** An idle isolate is compacted after, ms: 30,000. */
  compactIdleIsolatesAfterMs: 30_000,
  /** Tools of one Anima whose contexts one idle warm isolate may hold: 4. */
  toolsPerIsolate: 4,
  /** Idle Python interpreters kept warm per sandbox process: 2. */
  warmPythonInterpreters: 2,
  /** A booted Python interpreter kept ready in a process that ran a Python tool: true. */
  sparePythonInterpreter: true,
  /** Direct calls of one Anima running at once while another Anima has calls in flight: 8. */
  maxConcurrentCallsPerAnima: 8,
  /** Calls of one Anima waiting for a turn before one fails with `Busy`: 1,000. */
  maxQueuedCallsPerAnima: 1_000,

  // ---- a long-running host -------------------------------------------------------------------------
  /** Reload changed tools by themselves (watch the tool folders): false. */
  watch: false,
  /** CLI calls start a daemon when no host serves them: true. */
  daemon: true,
  /** A daemon exits after this long without a call: 900,000 ms (15 min). */
  daemonIdleTimeoutMs: 900_000,
} as const;

/** The smallest V8 heap limit isolated-vm accepts for an isolate, MB: a smaller `memoryLimitMb` is raised to it. */
export const MIN_MEMORY_LIMIT_MB = 8;

/**
 * The largest V8 heap limit per isolate, MB: the memory a sandbox process may hold beyond its warm pool
 * (`DEFAULT_PROCESS_MEMORY_MB`, isolation/os/resource-watchdog.ts; a test keeps the two equal). A larger
 * heap would be stopped by the watchdog killing the process (SandboxCrashed, every call on it failing),
 * never by the isolate's `MemoryLimit` that names the tool; and isolated-vm refuses a limit beyond what a
 * number of bytes can hold (`memory_limit_mb: 1e300` failed every call with "must be at least 8").
 */
export const MAX_MEMORY_LIMIT_MB = 1_024;

/**
 * The largest value of a setting in ms (a timeout, an idle time): 2,000,000,000 (≈ 23 days). Node's
 * timers take at most 2,147,483,647 ms and fire a longer one after 1 ms (a TimeoutOverflowWarning, and a
 * "did not finish within 3000000000 ms" that blamed the tool at once); the margin leaves room for what the
 * host adds to a timeout before it sets a timer (a Python tool's 30 s boot, the kill grace of a sandbox
 * process that does not answer).
 */
export const MAX_SETTING_MS = 2_000_000_000;
