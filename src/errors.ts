/**
 * Stable error types of the host (docs/design.md §4). Every failure a caller can see carries one of these
 * codes, a message that says what failed, and where useful a hint that says what to do next.
 * The codes are part of the public contract: never rename one, only add.
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
  /** The host refused to queue another call of this Anima (fair share between Animas); retry later. */
  "Busy",
] as const;

export type ErrorType = (typeof ERROR_TYPES)[number];

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

/** Plain-data form of an error, as it crosses process boundaries and appears in JSON envelopes. */
export interface ErrorInfo {
  type: ErrorType;
  message: string;
  hint?: string;
}

export class ToolHostError extends Error {
  readonly type: ErrorType;
  readonly hint: string | undefined;

  constructor(type: ErrorType, message: string, hint?: string) {
    super(message);
    this.name = "ToolHostError";
    this.type = type;
    this.hint = hint;
  }

  get exitCode(): number {
    return EXIT_CODES[this.type];
  }

  toInfo(): ErrorInfo {
    return this.hint === undefined
      ? { type: this.type, message: this.message }
      : { type: this.type, message: this.message, hint: this.hint };
  }

  static fromInfo(info: ErrorInfo): ToolHostError {
    return new ToolHostError(info.type, info.message, info.hint);
  }
}

export function isErrorType(value: unknown): value is ErrorType {
  return typeof value === "string" && (ERROR_TYPES as readonly string[]).includes(value);
}

/** Any thrown value as an `ErrorInfo`: a ToolHostError as it is, anything else as an `ExecutionError` with its message. */
export function errorInfoOf(error: unknown): ErrorInfo {
  if (error instanceof ToolHostError) return error.toInfo();
  // A message is never empty: an Error without one is named by its class.
  return { type: "ExecutionError", message: error instanceof Error ? error.message || error.name : String(error) };
}

/**
 * The error as the JSON edges write it (the CLI's `-j` envelope, MCP error results, job results):
 * `{"status": "error", "error_type", "message", "hint"?}`. The one builder of that snake_case form;
 * `ErrorInfo` is the shape inside.
 */
export interface ErrorEnvelope {
  status: "error";
  error_type: ErrorType;
  message: string;
  hint?: string;
}

export function errorEnvelope(info: ErrorInfo): ErrorEnvelope {
  return { status: "error", error_type: info.type, message: info.message, ...(info.hint ? { hint: info.hint } : {}) };
}
