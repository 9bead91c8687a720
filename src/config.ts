import { ToolHostError } from "./errors.js";
import { join, resolve } from "node:path";
import { PROJECT_ROOT } from "./project-root.js";
import type { FsLimits } from "./fs-limits.js";
import { HOST_DEFAULTS, MAX_MEMORY_LIMIT_MB, MAX_SETTING_MS, MIN_MEMORY_LIMIT_MB } from "./host-defaults.js";
import type { HostOptions, LogRecord } from "./host-options.js";
import { LOG_LEVELS } from "./contract/isolate.js";
import { type Environment, defaultDataDirIn } from "./environment.js";
import { CONFIG_SECTION, type FileSettings, type SettingSource, SETTINGS, configFileError, readOperatorFile } from "./operator-config.js";
import { checkedSeconds, environmentSettings } from "./operator-environment.js";
import { logLineName, logLineText } from "./terminal-text.js";

/**
 * The only module that reads `process.env`. Everything else receives a resolved `HostConfig`, made here
 * of the `HostOptions` (src/host-options.ts), the environment and the operator's config.json.
 */
export type HostConfig = Required<
  Omit<HostOptions, "onLog" | "fsLimits" | "environment" | "jobsUrl" | "mcpCoreTools" | "sandboxEntryScript" | "auditOtlpEndpoint">
> & {
  /** PostgreSQL URL of the job store, or undefined for the embedded SQLite store. */
  jobsUrl: string | undefined;
  onLog: (record: LogRecord) => void;
  fsLimits: FsLimits;
  /** Only the allowed variables, snapshotted at start. */
  environment: Record<string, string>;
  /** Core tools the MCP server offers, or undefined for all. */
  mcpCoreTools: string[] | undefined;
  /** The OpenTelemetry collector's OTLP/HTTP logs URL that audit records are copied to, or undefined for none. */
  auditOtlpEndpoint: string | undefined;
  /** A test's stand-in for the sandbox processes' entry (`HostOptions.sandboxEntryScript`), or undefined. Never read from the environment or a file. */
  sandboxEntryScript: string | undefined;
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
  /** A daemon exits after this long without a call, ms (`daemon_idle_seconds`, `$ANIMAWORKS_DAEMON_IDLE_SECONDS`). Default: 900,000 (15 min; `HOST_DEFAULTS`). */
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
 * environment), then the data dir's config.json, then defaults. Throws `InvalidArguments` naming the
 * variable or option of a wrong operator setting, `ToolConfigError` naming the key when it came from
 * config.json (the operator's file), and `TypeError` for a wrong option.
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
  /** The error for a wrong value of `field`, by who set it (read once `pick` chose it). */
  const refuse =
    (field: keyof FileSettings): Refusal =>
    (message, hint) =>
      settingError(sources[settingName(field)], settingName(field), file.path, message, hint);
  const allowedEnvironment = [...(pick("allowedEnvironment", options.allowedEnvironment) ?? [])];
  const fsLimits = pick("fsLimits", options.fsLimits);
  const idleSeconds = pick("daemonIdleSeconds", undefined);
  const d = HOST_DEFAULTS;
  const cordons = pick("cordons", options.cordons) ?? d.cordons;
  checkCordons(cordons, refuse("cordons"));
  return {
    dataDir,
    coreToolsDir: resolve(options.coreToolsDir ?? join(PROJECT_ROOT, "tools")),
    cacheDir: resolve(options.cacheDir ?? join(dataDir, "cache", "animaworks-tool", "bundles")),
    // Durations and the heap limit are bounded (host-defaults.ts) in options as in config.json (its schema).
    timeoutMs: positive(pick("timeoutMs", options.timeoutMs), d.timeoutMs, "timeoutMs", MAX_SETTING_MS),
    maxCallTimeoutMs: positive(pick("maxCallTimeoutMs", options.maxCallTimeoutMs), d.maxCallTimeoutMs, "maxCallTimeoutMs", MAX_SETTING_MS),
    memoryLimitMb: Math.max(MIN_MEMORY_LIMIT_MB, positive(pick("memoryLimitMb", options.memoryLimitMb), d.memoryLimitMb, "memoryLimitMb", MAX_MEMORY_LIMIT_MB)),
    loadTimeoutMs: positive(pick("loadTimeoutMs", options.loadTimeoutMs), d.loadTimeoutMs, "loadTimeoutMs", MAX_SETTING_MS),
    maxOutputBytes: positive(pick("maxOutputBytes", options.maxOutputBytes), d.maxOutputBytes, "maxOutputBytes"),
    maxResultTransferBytes: positive(pick("maxResultTransferBytes", options.maxResultTransferBytes), d.maxResultTransferBytes, "maxResultTransferBytes"),
    isolation: options.isolation ?? d.isolation,
    cordons,
    sandboxProcesses: Math.floor(positive(pick("sandboxProcesses", options.sandboxProcesses), d.sandboxProcesses(cordons), "sandboxProcesses")) || 1,
    maxSandboxProcesses: Math.floor(positive(pick("maxSandboxProcesses", options.maxSandboxProcesses), d.maxSandboxProcesses, "maxSandboxProcesses")) || 1,
    spareSandboxProcesses: Math.floor(pick("spareSandboxProcesses", options.spareSandboxProcesses) ?? d.spareSandboxProcesses(cordons)),
    osSandbox: osSandboxMode(pick("osSandbox", options.osSandbox) ?? d.osSandbox),
    warmIsolatesMb: positive(pick("warmIsolatesMb", options.warmIsolatesMb), d.warmIsolatesMb(machineMemoryMb()), "warmIsolatesMb"),
    maxIdleIsolates: positive(pick("maxIdleIsolates", options.maxIdleIsolates), d.maxIdleIsolates, "maxIdleIsolates"),
    isolateSnapshot: pick("isolateSnapshot", options.isolateSnapshot) ?? d.isolateSnapshot,
    compactIdleIsolatesAfterMs: nonNegative(
      pick("compactIdleIsolatesAfterMs", options.compactIdleIsolatesAfterMs),
      d.compactIdleIsolatesAfterMs,
      "compactIdleIsolatesAfterMs",
      MAX_SETTING_MS,
    ),
    toolsPerIsolate: Math.floor(positive(pick("toolsPerIsolate", options.toolsPerIsolate), d.toolsPerIsolate, "toolsPerIsolate")) || 1,
    warmPythonInterpreters: Math.floor(
      nonNegative(pick("warmPythonInterpreters", options.warmPythonInterpreters), d.warmPythonInterpreters, "warmPythonInterpreters"),
    ),
    sparePythonInterpreter: pick("sparePythonInterpreter", options.sparePythonInterpreter) ?? d.sparePythonInterpreter,
    maxConcurrentCallsPerAnima:
      Math.floor(
        positive(pick("maxConcurrentCallsPerAnima", options.maxConcurrentCallsPerAnima), d.maxConcurrentCallsPerAnima, "maxConcurrentCallsPerAnima"),
      ) || 1,
    maxQueuedCallsPerAnima:
      Math.floor(positive(pick("maxQueuedCallsPerAnima", options.maxQueuedCallsPerAnima), d.maxQueuedCallsPerAnima, "maxQueuedCallsPerAnima")) || 1,
    maxLogLinesPerCall: positive(pick("maxLogLinesPerCall", options.maxLogLinesPerCall), d.maxLogLinesPerCall, "maxLogLinesPerCall"),
    maxLogLineChars: positive(pick("maxLogLineChars", options.maxLogLineChars), d.maxLogLineChars, "maxLogLineChars"),
    ...logSettings(pick("logLevel", options.logLevel), options.onLog ?? writeLogToStderr, refuse("logLevel")),
    allowedEnvironment,
    environment: environmentSnapshot(allowedEnvironment, options.environment ?? env),
    auditDir: resolve(options.auditDir ?? join(dataDir, "logs", "animaworks-tool", "audit")),
    allowInternalHosts: [...(pick("allowInternalHosts", options.allowInternalHosts) ?? [])],
    fsLimits: { ...d.fsLimits, ...fsLimits },
    watch: options.watch ?? d.watch,
    jobsUrl: jobsUrl(pick("jobsUrl", options.jobsUrl), refuse("jobsUrl")),
    mcpCoreTools: pick("mcpCoreTools", options.mcpCoreTools),
    auditOtlpEndpoint: otlpLogsUrl(pick("auditOtlpEndpoint", options.auditOtlpEndpoint), refuse("auditOtlpEndpoint")),
    sandboxEntryScript: options.sandboxEntryScript,
    daemon: {
      enabled: pick("daemon", undefined) ?? d.daemon,
      idleTimeoutMs: idleSeconds === undefined ? d.daemonIdleTimeoutMs : Math.round(idleSeconds * 1000),
    },
    operator: { file: file.path, fingerprint: file.fingerprint, sources },
  };
}

/** An Anima belongs to one cordon: a setting that puts one in two groups is refused (src/isolation/scheduling/cordons.ts). */
function checkCordons(cordons: NonNullable<HostOptions["cordons"]>, refuse: Refusal): void {
  if (typeof cordons === "string") {
    // The type says "anima" | "all", but the value may come from a library caller's untyped options.
    const named: string = cordons;
    if (named !== "anima" && named !== "all") throw refuse(`cordons: "${named}" is not "anima", "all" or an object of named groups`);
    return;
  }
  const groupOf = new Map<string, string>();
  for (const [group, animas] of Object.entries(cordons)) {
    for (const anima of animas) {
      const earlier = groupOf.get(anima);
      if (earlier !== undefined && earlier !== group) {
        throw refuse(`cordons: Anima "${anima}" is in both "${earlier}" and "${group}"`, "an Anima belongs to one cordon; list it in one group only");
      }
      groupOf.set(anima, group);
    }
  }
}

function logSettings(
  level: string | undefined,
  sink: (record: LogRecord) => void,
  refuse: Refusal,
): { logLevel: LogRecord["level"]; onLog: (record: LogRecord) => void } {
  const logLevel = checkedLogLevel(level, refuse);
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

/** Makes the error for a wrong setting value (see `settingError`). */
type Refusal = (message: string, hint?: string) => ToolHostError;

/**
 * A wrong setting value: from config.json it is the operator's to fix (`ToolConfigError`, its hint naming
 * the file and the key); from a flag, an option or the environment of this run, the caller's.
 */
function settingError(source: SettingSource | undefined, key: string, file: string, message: string, hint?: string): ToolHostError {
  if (source !== "file") return new ToolHostError("InvalidArguments", message, hint);
  return configFileError(message, `fix "${key}" in the "${CONFIG_SECTION}" section of ${file}${hint ? ` (${hint})` : ""}`);
}

function settingName(field: string): string {
  return SETTINGS.find((spec) => spec.field === field)?.key ?? field;
}

/** The machine's memory, MB (the default of `warmIsolatesMb` is a share of it). */
function machineMemoryMb(): number {
  return process.getBuiltinModule("node:os").totalmem() / 2 ** 20;
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
function jobsUrl(value: string | undefined, refuse: Refusal): string | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  let protocol = "";
  try {
    protocol = new URL(value).protocol;
  } catch {
    // reported below
  }
  if (protocol !== "postgres:" && protocol !== "postgresql:") {
    throw refuse(
      "the job store URL (--jobs-url, $ANIMAWORKS_JOBS_URL or jobs_url in config.json) must be a postgres:// URL",
      "e.g. postgres://user@db.example:5432/animaworks",
    );
  }
  return value.trim();
}

/**
 * The collector's logs URL: an http(s) URL; one without a path gets OTLP's `/v1/logs` (as
 * `OTEL_EXPORTER_OTLP_ENDPOINT` does), one with a path is taken as the logs URL itself. The message
 * never repeats the value (it may hold a password).
 */
function otlpLogsUrl(value: string | undefined, refuse: Refusal): string | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value.trim());
  } catch {
    // reported below
  }
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw refuse(
      "the audit OpenTelemetry endpoint ($ANIMAWORKS_AUDIT_OTLP_ENDPOINT or audit_otlp_endpoint in config.json) must be an http:// or https:// URL",
      "e.g. http://collector.internal:4318 (the OTLP/HTTP port; /v1/logs is added)",
    );
  }
  if (url.pathname === "/" || url.pathname === "") url.pathname = "/v1/logs";
  return url.toString();
}

function osSandboxMode(value: string): "auto" | "required" | "off" {
  if (value === "auto" || value === "required" || value === "off") return value;
  throw new TypeError(`osSandbox must be "auto", "required" or "off", got ${JSON.stringify(value)}`);
}

function positive(value: number | undefined, fallback: number, name: string, max = Number.POSITIVE_INFINITY): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) {
    throw new TypeError(`${name} must be a positive number, got ${String(value)}`);
  }
  if (value > max) throw new TypeError(`${name} must be a positive number of at most ${max.toLocaleString("en-US")}, got ${String(value)}`);
  return value;
}

function nonNegative(value: number | undefined, fallback: number, name: string, max = Number.POSITIVE_INFINITY): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0) throw new TypeError(`${name} must be a number of 0 or more, got ${String(value)}`);
  if (value > max) throw new TypeError(`${name} must be a number from 0 to ${max.toLocaleString("en-US")}, got ${String(value)}`);
  return value;
}

function checkedLogLevel(value: string | undefined, refuse: Refusal): LogRecord["level"] {
  const level = value?.trim().toLowerCase() || HOST_DEFAULTS.logLevel;
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw refuse(`the log level (log_level in config.json or $ANIMAWORKS_LOG_LEVEL) must be debug, info, warn or error, not ${JSON.stringify(value)}`);
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

/**
 * One log line as the default sink and the CLI write it: `[level] logger (anima/tool): message`. Every
 * sink that writes records as text to a terminal or a stream goes through here, so this is where a
 * tool's text is escaped (terminal-text.ts): it stays one line, and no control character of it reaches
 * the terminal. A library's own `onLog` gets the record as data, unescaped.
 */
export function formatLogRecord(record: LogRecord): string {
  const who = [record.anima, record.tool]
    .filter(Boolean)
    .map((name) => logLineName(name as string))
    .join("/");
  return `[${logLineName(record.level)}] ${logLineName(record.logger)}${who ? ` (${who})` : ""}: ${logLineText(record.message)}`;
}
