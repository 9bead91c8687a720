/**
 * Stable error types of the host (docs/design.md §4). Every failure a caller can see carries one of these
 * codes, a message that says what failed, who must act on it (its fault), and where useful a hint that
 * says what to do next. The codes are part of the public contract: never rename one, only add.
 */
export const ERROR_TYPES = [
  "InvalidArguments",
  "ToolNotFound",
  "LoadError",
  "Timeout",
  "MemoryLimit",
  "PermissionDenied",
  "SandboxViolation",
  "ToolConfigError",
  "ExecutionError",
  "NotFound",
  "SandboxCrashed",
  /**
   * The host refused to queue another call or background job of this Anima (its per-Anima call limits, or
   * its bounds on unfinished jobs, were reached); retry later.
   */
  "Busy",
] as const;

export type ErrorType = (typeof ERROR_TYPES)[number];

/**
 * Who must act on a failure. One error type can have different faults (an `ExecutionError` is a tool's
 * throw, a caller's cancel or the host's own failure), so every error says which:
 *  - `tool`: the tool's code or what it reached for; its author fixes the tool.
 *  - `caller`: the request; the caller changes its arguments or the name it called, or it stopped the call itself.
 *    Also every refusal of an operation the caller asked the host for itself (write_memory_file, share_tool…):
 *    no tool is involved there (`callerNotTool`). A tool may say that its own input check failed
 *    (`InvalidInput` of `@animaworks/tool`): that, and nothing else a tool throws, is the caller's.
 *  - `host`: the host or its setup; the operator acts (a crashed or stopped sandbox, a host failure, capacity,
 *    configuration or credentials the tool needs, a data dir the host cannot use, and policy only the operator
 *    can change: a permission missing from the Anima's permissions file, a network the operator has not allowed).
 * Who must act is decided by who can change what refused: an agent that acts on `fault` must never be sent to
 * fix a tool for a policy matter.
 */
export const FAULTS = ["tool", "caller", "host"] as const;
export type Fault = (typeof FAULTS)[number];

/** The usual fault of each type: what a `ToolHostError` carries unless its site says otherwise. */
export const DEFAULT_FAULT: Readonly<Record<ErrorType, Fault>> = {
  InvalidArguments: "caller",
  ToolNotFound: "caller",
  NotFound: "caller",
  LoadError: "tool",
  Timeout: "tool",
  MemoryLimit: "tool",
  PermissionDenied: "tool",
  SandboxViolation: "tool",
  ExecutionError: "tool",
  ToolConfigError: "host",
  SandboxCrashed: "host",
  Busy: "host",
};

/** CLI exit code per error type (docs/design.md §4). */
export const EXIT_CODES: Readonly<Record<ErrorType, number>> = {
  ExecutionError: 1,
  ToolConfigError: 1,
  SandboxCrashed: 1,
  Busy: 1,
  InvalidArguments: 2,
  NotFound: 2,
  Timeout: 3,
  MemoryLimit: 3,
  PermissionDenied: 4,
  SandboxViolation: 4,
  ToolNotFound: 5,
  LoadError: 6,
};

/**
 * The one shape of a failure inside the host: across process boundaries, in job stores, in outcomes.
 * Only the JSON edges spell it otherwise (`WireError`, below).
 */
export interface ErrorInfo {
  type: ErrorType;
  message: string;
  fault: Fault;
  hint?: string;
}

export class ToolHostError extends Error {
  readonly type: ErrorType;
  readonly hint: string | undefined;
  readonly fault: Fault;

  constructor(type: ErrorType, message: string, hint?: string, fault: Fault = DEFAULT_FAULT[type]) {
    super(message);
    this.name = "ToolHostError";
    this.type = type;
    this.hint = hint;
    this.fault = fault;
  }

  get exitCode(): number {
    return EXIT_CODES[this.type];
  }

  toInfo(): ErrorInfo {
    return this.hint === undefined
      ? { type: this.type, message: this.message, fault: this.fault }
      : { type: this.type, message: this.message, fault: this.fault, hint: this.hint };
  }

  static fromInfo(info: ErrorInfo): ToolHostError {
    return new ToolHostError(info.type, info.message, info.hint, info.fault);
  }
}

/**
 * An error of an operation the caller asked the host for itself (a management call: write_memory_file,
 * read_memory_file, share_tool): no tool is involved, so what would be a tool's fault in a tool's call (a path
 * outside its folder, a link, a file too large) is the caller's. Host and caller faults stay as they are.
 */
export function callerNotTool(error: unknown): unknown {
  return error instanceof ToolHostError && error.fault === "tool" ? new ToolHostError(error.type, error.message, error.hint, "caller") : error;
}

export function isErrorType(value: unknown): value is ErrorType {
  return typeof value === "string" && (ERROR_TYPES as readonly string[]).includes(value);
}

export function isFault(value: unknown): value is Fault {
  return typeof value === "string" && (FAULTS as readonly string[]).includes(value);
}

/**
 * Any thrown value as an `ErrorInfo`: a ToolHostError as it is, a system error about a file the host uses
 * translated (`systemFileError`), anything else as the host's own `ExecutionError` with its message
 * (tool failures never arrive here as plain errors: the isolation layer has already typed them).
 */
export function errorInfoOf(error: unknown): ErrorInfo {
  if (error instanceof ToolHostError) return error.toInfo();
  const system = systemFileError(error);
  if (system) return system.toInfo();
  // A message is never empty: an Error without one is named by its class.
  return { type: "ExecutionError", message: error instanceof Error ? error.message || error.name : String(error), fault: "host" };
}

/**
 * An error as the JSON edges write it (the CLI's `-j` envelope, MCP error results, `CallResult`,
 * `JobResult`, job views): snake_case `error_type`, as the tool-author guide and Python's original spell it.
 * `wireError` is the one converter from `ErrorInfo`.
 */
export interface WireError {
  error_type: ErrorType;
  message: string;
  fault: Fault;
  hint?: string;
}

export function wireError(info: ErrorInfo): WireError {
  return { error_type: info.type, message: info.message, fault: info.fault, ...(info.hint ? { hint: info.hint } : {}) };
}

/** `{"status": "error", "error_type", "message", "fault", "hint"?}`: the CLI's and MCP's error envelope. */
export interface ErrorEnvelope extends WireError {
  status: "error";
}

export function errorEnvelope(info: ErrorInfo): ErrorEnvelope {
  return { status: "error", ...wireError(info) };
}

/** The inverse of `wireError`, for results read back from a JSON edge (a fault missing from an older writer: the type's usual one). */
export function infoOfWire(wire: WireError): ErrorInfo {
  return { type: wire.error_type, message: wire.message, fault: wire.fault ?? DEFAULT_FAULT[wire.error_type], ...(wire.hint ? { hint: wire.hint } : {}) };
}

// ---- the operating system's file errors ------------------------------------------------------------

/*
 * One translation of the operating system's file errors that reach an operator (a data dir the user
 * cannot read or write, a read-only or full disk) into the host's error types, with the path and what to
 * do; their fault is the host's setup. Tool-facing file errors are translated by the fs capability
 * instead (they never show host paths).
 */
const ACCESS_CODES = new Set(["EACCES", "EPERM", "EROFS"]);
const SPACE_CODES = new Set(["ENOSPC", "EDQUOT"]);

const VERBS: Readonly<Record<string, string>> = {
  open: "open",
  mkdir: "create the folder",
  scandir: "list the folder",
  rename: "rename",
  unlink: "remove",
  rmdir: "remove the folder",
  stat: "look at",
  lstat: "look at",
  access: "reach",
  write: "write",
  read: "read",
  copyfile: "copy",
  chmod: "change the mode of",
  utime: "touch",
};

/** A `ToolHostError` for an access or disk-space error of the system (with its path), else undefined. */
export function systemFileError(error: unknown, path?: string): ToolHostError | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, syscall } = error as NodeJS.ErrnoException;
  if (code === undefined || (!ACCESS_CODES.has(code) && !SPACE_CODES.has(code))) return undefined;
  const where = (error as NodeJS.ErrnoException).path ?? path ?? "a file of the data dir";
  const verb = (syscall && VERBS[syscall]) ?? "use";
  if (SPACE_CODES.has(code)) {
    return new ToolHostError(
      "ExecutionError",
      `cannot ${verb} ${where}: no space left on its file system (${code})`,
      "free space (or raise the quota) on the data dir's file system, then run it again",
      "host",
    );
  }
  const why = code === "EROFS" ? "the file system is read-only" : "permission denied";
  return new ToolHostError("PermissionDenied", `cannot ${verb} ${where}: ${why} (${code})`, accessHint(), "host");
}

/** What to do about a data dir this user cannot read or write. */
export function accessHint(): string {
  const uid = process.getuid?.();
  return `the data dir must be readable and writable by the user who runs animaworks-tool${uid === undefined ? "" : ` (uid ${uid})`}: run it as the data dir's owner, or fix the permissions`;
}
