import { join } from "node:path";
import type { HostOptions } from "./host-options.js";
import type { FsLimits } from "./fs-limits.js";
import { MAX_MEMORY_LIMIT_MB, MAX_SETTING_MS, MIN_MEMORY_LIMIT_MB } from "./host-defaults.js";
import { LOG_LEVELS } from "./contract/isolate.js";
import { ToolHostError, systemFileError } from "./errors.js";
import { UnreadableFile, readRegularFileSync } from "./regular-file.js";
import { type ValidateFunction, getAjv } from "./validation/ajv.js";
import { jsonSyntaxProblem } from "./json-syntax.js";

/**
 * The operator's configuration of the host: the `animaworks_tool` section of the data dir's `config.json`
 * (AnimaWorks' own file). Every setting a host takes from the operator is declared once in `SETTINGS`:
 * its key in the file, the `HostOptions` field it sets, the environment variable that overrides it for
 * one run, and its JSON Schema. Precedence: a flag or `createHost` option > the environment variable >
 * the file > the default (src/config.ts resolves it).
 *
 * The section is validated with ajv when a host starts; an invalid file stops the start with an error
 * naming each wrong key. Without the section nothing is validated (and ajv is not loaded).
 * This module reads files, never `process.env`: config.ts hands the environment in.
 */
export const CONFIG_SECTION = "animaworks_tool";

export type SettingSource = "option" | "environment" | "file" | "default";

export interface SettingSpec {
  /** Key in the `animaworks_tool` section. */
  key: string;
  /** Field of the resolved settings (`HostOptions` where the host has one). */
  field: keyof FileSettings;
  /** Variable that overrides the file for one run, if any. */
  env?: string;
  /** JSON Schema of the value in the file. */
  schema: Record<string, unknown>;
  /** One line for `audit` and the README. */
  description: string;
  /** The value may hold a password (shown masked). */
  secret?: boolean;
}

/** The settings as read from the file, in the host's own names and units. */
export type FileSettings = Pick<
  HostOptions,
  | "osSandbox"
  | "jobsUrl"
  | "allowInternalHosts"
  | "allowedEnvironment"
  | "logLevel"
  | "timeoutMs"
  | "maxCallTimeoutMs"
  | "memoryLimitMb"
  | "loadTimeoutMs"
  | "maxOutputBytes"
  | "maxResultTransferBytes"
  | "cordons"
  | "sandboxProcesses"
  | "maxSandboxProcesses"
  | "spareSandboxProcesses"
  | "warmIsolatesMb"
  | "maxIdleIsolates"
  | "isolateSnapshot"
  | "compactIdleIsolatesAfterMs"
  | "toolsPerIsolate"
  | "warmPythonInterpreters"
  | "sparePythonInterpreter"
  | "maxConcurrentCallsPerAnima"
  | "maxQueuedCallsPerAnima"
  | "maxLogLinesPerCall"
  | "maxLogLineChars"
  | "fsLimits"
  | "mcpCoreTools"
  | "auditOtlpEndpoint"
> & {
  daemon?: boolean;
  daemonIdleSeconds?: number;
};

const positiveNumber = { type: "number", exclusiveMinimum: 0 };
/** A duration in ms: bounded by what a timer can wait (MAX_SETTING_MS, host-defaults.ts). */
const positiveMs = { ...positiveNumber, maximum: MAX_SETTING_MS };
const positiveInteger = { type: "integer", minimum: 1 };
const names = { type: "array", items: { type: "string", minLength: 1 } };

/** File keys of `fs_limits` → FsLimits fields. */
const FS_LIMIT_KEYS: Readonly<Record<string, keyof FsLimits>> = {
  max_read_bytes: "maxReadBytes",
  max_write_bytes: "maxWriteBytes",
  quota_bytes: "quotaBytes",
  max_files: "maxFiles",
  max_path_chars: "maxPathChars",
  max_path_depth: "maxPathDepth",
};

export const SETTINGS: readonly SettingSpec[] = [
  {
    key: "allow_internal_hosts",
    field: "allowInternalHosts",
    env: "ANIMAWORKS_ALLOW_INTERNAL_HOSTS",
    schema: names,
    description: "private or loopback hosts (names, IPs, CIDRs) tools may reach, e.g. an internal API on 127.0.0.1",
  },
  {
    key: "allowed_environment",
    field: "allowedEnvironment",
    env: "ANIMAWORKS_ALLOWED_ENVIRONMENT",
    schema: { type: "array", items: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_]*$" } },
    description: "environment variables getCredential may fall back to, by exact name",
  },
  {
    key: "os_sandbox",
    field: "osSandbox",
    env: "ANIMAWORKS_OS_SANDBOX",
    schema: { enum: ["auto", "required", "off"] },
    description: "bubblewrap around sandbox processes: auto, required or off",
  },
  {
    key: "jobs_url",
    field: "jobsUrl",
    env: "ANIMAWORKS_JOBS_URL",
    schema: { type: "string", pattern: "^postgres(ql)?://" },
    description: "PostgreSQL URL of the background job store (else the embedded SQLite file)",
    secret: true,
  },
  { key: "log_level", field: "logLevel", env: "ANIMAWORKS_LOG_LEVEL", schema: { enum: [...LOG_LEVELS] }, description: "least level of the host's log lines" },
  { key: "timeout_ms", field: "timeoutMs", schema: positiveMs, description: "default per-call timeout, ms" },
  { key: "max_call_timeout_ms", field: "maxCallTimeoutMs", schema: positiveMs, description: "upper bound of any call's timeout, ms" },
  {
    key: "memory_limit_mb",
    field: "memoryLimitMb",
    schema: { type: "number", minimum: MIN_MEMORY_LIMIT_MB, maximum: MAX_MEMORY_LIMIT_MB },
    description: "V8 heap limit per isolate, MB",
  },
  { key: "load_timeout_ms", field: "loadTimeoutMs", schema: positiveMs, description: "time to load a tool, ms" },
  { key: "max_output_bytes", field: "maxOutputBytes", schema: positiveInteger, description: "result text kept before the truncation notice, bytes" },
  {
    key: "max_result_transfer_bytes",
    field: "maxResultTransferBytes",
    schema: positiveInteger,
    description: "largest serialised result a tool hands back, bytes",
  },
  {
    key: "cordons",
    field: "cordons",
    schema: { oneOf: [{ enum: ["anima", "all"] }, { type: "object", additionalProperties: names }] },
    description: 'Animas whose tools may share sandbox processes: "anima" (each alone), "all", or named groups {"team": ["alice", "bob"]}',
  },
  {
    key: "sandbox_processes",
    field: "sandboxProcesses",
    schema: positiveInteger,
    description: 'sandbox processes per cordon (default 1; 2 when cordons is "all")',
  },
  {
    key: "max_sandbox_processes",
    field: "maxSandboxProcesses",
    schema: positiveInteger,
    description: "sandbox processes alive at most (≈ 50 MB each idle); idle cordons beyond it are ended",
  },
  {
    key: "spare_sandbox_processes",
    field: "spareSandboxProcesses",
    schema: { type: "integer", minimum: 0 },
    description: "blank sandbox processes kept ready for a new cordon's first call",
  },
  { key: "warm_isolates_mb", field: "warmIsolatesMb", schema: positiveNumber, description: "memory all idle warm isolates may hold, MB" },
  { key: "max_idle_isolates", field: "maxIdleIsolates", schema: positiveInteger, description: "idle warm isolates per sandbox process at most" },
  {
    key: "isolate_snapshot",
    field: "isolateSnapshot",
    schema: { type: "boolean" },
    description: "isolates made from a V8 startup snapshot of the prelude (false: the prelude runs in each new isolate)",
  },
  {
    key: "compact_idle_isolates_after_ms",
    field: "compactIdleIsolatesAfterMs",
    schema: { type: "number", minimum: 0, maximum: MAX_SETTING_MS },
    description: "idle time after which a sandbox process compacts a warm isolate (gives back what its calls left; its next call pays for it), ms; 0: never",
  },
  {
    key: "tools_per_isolate",
    field: "toolsPerIsolate",
    schema: positiveInteger,
    description: "tools of one Anima (JavaScript, one memory limit) whose contexts one idle warm isolate may hold (1: an isolate per tool)",
  },
  {
    key: "warm_python_interpreters",
    field: "warmPythonInterpreters",
    schema: { type: "integer", minimum: 0 },
    description: "idle Python interpreters kept warm per sandbox process (≈ 130–190 MB each; 0: each Python call restores one, ≈ 0.5 s)",
  },
  {
    key: "spare_python_interpreter",
    field: "sparePythonInterpreter",
    schema: { type: "boolean" },
    description: "a booted Python interpreter kept ready in each process that ran a Python tool, for the next one's first call (≈ 130 MB)",
  },
  {
    key: "max_concurrent_calls_per_anima",
    field: "maxConcurrentCallsPerAnima",
    schema: positiveInteger,
    description: "calls of one Anima at once while others have calls",
  },
  { key: "max_queued_calls_per_anima", field: "maxQueuedCallsPerAnima", schema: positiveInteger, description: "calls of one Anima waiting before Busy" },
  { key: "max_log_lines_per_call", field: "maxLogLinesPerCall", schema: positiveInteger, description: "log lines one call may emit" },
  { key: "max_log_line_chars", field: "maxLogLineChars", schema: positiveInteger, description: "longest log line kept, characters" },
  {
    key: "fs_limits",
    field: "fsLimits",
    schema: { type: "object", additionalProperties: false, properties: Object.fromEntries(Object.keys(FS_LIMIT_KEYS).map((key) => [key, positiveInteger])) },
    description: `file-capability limits: ${Object.keys(FS_LIMIT_KEYS).join(", ")} (bytes, counts)`,
  },
  {
    key: "daemon",
    field: "daemon",
    schema: { type: "boolean" },
    description: "whether CLI calls start a background host (false: every call runs in its own process; ANIMAWORKS_NO_DAEMON=1 for one run)",
  },
  {
    key: "daemon_idle_seconds",
    field: "daemonIdleSeconds",
    env: "ANIMAWORKS_DAEMON_IDLE_SECONDS",
    schema: { type: "number", exclusiveMinimum: 0, maximum: 2_147_483 },
    description: "seconds a daemon waits without a call before it exits",
  },
  { key: "mcp_core_tools", field: "mcpCoreTools", schema: names, description: "core tools the MCP server offers (default: all)" },
  {
    key: "audit_otlp_endpoint",
    field: "auditOtlpEndpoint",
    env: "ANIMAWORKS_AUDIT_OTLP_ENDPOINT",
    schema: { type: "string", pattern: "^https?://" },
    description: "OpenTelemetry collector (OTLP/HTTP) that gets a copy of every audit record, e.g. http://collector:4318 (default: none)",
    // A URL may carry a password (https://user:secret@collector): shown masked.
    secret: true,
  },
];

export interface OperatorFile {
  /** The data dir's config.json. */
  path: string;
  /** The section's settings (empty without a file or a section). */
  settings: FileSettings;
  /** The section's text as parsed, canonical; "" without one. A running host compares it per call. */
  fingerprint: string;
}

/** Largest config.json read, bytes (the operator's section is a few hundred). */
const MAX_OPERATOR_FILE_BYTES = 4 * 1024 * 1024;

let cached: { path: string; text: string; file: OperatorFile } | undefined;

/** Reads and validates the operator's section of `{dataDir}/config.json`; throws `ToolConfigError` naming each wrong key. */
export function readOperatorFile(dataDir: string): OperatorFile {
  const path = join(dataDir, "config.json");
  let text: string;
  try {
    // A regular file only, opened without blocking and read to a bound: a FIFO or /dev/zero named
    // config.json must not hold a host's event loop (the daemon reads it on every call).
    text = readRegularFileSync(path, MAX_OPERATOR_FILE_BYTES).toString("utf8");
  } catch (error) {
    if (!(error instanceof UnreadableFile)) throw error;
    if (error.reason.kind === "missing") return { path, settings: {}, fingerprint: "" };
    // A system error (EACCES, EIO…) reads as every other file the host cannot open does.
    const system =
      error.reason.kind === "unreadable"
        ? systemFileError(Object.assign(new Error(error.reason.code), { code: error.reason.code, syscall: "open" }), path)
        : undefined;
    throw (
      system ??
      configFileError(`cannot read ${error.message}`, `make ${path} a regular JSON file readable by this user (the host's operator settings live there)`)
    );
  }
  if (cached?.path === path && cached.text === text) return cached.file;
  const file = parseOperatorFile(path, text);
  cached = { path, text, file };
  return file;
}

export function parseOperatorFile(path: string, text: string): OperatorFile {
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw configFileError(`${path} is not valid JSON: ${jsonSyntaxProblem(error)}`, `fix the JSON of ${path} (AnimaWorks refuses it too)`);
  }
  const section = typeof config === "object" && config !== null ? (config as Record<string, unknown>)[CONFIG_SECTION] : undefined;
  if (section === undefined) return { path, settings: {}, fingerprint: "" };
  // A section of notes only (what `init` writes) sets nothing: ajv, ≈ 100 ms of a one-shot call, is not loaded for it.
  if (!isNotesOnly(section)) checkSection(path, section);
  const values = section as Record<string, unknown>;
  const settings: Record<string, unknown> = {};
  for (const spec of SETTINGS) {
    const value = values[spec.key];
    if (value === undefined) continue;
    settings[spec.field] = spec.key === "fs_limits" ? fsLimitsOf(value as Record<string, number>) : value;
  }
  return { path, settings: settings, fingerprint: JSON.stringify(section) };
}

function fsLimitsOf(value: Record<string, number>): FileSettings["fsLimits"] {
  return Object.fromEntries(Object.entries(value).map(([key, limit]) => [FS_LIMIT_KEYS[key], limit])) as FileSettings["fsLimits"];
}

/** An object whose keys are all notes ("//…"). */
function isNotesOnly(section: unknown): boolean {
  return typeof section === "object" && section !== null && !Array.isArray(section) && Object.keys(section).every((key) => key.startsWith("//"));
}

let validator: ValidateFunction | undefined;

function checkSection(path: string, section: unknown): void {
  if (validator === undefined) {
    // Compiled only for a file that has the section: a plain CLI call never loads ajv (getAjv is lazy).
    // Keys starting with "//" are notes (JSON has no comments; `animaworks-tool init` writes one per setting).
    const notes = { "^//": {} };
    const schema = {
      type: "object",
      additionalProperties: false,
      patternProperties: notes,
      properties: Object.fromEntries(SETTINGS.map((spec) => [spec.key, spec.schema])),
    };
    validator = getAjv().compile(schema);
  }
  if (validator(section)) return;
  const keys = new Set<string>();
  const problems = (validator.errors ?? []).map((error) => {
    const where = `${CONFIG_SECTION}${error.instancePath.replaceAll("/", ".")}`;
    // The setting to fix: the section's own key (`fs_limits`, not `fs_limits.max`), or the unknown one.
    const setting = error.instancePath.split("/")[1];
    if (error.keyword === "additionalProperties") {
      const key = String((error.params as Record<string, unknown>)["additionalProperty"]);
      keys.add(setting ?? key);
      const known = error.instancePath === "" ? SETTINGS.map((s) => s.key) : Object.keys(FS_LIMIT_KEYS);
      return `${where}.${key} is not a setting (settings: ${known.join(", ")})`;
    }
    if (setting !== undefined) keys.add(setting);
    if (error.keyword === "maximum" || error.keyword === "minimum" || error.keyword === "exclusiveMinimum") {
      const range = rangeOf(SETTINGS.find((spec) => spec.key === setting)?.schema);
      if (range !== undefined)
        return `${where} ${error.message ?? "is out of range"} (it takes ${range}, got ${JSON.stringify((section as Record<string, unknown>)[setting ?? ""])})`;
    }
    if (error.keyword === "enum")
      return `${where} must be one of ${((error.params as Record<string, unknown>)["allowedValues"] as unknown[]).map((v) => JSON.stringify(v)).join(", ")}`;
    return `${where} ${error.message ?? "is invalid"}`;
  });
  const named = [...keys].map((key) => `"${key}"`).join(", ");
  throw configFileError(
    `${path}: ${[...new Set(problems)].join("; ")}`,
    `fix ${named || "the section"} in the "${CONFIG_SECTION}" section of ${path} (README: "Operator configuration" lists every setting)`,
  );
}

/** A bounded setting's range in words ("more than 0 to 2,000,000,000"), from its schema; undefined without an upper bound. */
function rangeOf(schema: Record<string, unknown> | undefined): string | undefined {
  const max = schema?.["maximum"];
  if (typeof max !== "number") return undefined;
  const format = (n: number): string => n.toLocaleString("en-US");
  const min = schema?.["minimum"];
  const above = schema?.["exclusiveMinimum"];
  const from = typeof min === "number" ? format(min) : typeof above === "number" ? `more than ${format(above)}` : "any number";
  return `${from} to ${format(max)}`;
}

/**
 * A wrong operator file: the operator's to fix, not the caller's (a call cannot change it), so
 * `ToolConfigError` with fault `host` (exit 1), its hint naming the file and the key.
 */
export function configFileError(message: string, hint: string): ToolHostError {
  return new ToolHostError("ToolConfigError", message, hint, "host");
}

/** `postgres://user:secret@host/db` → `postgres://user:***@host/db`; anything else unchanged. */
export function maskUrlPassword(value: string): string {
  try {
    const url = new URL(value);
    if (url.password === "") return value;
    url.password = "***";
    return url.toString();
  } catch {
    return value;
  }
}
