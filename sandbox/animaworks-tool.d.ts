/**
 * Types of `@animaworks/tool`, the virtual module the host provides to every tool (docs/design.md §3).
 *
 * The values are defined by the sandbox prelude (`sandbox/prelude.ts`); the list of importable names,
 * which both the prelude and the bundler read, is `TOOL_API_EXPORTS` in src/contract/tool-api.ts. Keep this
 * file in step with it (test/bundling/tool-api.test.ts checks): a name declared here but missing there
 * would type-check and then fail when the tool is built.
 *
 * This file is an ambient declaration on purpose (no top-level import/export), so that an author's
 * tsconfig can simply include it, as `tools/tsconfig.json` does:
 *
 *     import { logger, ToolError, type ToolSchema } from "@animaworks/tool";
 *
 * It declares no globals: the sandbox has no DOM and no Node, and a tool should import what it uses from
 * here rather than rely on `console` or a global `setTimeout`.
 */
declare module "@animaworks/tool" {
  // ---- values -------------------------------------------------------------------------------------

  /** One argument of a log call: strings as they are, Errors as `Name: message`, anything else as JSON. */
  export type LogArgument = unknown;

  /**
   * The logger named `animaworks.tools` (as in AnimaWorks' Python tools). Lines go to the host's log with
   * the calling Anima and tool attached. A call may write a bounded number of lines; beyond that they are
   * dropped and one notice is logged.
   */
  export interface Logger {
    readonly name: "animaworks.tools";
    debug(...args: LogArgument[]): void;
    info(...args: LogArgument[]): void;
    warn(...args: LogArgument[]): void;
    /** Alias of `warn` (Python's `logger.warning`). */
    warning(...args: LogArgument[]): void;
    error(...args: LogArgument[]): void;
    /** Alias of `error` (Python's `logger.exception`); pass the caught error as an argument. */
    exception(...args: LogArgument[]): void;
  }
  export const logger: Logger;

  /** A timer id; only meaningful to `clearTimeout`. */
  export type TimerId = number;

  /**
   * Runs `callback` after `delayMs` milliseconds. Timers belong to the current call: when the call ends
   * (its result is returned, or it times out), pending timers are dropped. The call's timeout still
   * applies to everything a timer does.
   */
  export function setTimeout<A extends unknown[]>(callback: (...args: A) => unknown, delayMs?: number, ...args: A): TimerId;
  export function clearTimeout(id: TimerId | undefined): void;
  /** Resolves after `delayMs` milliseconds (counted against the call's timeout). */
  export function sleep(delayMs: number): Promise<void>;

  /**
   * Throw to fail a call with your own message: the caller sees `ExecutionError` with exactly this
   * message. Any other thrown Error is reported as `Name: message`.
   */
  export class ToolError extends Error {
    constructor(message?: string);
  }

  /**
   * Throw when the tool is not configured (e.g. a credential is missing); the caller sees error type
   * `ToolConfigError`, which tells an operator rather than the model to act.
   */
  export class ToolConfigError extends ToolError {
    constructor(message?: string);
  }

  /**
   * Throw when your own check of the arguments fails (a value the schema cannot express: a date in the
   * past, two options that exclude each other): the caller sees error type `InvalidArguments` with
   * `fault: "caller"` (exit 2) and this message, so it changes its arguments instead of reporting your
   * tool as broken. It says nothing more: the host adds no hint, and a message is cut as any tool message.
   * Only an instance of this class counts (an Error merely named "InvalidInput" is an ordinary error).
   *
   *     if (args.days > 30) throw new InvalidInput("days must be at most 30");
   */
  export class InvalidInput extends ToolError {
    constructor(message?: string);
  }

  // ---- types for authors (no runtime value) -------------------------------------------------------

  /** A JSON value, as arguments arrive and as results should be shaped. */
  // ---- host capabilities (run on the host, confined to the calling Anima) ----------------------------

  /** A denial or failure reported by the host (`type` is the host's error type, e.g. "SandboxViolation"). */
  export class CapabilityError extends ToolError {
    readonly type: string;
  }

  export type FileType = "file" | "directory" | "symlink" | "other";
  export interface FileStat {
    type: FileType;
    size: number;
    mtimeMs: number;
  }

  /** Files of the calling Anima's directory. Paths are relative to it; nothing outside is reachable. */
  export const fs: {
    readFile(path: string, options?: "utf8" | { encoding?: "utf8" }): Promise<string>;
    readFile(path: string, options: "bytes" | { encoding: "bytes" | null }): Promise<Uint8Array>;
    /** Replaces the file atomically. */
    writeFile(path: string, data: string | Uint8Array): Promise<void>;
    appendFile(path: string, data: string | Uint8Array): Promise<void>;
    /** Sorted by name. Entries whose name is not valid UTF-8 are left out (no path could open them); the host logs them. */
    readdir(path?: string): Promise<Array<{ name: string; type: FileType }>>;
    stat(path: string): Promise<FileStat>;
    exists(path: string): Promise<boolean>;
    /** Recursive unless `{ recursive: false }`. */
    mkdir(path: string, options?: { recursive?: boolean }): Promise<void>;
    rm(path: string, options?: { recursive?: boolean }): Promise<void>;
    rename(from: string, to: string): Promise<void>;
  };

  export interface FetchInit {
    method?: string;
    headers?: Record<string, string>;
    body?: string | Uint8Array;
    /** Total time allowed, in ms. Default: 30,000. */
    timeoutMs?: number;
    /** How `body` of the response is given. Default: "text". */
    responseType?: "text" | "json" | "bytes";
  }
  export interface FetchResponse<B = unknown> {
    status: number;
    statusText: string;
    ok: boolean;
    /** The final URL, after redirects. */
    url: string;
    headers: Record<string, string>;
    body: B;
  }
  /** HTTP(S) as the Anima's network policy allows; private and metadata addresses are refused. */
  export function fetch(url: string, init?: FetchInit & { responseType?: "text" }): Promise<FetchResponse<string>>;
  export function fetch(url: string, init: FetchInit & { responseType: "json" }): Promise<FetchResponse<JsonValue>>;
  export function fetch(url: string, init: FetchInit & { responseType: "bytes" }): Promise<FetchResponse<Uint8Array>>;

  export interface CredentialOptions {
    /** Key under `credentials.<name>.keys` in config.json. Default: "api_key". */
    keyName?: string;
    /** Variable name for vault.json, shared/credentials.json and the environment. */
    envVar?: string;
  }
  /**
   * Resolves a credential: config.json → vault.json → shared/credentials.json → allowed environment.
   * Throws ToolConfigError naming where to set it when nothing is found.
   */
  export function getCredential(credentialName: string, toolName: string, options?: CredentialOptions): Promise<string>;
  export function getCredential(credentialName: string, toolName: string, keyName?: string, envVar?: string): Promise<string>;
  export const get_credential: typeof getCredential;

  /**
   * Reports how far a background job has come: `fraction` from 0 to 1, and a short message (cut at 500
   * characters). `animaworks-tool jobs wait` and `jobs show` display it. In a direct call it does nothing,
   * so the same code works both ways.
   */
  export function progress(fraction: number, message?: string): Promise<void>;

  /**
   * True once the background job running this call was cancelled (or ran out of time, or its worker is
   * stopping). A plain boolean: `if (isCancelled()) return …` between steps of long work (`await
   * isCancelled()` works too). It is the host's answer as of the tool's last `await` (of a capability,
   * `progress()`, `sleep()`…): check it between awaited steps. A job that does not stop by itself is
   * stopped by force a few seconds after the cancel. Always false in a direct call.
   */
  export function isCancelled(): boolean;

  export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

  /**
   * A JSON Schema (draft-07 as ajv reads it, strict mode). Only the commonly used keywords are spelled
   * out; any other valid keyword is accepted. Unknown keywords and `required` names that are not in
   * `properties` are load errors (strict mode), as is a `pattern` the RE2 engine cannot run
   * (look-arounds, back-references).
   */
  export interface JsonSchema {
    type?:
      | "string"
      | "number"
      | "integer"
      | "boolean"
      | "object"
      | "array"
      | "null"
      | Array<"string" | "number" | "integer" | "boolean" | "object" | "array" | "null">;
    description?: string;
    default?: JsonValue;
    enum?: JsonValue[];
    const?: JsonValue;
    properties?: Record<string, JsonSchema>;
    required?: string[];
    additionalProperties?: boolean | JsonSchema;
    items?: JsonSchema;
    minItems?: number;
    maxItems?: number;
    minLength?: number;
    maxLength?: number;
    pattern?: string;
    format?: string;
    minimum?: number;
    maximum?: number;
    exclusiveMinimum?: number;
    exclusiveMaximum?: number;
    oneOf?: JsonSchema[];
    anyOf?: JsonSchema[];
    allOf?: JsonSchema[];
    [keyword: string]: unknown;
  }

  /** The parameters of one action: always an object schema (arguments are always an object). */
  export interface ObjectSchema extends JsonSchema {
    type: "object";
    properties?: Record<string, JsonSchema>;
    required?: string[];
  }

  /**
   * One entry of `get_tool_schemas()`. `name` must be `{tool}_{action}` where `{tool}` is the file name
   * (`my_tool.ts` → `my_tool_query`). `input_schema` and `parameters` are synonyms; `input_schema` wins
   * when both are given; with neither, the action takes no arguments.
   */
  export interface ToolSchema {
    name: string;
    /** One or two sentences; the model reads it to choose the tool. Default: empty. */
    description?: string;
    input_schema?: ObjectSchema;
    parameters?: ObjectSchema;
    /**
     * The shape of the action's result object: the host checks what the tool returns against it and gives
     * it as `structured` (MCP `structuredContent`). Default: none (any result).
     */
    output_schema?: ObjectSchema;
  }

  /** Settings of one action in `EXECUTION_PROFILE`. */
  export interface ActionProfile {
    /** Advisory duration, in seconds. */
    expected_seconds?: number;
    /** The action may be submitted as a background job. */
    background_eligible?: boolean;
    /** This action's timeout in seconds, instead of the host's default (30 s); still capped by the host. */
    timeout_seconds?: number;
    /** The action needs an explicit permit. */
    gated?: boolean;
    /**
     * Background jobs only: a run lost to a crash of its worker is run again, up to `attempts` runs in
     * all, waiting `backoff` seconds before the first retry and twice as long before each next one
     * (default 1 s). Only for actions that are safe to run twice. Without it a lost run ends as
     * `interrupted`. A run that fails or times out is never retried.
     */
    retry?: { attempts: number; backoff?: number };
  }

  /** `export const EXECUTION_PROFILE: ExecutionProfile = { query: { timeout_seconds: 120 } }` — keyed by action. */
  export type ExecutionProfile = Record<string, ActionProfile>;

  /**
   * What `dispatch` receives: the validated arguments plus `anima_dir`, which the host always sets to the
   * calling Anima's directory (a caller cannot choose it). Remove it before passing the rest on.
   */
  export type ToolArgs<T extends object = Record<string, unknown>> = T & { anima_dir: string };

  /**
   * What a handler may return (or resolve to): objects and arrays are shown as 2-space JSON, `null` and
   * `undefined` as `(no output)`, anything else as text. Functions, symbols, BigInts inside objects and
   * cycles are errors. (`object` rather than `JsonValue`, so that values typed by an interface are
   * accepted; TypeScript does not let interfaces satisfy an index signature.)
   */
  export type ToolResult = string | number | boolean | null | undefined | void | object;

  /** `export async function dispatch(name, args)`: called with the schema name and the arguments. */
  export type DispatchFunction = (name: string, args: ToolArgs) => ToolResult | Promise<ToolResult>;

  /**
   * `export function cli_main(argv)`: receives the raw command-line words after the tool name, and the
   * Anima's folder second (what `dispatch`'s args carry as `anima_dir`).
   */
  export type CliMainFunction = (argv: string[], animaDir: string) => ToolResult | Promise<ToolResult>;
}
