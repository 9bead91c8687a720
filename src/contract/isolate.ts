/**
 * The contract between the host and the prelude that runs inside every isolate: the bridge the prelude
 * calls (host functions), the entry object the host calls (prelude functions), the envelopes results
 * leave the isolate in, and the capabilities a tool can ask for, with their positional arguments and
 * their answers. One declaration, type-checked under both tsconfigs: the host's (tsconfig.json, Node)
 * and the isolate's (sandbox/tsconfig.json, standard ECMAScript only).
 *
 * Rules of this module (the prelude script inlines it, see src/isolation/isolate/prelude-source.ts):
 *  - Types and plain constants only: no functions, no classes, no imports of any kind. Its compiled text
 *    is copied into the prelude's scope with each `export const` made a `const`; anything else there is
 *    refused when the prelude is read.
 *  - The sandbox side sees its constants through sandbox/isolate-contract.d.ts (as `declare const`s).
 *  - Everything that crosses is a string or a number: the isolate is untrusted, so each side of the
 *    host has its own "unchecked" view (every argument `unknown`) and checks what it receives.
 *
 * The names the `@animaworks/tool` module exports, which the prelude needs only as a type, are in
 * tool-api.ts.
 */

// ---- the bridge: host functions the prelude calls ------------------------------------------------

export type LogLevel = "debug" | "info" | "warn" | "error";
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const satisfies readonly LogLevel[];

/** Why the prelude asks the host to end the current call (memory-guards.ts asks for "MemoryLimit"). */
export type StopRequest = "MemoryLimit" | "Timeout";

/**
 * The bridge as the prelude calls it. The host binds it once per context (`BIND_GLOBAL`) as isolated-vm
 * callbacks; the prelude keeps it in closures no tool code reaches.
 */
export interface GuestBridge {
  log: (level: LogLevel, message: string) => void;
  /** Arms timer `id` of the current call; the host fires it through `GuestEntry.fireTimer`. */
  setTimer: (id: number, delayMs: number) => void;
  clearTimer: (id: number) => void;
  /** Asks the host to end the current call now, as `reason`. */
  stop: (reason: StopRequest) => void;
  /**
   * Starts capability call `id`: `argsJson` is the JSON text of `CapabilityArgs<name>`. The host answers
   * through `GuestEntry.settleCapabilities`.
   */
  capability: (id: number, name: CapabilityName, argsJson: string) => void;
}

export type BridgeMethod = keyof GuestBridge;

/** The bridge's functions in the order the host passes them to `BIND_GLOBAL` (pooled-isolate.ts). */
export const BRIDGE_METHODS = ["log", "setTimer", "clearTimer", "stop", "capability"] as const satisfies readonly BridgeMethod[];

/** Each position of a tuple as the receiving side sees it before checking: `unknown`. */
export type Unchecked<T extends readonly unknown[]> = { [I in keyof T]: unknown };

/**
 * The bridge as the host implements it (isolate-bridge.ts): the same functions, each argument unchecked,
 * since the isolate may call them with anything. They never throw into the isolate.
 */
export type HostBridge = { [M in BridgeMethod]: (...args: Unchecked<Parameters<GuestBridge[M]>>) => void };

// ---- the entry object: prelude functions the host calls -------------------------------------------

/** The global function through which the host binds its bridge and receives the entry object (once per context). */
export const BIND_GLOBAL = "__awBind";

/** What a context is bound for (`BIND_GLOBAL`'s second argument): a TypeScript/JavaScript tool, or a Python tool. */
export type ContextFlavour = "tool" | "python";

/** How a call enters the tool: `dispatch`/a function named by the schema, or `cli_main(argv)`. */
export type CallEntryKind = "call" | "cli";
/** A `cli` call's payload: the argv after the tool's name, and the Anima's folder (cli_main's second argument). */
export type CliPayload = { argv: string[]; anima_dir: string };

/**
 * What the prelude hands the host through `BIND_GLOBAL` (the host keeps each function as an isolated-vm
 * reference; tool code never reaches them). Results leave as one string: a JSON envelope.
 */
export interface GuestEntry {
  /** The module's exports, schemas and profile: JSON text of a `DescribeEnvelope`. */
  describe: () => Promise<string>;
  /**
   * Runs a call: JSON text of a `CallEnvelope`. `payloadJson` is the JSON of the arguments object (of a `CliPayload` for `cli`);
   * results longer than `maxResultBytes` are cut; log lines beyond `maxLogLines` are dropped and longer than `maxLogLineChars` cut.
   */
  call: (
    entry: CallEntryKind,
    schemaName: string,
    payloadJson: string,
    maxResultBytes: number,
    maxLogLines: number,
    maxLogLineChars: number,
  ) => Promise<string>;
  fireTimer: (id: number) => void;
  /** Answers capability calls: JSON text of a `CapabilityAnswerBatch` (all answers ready when the host entered). */
  settleCapabilities: (batchJson: string) => void;
  /**
   * Hands over the next piece of capability call `id`'s text, ahead of its answer (`{ ok: true, pieced:
   * true }`: the value is the pieces joined, in order). Long texts come this way, a piece per entry.
   */
  receiveText: (id: number, piece: string) => void;
  /**
   * Collects the isolate's garbage and gives back the memory V8 no longer needs (a "last resort" full
   * collection), between calls only. False when it cannot: no `COLLECT_GARBAGE_GLOBAL` in this process,
   * or a Python context (its memory is WebAssembly's, which no collection shrinks).
   */
  compact: () => boolean;
}

export type EntryMethod = keyof GuestEntry;

// ---- envelopes: how results leave the isolate -----------------------------------------------------

/**
 * A failure as the prelude frames it. `errorType` is the prelude's own ("ExecutionError", "LoadError",
 * "MemoryLimit", "ToolConfigError", `INVALID_INPUT_ERROR_TYPE`) or the type the host gave a denial the tool
 * did not catch; the host decides which of them pass, and as what (envelope.ts). "MemoryLimit" is never
 * an outcome by itself: the host decides a memory limit from its own findings (the prelude's stop request,
 * an isolate disposed at its limit).
 */
export interface FailureEnvelope {
  ok: false;
  errorType: string;
  /** At most `MAX_TOOL_MESSAGE_CHARS`, cut as src/isolation/wire/tool-text.ts `boundToolMessage` cuts. */
  message: string;
  /**
   * The thrown value's `stack` as the tool left it, its first `MAX_TOOL_STACK_CHARS` characters: untrusted
   * text (a tool can write anything there), read only for positions in the tool's own bundle, which the
   * host maps through the bundle's source map (src/isolation/isolate/tool-frames.ts, src/bundling/tool-frames.ts).
   */
  stack?: string;
}

export type ResultEnvelope =
  | { ok: true; kind: "none" }
  | {
      ok: true;
      kind: "text" | "json";
      /** Cut to `maxResultBytes` characters when longer than `maxResultBytes` UTF-8 bytes (the host makes the exact cut). */
      text: string;
      /** UTF-8 size of the whole result as the tool produced it. */
      bytes: number;
      truncated: boolean;
    };

/** What `GuestEntry.call` answers. `recycle`: the isolate must not serve another call (a budget was used up). */
export type CallEnvelope = (ResultEnvelope | FailureEnvelope) & { recycle?: boolean };

/** What `GuestEntry.describe` answers. Schemas and profile are the module's values as plain JSON (untrusted). */
export type DescribeEnvelope = { ok: true; exports: Record<string, string>; schemas: unknown; profile: unknown } | (FailureEnvelope & { recycle?: boolean });

/**
 * The `errorType` of a tool's `InvalidInput` (its own check of its input failed). All it can claim: the host
 * makes it `InvalidArguments` with fault `caller` (exit 2), with the tool's message cut as any tool message,
 * and no hint; whatever else the tool puts in its envelope is decided by the host as for any failure.
 */
export const INVALID_INPUT_ERROR_TYPE = "InvalidInput";

/**
 * Longest error message a tool's failure or load error carries out of the sandbox, in characters. The
 * text is the tool's own, and goes on to the audit log, the terminal, MCP clients and other processes.
 */
export const MAX_TOOL_MESSAGE_CHARS = 4_000;

/** Longest `FailureEnvelope.stack` the prelude sends, in characters (ten V8 frames take ≈ 1,000). */
export const MAX_TOOL_STACK_CHARS = 4_000;

// ---- limits both sides keep (the host on its own counts; the prelude only to fail early) -----------

/** Timers one call may have pending. */
export const MAX_TIMERS_PER_CALL = 1_000;
/** Longest timer delay, ms (as in Node: 2^31 - 1). */
export const MAX_TIMER_DELAY_MS = 2_147_483_647;
/**
 * Capability calls one call may have in flight, as the prelude counts them (the host's own limit is
 * `CapabilityLimits.maxInFlightPerCall` in call-ledger.ts, 64 by default).
 */
export const MAX_CAPABILITIES_IN_FLIGHT = 64;

// ---- capabilities ----------------------------------------------------------------------------------

/**
 * A value the tool passed and the prelude forwards as it is: the host checks it (paths, URLs, names),
 * never the prelude.
 */
export type FromTool = unknown;

export type FileEncoding = "utf8" | "base64";
export type FileType = "file" | "directory" | "symlink" | "other";

/** `fetch`'s second argument: the tool's options, with a body already turned into text. */
export interface FetchInit {
  method: FromTool;
  headers: FromTool;
  timeoutMs: FromTool;
  responseType: FromTool;
  body?: string;
  bodyEncoding?: FileEncoding;
}

export interface FetchAnswer {
  status: number;
  statusText: string;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** The final URL, after redirects. */
  url: string;
  redirected: boolean;
  /** text: the text; json: the JSON text (`null` for an empty body); bytes: base64. */
  body: string;
}

export interface CredentialRequest {
  credentialName: FromTool;
  toolName: FromTool;
  keyName: FromTool;
  envVar: FromTool;
}

/**
 * Every capability: its name, its positional arguments as the prelude sends them (JSON text of the
 * tuple) and the value of a successful answer. A call is always made for the Anima of the call that
 * asked, which the host knows; nothing here names one.
 */
export interface CapabilityCalls {
  /** Text as UTF-8, or the bytes as base64. */
  "fs.readFile": { args: [path: FromTool, encoding: FileEncoding]; answer: string };
  "fs.writeFile": { args: [path: FromTool, data: string, encoding: FileEncoding]; answer: null };
  "fs.appendFile": { args: [path: FromTool, data: string, encoding: FileEncoding]; answer: null };
  "fs.readdir": { args: [path: FromTool]; answer: Array<{ name: string; type: FileType }> };
  "fs.stat": { args: [path: FromTool]; answer: { type: FileType; size: number; mtimeMs: number } };
  "fs.exists": { args: [path: FromTool]; answer: boolean };
  "fs.mkdir": { args: [path: FromTool, recursive: boolean]; answer: null };
  "fs.rm": { args: [path: FromTool, recursive: boolean]; answer: null };
  "fs.rename": { args: [from: FromTool, to: FromTool]; answer: null };
  fetch: { args: [url: FromTool, init: FetchInit]; answer: FetchAnswer };
  "credential.get": { args: [request: CredentialRequest]; answer: string };
  /** Reaches only the background job running this call; does nothing in a direct call. */
  "job.progress": { args: [fraction: FromTool, message: FromTool]; answer: null };
  "job.cancelled": { args: []; answer: boolean };
}

export type CapabilityName = keyof CapabilityCalls;
export type CapabilityArgs<N extends CapabilityName> = CapabilityCalls[N]["args"];
export type CapabilityAnswerValue<N extends CapabilityName> = CapabilityCalls[N]["answer"];

/** Every capability name, for the host's check of a name it received. */
export const CAPABILITY_NAMES = [
  "fs.readFile",
  "fs.writeFile",
  "fs.appendFile",
  "fs.readdir",
  "fs.stat",
  "fs.exists",
  "fs.mkdir",
  "fs.rm",
  "fs.rename",
  "fetch",
  "credential.get",
  "job.progress",
  "job.cancelled",
] as const satisfies readonly CapabilityName[];

/** A capability request as the host receives it: a known name, its arguments not checked yet. */
export type UncheckedCapabilityRequest = { [N in CapabilityName]: { name: N; args: Unchecked<CapabilityArgs<N>> } }[CapabilityName];

/** The host's answer to one capability call: the capability's value, or a typed error. */
export type CapabilityAnswer =
  | { ok: true; value: unknown }
  /** The value is the text handed over by `GuestEntry.receiveText` for this call, joined. */
  | { ok: true; pieced: true }
  | { ok: false; error: { type: string; message: string; hint?: string } };

/** What `GuestEntry.settleCapabilities` receives, as JSON text: `[[id, answer], …]`. */
export type CapabilityAnswerBatch = Array<[capabilityId: number, answer: CapabilityAnswer]>;

// ---- checks that the lists above name exactly what the types declare (types only: nothing at run time)

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;
export type ContractChecks = [
  Assert<Same<(typeof BRIDGE_METHODS)[number], BridgeMethod>>,
  Assert<Same<(typeof CAPABILITY_NAMES)[number], CapabilityName>>,
  Assert<Same<(typeof LOG_LEVELS)[number], LogLevel>>,
];
