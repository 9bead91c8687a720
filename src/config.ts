import { ToolHostError } from "./errors.js";
import { join, resolve } from "node:path";
import { PROJECT_ROOT } from "./project-root.js";
import { DEFAULT_FS_LIMITS, type FsLimits } from "./fs-limits.js";
import type { HostOptions, LogRecord } from "./host-options.js";
import { LOG_LEVELS } from "./contract/isolate.js";
import { type Environment, defaultDataDirIn } from "./environment.js";
import { type FileSettings, type SettingSource, SETTINGS, checkedSeconds, environmentSettings, readOperatorFile } from "./operator-config.js";

/**
 * The only module that reads `process.env`. Everything else receives a resolved `HostConfig`, made here
 * of the `HostOptions` (src/host-options.ts), the environment and the operator's config.json.
 */
export type HostConfig = Required<Omit<HostOptions, "onLog" | "fsLimits" | "environment" | "jobsUrl" | "mcpCoreTools">> & {
  /** PostgreSQL URL of the job store, or undefined for the embedded SQLite store. */
  jobsUrl: string | undefined;
  onLog: (record: LogRecord) => void;
  fsLimits: FsLimits;
  /** Only the allowed variables, snapshotted at start. */
  environment: Record<string, string>;
  /** Core tools the MCP server offers, or undefined for all. */
  mcpCoreTools: string[] | undefined;
  daemon: DaemonSettings;
  /** Where the operator's settings came from. */
  operator: {
    /** The data dir's config.json. */
    file: string;
    /** Its `animaworks_tool` section, canonical ("" without one): a running host compares it per call. */
    fingerprint: string;
    /** Per setting key (`SETTINGS`): option (flag or createHost), environment, file or default. */
    sources: Record<string, SettingSource>;
  };
};

/** This process's environment (the CLI hands it to a running host along with a call). */
export function processEnvironment(): Environment {
  return process.env;
}

/** Options of the CLI's self-starting host (the daemon). */
export interface DaemonSettings {
  /** Whether a CLI call starts a daemon when no host serves it (`daemon`; `$ANIMAWORKS_NO_DAEMON=1`: not for this run). Default: true. */
  enabled: boolean;
  /** A daemon exits after this long without a call, ms (`daemon_idle_seconds`, `$ANIMAWORKS_DAEMON_IDLE_SECONDS`). Default: 900,000 (15 min). */
  idleTimeoutMs: number;
}

/** A daemon's idle time given in seconds (by `source`, named in the error), in ms. */
export function idleTimeoutMs(text: string, source: string): number {
  return Math.round(checkedSeconds(text, source) * 1000);
}

/**
 * The environment of a background job worker that the CLI starts: this process's environment without
 * `ANIMAWORKS_ANIMA_DIR`, and with the job store of the host that starts it. A worker serves every Anima of
 * the data dir it is given with `--data-dir`; an inherited Anima dir (possibly of another data dir) would
 * only make it refuse to start.
 */
export function workerEnvironment(jobsUrl?: string): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env["ANIMAWORKS_ANIMA_DIR"];
  // The worker uses the same job store as the host that started it, however that host was told of it.
  if (jobsUrl) env["ANIMAWORKS_JOBS_URL"] = jobsUrl;
  else delete env["ANIMAWORKS_JOBS_URL"];
  return env;
}

/**
 * The host's configuration: `options` first, then (for operator settings) `env` (default: this process's
 * environment), then the data dir's config.json, then defaults. Throws `InvalidArguments` naming the key
 * or variable of a wrong operator setting, and `TypeError` for a wrong option.
 */
export function resolveConfig(options: HostOptions = {}, env: Environment = process.env): HostConfig {
  const dataDir = resolve(options.dataDir ?? defaultDataDirIn(env, process.cwd()));
  const file = readOperatorFile(dataDir);
  const fromEnv = environmentSettings(env);
  const sources: Record<string, SettingSource> = {};
  /** The value of one operator setting by precedence, noting where it came from. */
  const pick = <K extends keyof FileSettings>(field: K, option: FileSettings[K] | undefined): FileSettings[K] | undefined => {
    const key = settingName(field);
    const [source, value] =
      option !== undefined
        ? (["option", option] as const)
        : fromEnv[field] !== undefined
          ? (["environment", fromEnv[field]] as const)
          : file.settings[field] !== undefined
            ? (["file", file.settings[field]] as const)
            : (["default", undefined] as const);
    sources[key] = source;
    return value as FileSettings[K] | undefined;
  };
  const allowedEnvironment = [...(pick("allowedEnvironment", options.allowedEnvironment) ?? [])];
  const fsLimits = pick("fsLimits", options.fsLimits);
  const idleSeconds = pick("daemonIdleSeconds", undefined);
  const cordons = pick("cordons", options.cordons) ?? "anima";
  checkCordons(cordons);
  return {
    dataDir,
    coreToolsDir: resolve(options.coreToolsDir ?? join(PROJECT_ROOT, "tools")),
    cacheDir: resolve(options.cacheDir ?? join(dataDir, "cache", "animaworks-tool", "bundles")),
    timeoutMs: positive(pick("timeoutMs", options.timeoutMs), 30_000, "timeoutMs"),
    maxCallTimeoutMs: positive(pick("maxCallTimeoutMs", options.maxCallTimeoutMs), 600_000, "maxCallTimeoutMs"),
    memoryLimitMb: Math.max(8, positive(pick("memoryLimitMb", options.memoryLimitMb), 128, "memoryLimitMb")),
    loadTimeoutMs: positive(pick("loadTimeoutMs", options.loadTimeoutMs), 5_000, "loadTimeoutMs"),
    maxOutputBytes: positive(pick("maxOutputBytes", options.maxOutputBytes), 50_000, "maxOutputBytes"),
    maxResultTransferBytes: positive(pick("maxResultTransferBytes", options.maxResultTransferBytes), 1024 * 1024, "maxResultTransferBytes"),
    isolation: options.isolation ?? "process",
    cordons,
    sandboxProcesses: Math.floor(positive(pick("sandboxProcesses", options.sandboxProcesses), cordons === "all" ? 2 : 1, "sandboxProcesses")) || 1,
    maxSandboxProcesses: Math.floor(positive(pick("maxSandboxProcesses", options.maxSandboxProcesses), 64, "maxSandboxProcesses")) || 1,
    spareSandboxProcesses: Math.floor(pick("spareSandboxProcesses", options.spareSandboxProcesses) ?? (cordons === "all" ? 0 : 1)),
    osSandbox: osSandboxMode(pick("osSandbox", options.osSandbox) ?? "auto"),
    warmIsolatesMb: positive(pick("warmIsolatesMb", options.warmIsolatesMb), defaultWarmIsolatesMb(), "warmIsolatesMb"),
    maxIdleIsolates: positive(pick("maxIdleIsolates", options.maxIdleIsolates), Number.POSITIVE_INFINITY, "maxIdleIsolates"),
    isolateSnapshot: pick("isolateSnapshot", options.isolateSnapshot) ?? true,
    maxConcurrentCallsPerAnima:
      Math.floor(positive(pick("maxConcurrentCallsPerAnima", options.maxConcurrentCallsPerAnima), 8, "maxConcurrentCallsPerAnima")) || 1,
    maxQueuedCallsPerAnima: Math.floor(positive(pick("maxQueuedCallsPerAnima", options.maxQueuedCallsPerAnima), 1_000, "maxQueuedCallsPerAnima")) || 1,
    maxLogLinesPerCall: positive(pick("maxLogLinesPerCall", options.maxLogLinesPerCall), 200, "maxLogLinesPerCall"),
    maxLogLineChars: positive(pick("maxLogLineChars", options.maxLogLineChars), 2_000, "maxLogLineChars"),
    ...logSettings(pick("logLevel", options.logLevel), options.onLog ?? writeLogToStderr),
    allowedEnvironment,
    environment: environmentSnapshot(allowedEnvironment, options.environment ?? env),
    auditFile: resolve(options.auditFile ?? join(dataDir, "logs", "animaworks-tool", "audit.jsonl")),
    allowInternalHosts: [...(pick("allowInternalHosts", options.allowInternalHosts) ?? [])],
    fsLimits: { ...DEFAULT_FS_LIMITS, ...fsLimits },
    watch: options.watch ?? false,
    jobsUrl: jobsUrl(pick("jobsUrl", options.jobsUrl)),
    mcpCoreTools: pick("mcpCoreTools", options.mcpCoreTools),
    daemon: { enabled: pick("daemon", undefined) ?? true, idleTimeoutMs: idleSeconds === undefined ? 900_000 : Math.round(idleSeconds * 1000) },
    operator: { file: file.path, fingerprint: file.fingerprint, sources },
  };
}

/** An Anima belongs to one cordon: a setting that puts one in two groups is refused (src/isolation/scheduling/cordons.ts). */
function checkCordons(cordons: NonNullable<HostOptions["cordons"]>): void {
  if (typeof cordons === "string") {
    // The type says "anima" | "all", but the value may come from a library caller's untyped options.
    const named: string = cordons;
    if (named !== "anima" && named !== "all")
      throw new ToolHostError("InvalidArguments", `cordons: "${named}" is not "anima", "all" or an object of named groups`);
    return;
  }
  const groupOf = new Map<string, string>();
  for (const [group, animas] of Object.entries(cordons)) {
    for (const anima of animas) {
      const earlier = groupOf.get(anima);
      if (earlier !== undefined && earlier !== group) {
        throw new ToolHostError(
          "InvalidArguments",
          `cordons: Anima "${anima}" is in both "${earlier}" and "${group}"`,
          "an Anima belongs to one cordon; list it in one group only",
        );
      }
      groupOf.set(anima, group);
    }
  }
}

function logSettings(level: string | undefined, sink: (record: LogRecord) => void): { logLevel: LogRecord["level"]; onLog: (record: LogRecord) => void } {
  const logLevel = checkedLogLevel(level);
  return { logLevel, onLog: atLeast(logLevel, sink) };
}

/**
 * The first setting in which two configurations differ that a run can set by itself (its data dir, and
 * the settings with a flag or variable, including the values of the variables tools may read), as a
 * phrase naming it, never a value (values may be secrets); or undefined. The settings only config.json
 * or the library sets are compared as the file's fingerprint (`operator.fingerprint`); the log level is
 * each run's own.
 */
export function settingDifference(wanted: HostConfig, running: HostConfig): string | undefined {
  const perRun = SETTINGS.filter((spec) => spec.env !== undefined && spec.key !== "log_level" && spec.key !== "daemon_idle_seconds").map((spec) => spec.field);
  const canonical = (value: unknown): string => JSON.stringify(Array.isArray(value) ? [...(value as unknown[])].sort() : value) ?? "";
  for (const field of ["dataDir", ...perRun] as Array<keyof HostConfig>) {
    if (canonical(wanted[field]) !== canonical(running[field])) return `its ${settingName(field)} differs`;
  }
  const names = new Set([...Object.keys(wanted.environment), ...Object.keys(running.environment)]);
  for (const name of names) {
    if (wanted.environment[name] !== running.environment[name]) return `the environment variable ${name} (allowed for getCredential) differs`;
  }
  return undefined;
}

function settingName(field: string): string {
  return SETTINGS.find((spec) => spec.field === field)?.key ?? field;
}

/** One sixth of the machine's memory, between 256 and 8,192 MB (see `HostOptions.warmIsolatesMb`). */
function defaultWarmIsolatesMb(): number {
  const machineMb = process.getBuiltinModule("node:os").totalmem() / 2 ** 20;
  return Math.round(Math.min(8_192, Math.max(256, machineMb / 6)));
}

/** The allowed variables only: nothing else of the host's environment is ever handed on. */
function environmentSnapshot(allowed: string[], source: Environment): Record<string, string> {
  const snapshot: Record<string, string> = {};
  for (const name of allowed) {
    const value = Object.hasOwn(source, name) ? source[name] : undefined;
    if (typeof value === "string") snapshot[name] = value;
  }
  return snapshot;
}

/** A job store URL must be a postgres:// (or postgresql://) URL; the message never repeats a password. */
function jobsUrl(value: string | undefined): string | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  let protocol = "";
  try {
    protocol = new URL(value).protocol;
  } catch {
    // reported below
  }
  if (protocol !== "postgres:" && protocol !== "postgresql:") {
    throw new ToolHostError(
      "InvalidArguments",
      "the job store URL (--jobs-url, $ANIMAWORKS_JOBS_URL or jobs_url in config.json) must be a postgres:// URL",
      "e.g. postgres://user@db.example:5432/animaworks",
    );
  }
  return value.trim();
}

function osSandboxMode(value: string): "auto" | "required" | "off" {
  if (value === "auto" || value === "required" || value === "off") return value;
  throw new TypeError(`osSandbox must be "auto", "required" or "off", got ${JSON.stringify(value)}`);
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) {
    throw new TypeError(`${name} must be a positive number, got ${String(value)}`);
  }
  return value;
}

function checkedLogLevel(value: string | undefined): LogRecord["level"] {
  const level = value?.trim().toLowerCase() || "info";
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new ToolHostError(
      "InvalidArguments",
      `the log level (log_level in config.json or $ANIMAWORKS_LOG_LEVEL) must be debug, info, warn or error, not ${JSON.stringify(value)}`,
    );
  }
  return level as LogRecord["level"];
}

/** `sink`, given only the lines at `level` or above. */
function atLeast(level: LogRecord["level"], sink: (record: LogRecord) => void): (record: LogRecord) => void {
  const least = LOG_LEVELS.indexOf(level);
  return least === 0 ? sink : (record) => LOG_LEVELS.indexOf(record.level) >= least && sink(record);
}

function writeLogToStderr(record: LogRecord): void {
  process.stderr.write(`${formatLogRecord(record)}\n`);
}

/** One log line as the default sink writes it: `[level] logger (anima/tool): message`. */
export function formatLogRecord(record: LogRecord): string {
  const who = [record.anima, record.tool].filter(Boolean).join("/");
  return `[${record.level}] ${record.logger}${who ? ` (${who})` : ""}: ${record.message}`;
}
