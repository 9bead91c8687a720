/*
 * The errors of `@animaworks/tool` (`ToolError`, `ToolConfigError`, `InvalidInput`) and the failure envelope
 * of whatever a call threw. Part of the prelude (joined into its scope by
 * src/isolation/isolate/prelude-source.ts; see prelude.ts).
 *
 * Invariants:
 *  - A class is recognised by identity (OrdinaryHasInstance against the prelude's own class, which a patched
 *    `Symbol.hasInstance` cannot change), never by its `name`: an Error a tool names "InvalidInput" or
 *    "ToolConfigError" is an ordinary error of the tool.
 *  - What a thrown error can claim is bounded, and the host decides the rest (src/isolation/isolate/envelope.ts):
 *    a host denial the tool let through keeps the type the host gave it (only the capability module's own
 *    errors count); `ToolConfigError` claims `ToolConfigError`; `InvalidInput` claims `INVALID_INPUT_ERROR_TYPE`,
 *    which the host makes `InvalidArguments` with fault `caller`; anything else is an `ExecutionError`. No
 *    fault, hint or other type comes from the tool, and every message is cut by `failure`.
 */

interface ToolErrorClasses {
  ToolError: new (message?: string) => Error;
  ToolConfigError: new (message?: string) => Error;
  InvalidInput: new (message?: string) => Error;
}

/** The error classes of `@animaworks/tool`, made once per prelude (each isolate has its own). */
// eslint-disable-next-line @typescript-eslint/no-unused-vars
function installToolErrors(): ToolErrorClasses {
  class ToolError extends Error {
    constructor(message?: string) {
      super(message);
      this.name = "ToolError";
    }
  }
  class ToolConfigError extends ToolError {
    constructor(message?: string) {
      super(message);
      this.name = "ToolConfigError";
    }
  }
  /** The tool's own check of its input failed: the caller must change the arguments (not the tool's author). */
  class InvalidInput extends ToolError {
    constructor(message?: string) {
      super(message);
      this.name = "InvalidInput";
    }
  }
  return { ToolError, ToolConfigError, InvalidInput };
}

interface ErrorFraming {
  classes: ToolErrorClasses;
  /** The host-chosen type of a denial the capability module itself created, else undefined. */
  hostTypeOf(error: unknown): string | undefined;
  isInstance(value: unknown, ctor: unknown): boolean;
  safeString(value: unknown): string;
  /** An Error's `name` and `message` read as strings, whatever the tool made of them (the prelude's own readers). */
  errorName(error: Error): string;
  errorMessage(error: Error): string;
  failure(errorType: string, message: string): FailureEnvelope;
}

/** Returns the framer of a call's failure: what the tool threw, as the envelope the host receives. */
// eslint-disable-next-line @typescript-eslint/no-unused-vars
function installErrorFraming(deps: ErrorFraming): (error: unknown) => FailureEnvelope {
  const { classes, hostTypeOf, isInstance, safeString, errorName, errorMessage, failure } = deps;
  const errorCtor = Error;

  return function errorEnvelope(error: unknown): FailureEnvelope {
    try {
      // A host denial the tool did not catch keeps the type the host gave it (only genuine ones count).
      const hostType = hostTypeOf(error);
      if (hostType !== undefined) return failure(hostType, safeString((error as Error).message));
      if (isInstance(error, classes.InvalidInput)) return failure(INVALID_INPUT_ERROR_TYPE, errorMessage(error as Error));
      if (isInstance(error, classes.ToolConfigError)) return failure("ToolConfigError", safeString((error as Error).message));
      if (isInstance(error, errorCtor)) {
        const name = errorName(error as Error);
        const message = errorMessage(error as Error);
        return failure("ExecutionError", name === "ToolError" || name === "Error" ? message : `${name}: ${message}`);
      }
      // `throw { message }` is common in plain JS: report its message, never its other fields (a forged stack).
      const message = typeof error === "object" && error !== null ? (error as { message?: unknown }).message : undefined;
      if (typeof message === "string") return failure("ExecutionError", `the tool threw a non-Error value: ${message}`);
      return failure("ExecutionError", `the tool threw a non-Error value: ${safeString(error)}`);
    } catch {
      return failure("ExecutionError", "the tool threw an error that could not be read");
    }
  };
}
