import type { HostConfig } from "../config.js";
import type { LogRecord } from "../host-options.js";
import type { Environment } from "../environment.js";
import { ToolHostError } from "../errors.js";
import type { ToolHost } from "../host-api.js";

/**
 * The seam between the endpoint and the CLI. The endpoint runs each client's invocation through an
 * `InvocationRunner` that the CLI hands it when it opens the endpoint (cli/daemon.ts, `serve` in
 * cli/jobs.ts): the CLI's own `main`. So the endpoint imports nothing of the CLI, and the CLI (which
 * opens the endpoint and is its thin client) depends on the endpoint, never the other way round.
 */

/**
 * Most bytes of arguments one invocation may pass as JSON (`--args-file F`, or stdin with `--args-file -`),
 * read in-process or by a running host alike: room for a 10 MiB write (`max_write_bytes`) however it is
 * escaped in JSON, and a bound on what one caller can make a shared host buffer.
 */
export const MAX_ARGUMENTS_BYTES = 64 * 1024 * 1024;

/** Arguments on stdin beyond `MAX_ARGUMENTS_BYTES` (in-process, or sent to a running host). */
export function stdinTooLarge(): ToolHostError {
  return new ToolHostError(
    "InvalidArguments",
    `the arguments on stdin are larger than the ${MAX_ARGUMENTS_BYTES}-byte limit`,
    "pass fewer or smaller arguments (a large text belongs in a file the tool reads itself)",
  );
}

/** Where an invocation writes: its caller's stdout and stderr (a line each call; a newline is added if missing). */
export interface InvocationOutput {
  stdout(text: string): void;
  stderr(text: string): void;
  /**
   * Resolves once the caller has room for more output. A producer of much output (`audit events`) awaits it
   * between chunks: a running host queues a bounded reply for a client that does not read
   * (reply-writer.ts). Default: none (a process's own stdout and stderr are written synchronously).
   */
  drained?(): Promise<void>;
  /**
   * A line on stderr that replaces the line written before it on a terminal (`jobs wait`'s progress bar):
   * the cursor moves are the CLI's own, the text is made terminal-safe. Default: none (written as a new line).
   */
  stderrRedraw?(text: string): void;
}

/** What an invocation asks of its host. */
export interface InvocationHostOptions {
  /** The host configuration the invocation's own process would have (its flags, environment and config.json). */
  config: HostConfig;
  /** Where the invocation's host log lines and its calls' tool log lines go (its stderr). */
  onLog: (record: LogRecord) => void;
}

/** Thrown by `InvocationContext.hostFor` (and for the CLI's local commands): the invocation must run in the client. */
export class Declined extends Error {
  constructor(
    readonly reason: "command" | "config",
    message: string,
  ) {
    super(message);
    this.name = "Declined";
  }
}

/** What a CLI invocation runs in: its own process (every default), or a running host serving a thin client. */
export interface InvocationContext {
  /** The invocation's environment. Default: this process's. */
  env: Environment;
  /** Where relative paths (`--data-dir`, `--args-file`, `validate <file>`) are taken from. Default: `process.cwd()`. */
  cwd: string;
  /** Whether stderr is a terminal (`jobs wait` then redraws a progress bar). Default: `process.stderr.isTTY`, asked only then. */
  stderrIsTerminal?: boolean;
  /** All of stdin (`--args-file -`), at most `MAX_ARGUMENTS_BYTES` (more is an InvalidArguments error). Default: this process's stdin. */
  readStdin(): Promise<string>;
  /** Aborted when the invocation's caller is gone: a call in flight stops, `jobs wait` ends. Default: none. */
  signal?: AbortSignal;
  /**
   * Gives the host the invocation runs on. Default: a new host for this invocation. A running host serving
   * a client gives a view of itself, or throws `Declined` when it cannot run the invocation exactly as
   * the client's own process would (the client then does).
   */
  hostFor?(options: InvocationHostOptions): ToolHost;
}

/**
 * Runs one invocation (the CLI's `main`); resolves to its exit code. Never rejects, except with
 * `Declined` from `context.hostFor` before anything ran.
 */
export type InvocationRunner = (argv: string[], out: InvocationOutput, context: Partial<InvocationContext>) => Promise<number>;
