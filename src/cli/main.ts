import { statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { formatLogRecord, processEnvironment, resolveConfig } from "../config.js";
import type { LogRecord } from "../host-options.js";
import { PROJECT_ROOT } from "../project-root.js";
import { ToolHostError, errorInfoOf } from "../errors.js";
import { type CallResult, type ToolHost, callRefusalsOf } from "../host-api.js";
import { hostFromConfig } from "../host.js";
import { RESERVED_NAMES } from "../registry/discovery.js";
import { actionOf, actionsHint } from "../registry/actions.js";
import { parseToolFlags, splitAction } from "./flags.js";
import { actionHelp, describeText, listText, toolHelp, topLevelHelp } from "./help.js";
import { type GlobalOptions, LOCAL_COMMANDS, emptyOptions, jsonRequested, resolveIdentity, takeGlobalOptions } from "./invocation.js";
import { type Output, printError, printResult, terminalSafeOutput } from "./output.js";
import { UnreadableFile, argumentFileError, readRegularFile } from "../regular-file.js";
import { Declined, type InvocationContext, MAX_ARGUMENTS_BYTES, stdinTooLarge } from "../endpoint/invocation.js";

/**
 * Runs the CLI; returns the exit code (docs/design.md §4). Never throws, except `Declined` from
 * `context.hostFor` (before anything ran).
 */
export async function main(argv: string[], out: Output = defaultOutput(), context: Partial<InvocationContext> = {}): Promise<number> {
  const ctx: InvocationContext = {
    env: context.env ?? processEnvironment(),
    cwd: context.cwd ?? process.cwd(),
    ...(context.stderrIsTerminal !== undefined ? { stderrIsTerminal: context.stderrIsTerminal } : {}),
    readStdin: context.readStdin ?? readStdin,
    ...(context.signal ? { signal: context.signal } : {}),
    ...(context.hostFor ? { hostFor: context.hostFor } : {}),
  };
  const options = emptyOptions();
  let host: ToolHost | undefined;
  try {
    const rest = takeGlobalOptions(argv, options, true);
    // --anima / --data-dir / --demo may also follow the command or the tool name: find them first.
    const identityOptions = emptyOptions();
    takeGlobalOptions(argv, identityOptions, false);
    // init makes the data dir, so it runs before the data dir must exist, and needs no host.
    if (rest[0] === "init") {
      if (ctx.hostFor) throw new Declined("command", '"init" runs in the calling process');
      const { runInit } = await import("./init.js");
      return await runInit(takeGlobalOptions(rest.slice(1), options, false), options, out, ctx.env, ctx.cwd);
    }
    const { dataDir, anima } = resolveIdentity(identityOptions, ctx.env, ctx.cwd, PROJECT_ROOT);
    // A mistyped data dir must not silently become a new tree (logs, caches, job stores): only an
    // existing directory is used; AnimaWorks' own set-up creates it.
    const dataDirProblem = dataDirProblemOf(dataDir);
    if (dataDirProblem !== undefined) {
      // Help and the version need no data dir (and list no tools without one).
      if (options.version) return (out.stdout(`animaworks-tool ${await packageVersion()}`), 0);
      if (options.help || identityOptions.help) return (out.stdout(topLevelHelp(undefined)), 0);
      if (rest.length === 0) return (out.stderr(topLevelHelp(undefined)), 2);
      throw new ToolHostError(
        "NotFound",
        `the data dir ${dataDir} ${dataDirProblem}`,
        "check --data-dir, $ANIMAWORKS_DATA_DIR or $ANIMAWORKS_ANIMA_DIR (or make one: animaworks-tool init DIR)",
      );
    }
    const osSandbox = osSandboxOption(options.osSandbox ?? identityOptions.osSandbox);
    const jobsUrl = options.jobsUrl ?? identityOptions.jobsUrl;
    const flags = { dataDir, ...(osSandbox !== undefined ? { osSandbox } : {}), ...(jobsUrl !== undefined ? { jobsUrl } : {}) };
    // The invocation's own settings: its flags, its environment (also when a running host serves it), the
    // data dir's config.json, the defaults. Log lines go through the CLI's own stderr writer (synchronous;
    // process.stderr would load Node's stream modules, ≈ 10 ms of a one-shot call).
    const settings = resolveConfig({ ...flags, onLog: (record: LogRecord): void => out.stderr(formatLogRecord(record)) }, ctx.env);
    if (ctx.hostFor) {
      if (rest[0] !== undefined && LOCAL_COMMANDS.has(rest[0])) throw new Declined("command", `"${rest[0]}" runs in the calling process`);
      host = ctx.hostFor({ config: settings, onLog: settings.onLog });
    } else {
      // Long-running commands get supervised sandbox processes; a one-shot call runs isolates in-process.
      const longRunning = rest[0] === "mcp";
      // An operator who requires the OS sandbox gets it for one-shot calls too (at the cost of a start).
      host = hostFromConfig({ ...settings, isolation: longRunning || settings.osSandbox === "required" ? "process" : "in-process" });
    }
    return await run(host, rest, options, anima, out, ctx);
  } catch (error) {
    if (error instanceof Declined) throw error;
    // -j may stand anywhere (after the tool's name, where people type it), also when the error came
    // before the rest of argv was read.
    return printError(out, errorInfoOf(error), options.json || jsonRequested(argv));
  } finally {
    // Closing must not turn an answered call into a thrown one (a stack trace, no exit code).
    await host?.close().catch((error: unknown) => out.stderr(`animaworks-tool: the host did not close cleanly: ${errorInfoOf(error).message}`));
    if (host && !host.canExitCleanly()) hostHoldsStuckThread = true;
  }
}

/** Why `dataDir` cannot be the data dir ("does not exist", "is not a directory"), or undefined when it can. */
function dataDirProblemOf(dataDir: string): string | undefined {
  let stats;
  try {
    stats = statSync(dataDir, { throwIfNoEntry: false });
  } catch (error) {
    // ENOTDIR: a path through a regular file (--data-dir /etc/passwd/x); EACCES: a folder on the way is closed.
    const code = (error as NodeJS.ErrnoException).code;
    return code === "ENOTDIR" ? "does not exist" : `cannot be reached (${code ?? "error"})`;
  }
  if (stats === undefined) return "does not exist";
  return stats.isDirectory() ? undefined : "is not a directory";
}

/** Set when a host of this process was left with an isolate that could not be stopped (see `exitProcess`). */
let hostHoldsStuckThread = false;

/**
 * Ends the CLI process with `code`, once its output is written (the launcher waits for any output it had
 * to hand to Node's streams). A one-shot call runs isolates in this process:
 *  - if one of them could not be stopped (a hostile tool isolated-vm cannot interrupt), Node's own exit
 *    would hang or crash on its thread, so the process is ended with SIGKILL instead, after its output
 *    was written (stdout and stderr are synchronous for files, pipes and terminals on Linux). The caller
 *    then sees exit status 137;
 *  - otherwise with `process.exit`, never by letting the event loop run dry: Node 26 collects garbage
 *    once more as it tears its isolate down, and isolated-vm 7's weak callbacks then abort the process
 *    (an assertion, exit status 134) after the result was printed. `process.exit` skips that teardown.
 */
export function exitProcess(code: number): void {
  if (!hostHoldsStuckThread) process.exit(code);
  process.stderr.write("animaworks-tool: a tool's isolate could not be stopped; ending this process with SIGKILL so that it cannot hang\n", () =>
    process.kill(process.pid, "SIGKILL"),
  );
}

/**
 * `out` carries a tool call's own result unchanged (callers pipe it); everything else the CLI prints
 * (help, listings, reports, error lines) goes through `safe`, which escapes control characters: tool
 * names, descriptions and messages are tool-controlled text, never terminal commands.
 */
async function run(host: ToolHost, argv: string[], options: GlobalOptions, anima: string | undefined, out: Output, ctx: InvocationContext): Promise<number> {
  const safe = terminalSafeOutput(out);
  const [word, ...rest] = argv;
  if (options.version) return (out.stdout(`animaworks-tool ${await packageVersion()}`), 0);
  if (word !== undefined && word.startsWith("-") && word !== "--") {
    throw new ToolHostError("InvalidArguments", `unknown option ${word.split("=")[0]}`, "animaworks-tool --help lists the options");
  }
  if (word === undefined) {
    const help = topLevelHelp(await host.list(anima).catch(() => undefined));
    if (options.help) return (safe.stdout(help), 0);
    safe.stderr(help);
    return 2;
  }
  if (RESERVED_NAMES.has(word)) return runCommand(host, word, takeGlobalOptions(rest, options, false), options, anima, safe, ctx);

  try {
    return await runTool(host, word, rest, options, anima, out, ctx);
  } catch (error) {
    // A call refused before it ran (no such tool or action, a tool that failed to build, bad arguments)
    // is still a call asked for: recorded, and answered with its call id. Help and a missing Anima are not.
    const refusals = callRefusalsOf(host);
    if (anima === undefined || options.help || refusals === undefined) throw error;
    const action = splitAction(rest).action;
    return printResult(out, refusals.refusedCall(anima, word, action === undefined ? word : `${word}_${action}`, error), options.json || jsonRequested(rest));
  }
}

async function runTool(
  host: ToolHost,
  word: string,
  rest: string[],
  options: GlobalOptions,
  anima: string | undefined,
  out: Output,
  ctx: InvocationContext,
): Promise<number> {
  const safe = terminalSafeOutput(out);
  const tool = await host.describe(anima, word);
  if (tool.hasCliMain) {
    // cli_main gets the raw argv after the tool name, as in AnimaWorks.
    if (anima === undefined) throw noAnima();
    return printResult(out, await host.callCli(anima, tool.name, rest, ctx.signal ? { signal: ctx.signal } : {}), options.json);
  }
  const toolArgv = takeGlobalOptions(rest, options, false);
  const { action: actionName, flags: flagArgv } = splitAction(toolArgv);
  if (actionName === undefined) {
    if (options.help || toolArgv.length === 0) {
      const text = toolHelp(tool);
      if (options.help) return (safe.stdout(text), 0);
      safe.stderr(text);
      return tool.status === "error" ? 6 : 2;
    }
    throw new ToolHostError("InvalidArguments", `no action given for tool "${word}"`, actionsHint(tool));
  }
  if (tool.status === "error") throw ToolHostError.fromInfo(tool.error ?? { type: "LoadError", fault: "tool", message: "the tool failed to load" });
  const schema = actionOf(tool, actionName);
  if (options.help) return (safe.stdout(actionHelp(tool, schema)), 0);

  const base = await argumentsFromJson(options, ctx);
  const args = { ...base, ...parseToolFlags(schema.parameters, flagArgv) };
  if (anima === undefined) throw noAnima();
  return printResult(out, await host.call(anima, schema.name, args, { ...(ctx.signal ? { signal: ctx.signal } : {}), structured: options.json }), options.json);
}

async function runCommand(
  host: ToolHost,
  command: string,
  argv: string[],
  options: GlobalOptions,
  anima: string | undefined,
  out: Output,
  ctx: InvocationContext,
): Promise<number> {
  switch (command) {
    case "help": {
      const [name, ...extra] = argv;
      if (extra.length > 0) throw new ToolHostError("InvalidArguments", `unexpected argument "${extra[0]}"`, "usage: animaworks-tool help [<tool>]");
      out.stdout(name === undefined ? topLevelHelp(await host.list(anima)) : toolHelp(await host.describe(anima, name)));
      return 0;
    }
    case "list": {
      if (options.help) return (out.stdout("Usage: animaworks-tool list [--anima NAME] [--json]\nLists the tools the Anima can use."), 0);
      if (argv.length > 0)
        throw new ToolHostError("InvalidArguments", `unexpected argument "${argv[0]}"`, "usage: animaworks-tool list [--anima NAME] [--json]");
      const listing = await host.list(anima);
      if (options.json) out.stdout(JSON.stringify({ status: "ok", ...listing }, null, 2));
      else out.stdout(listText(listing));
      return 0;
    }
    case "describe": {
      const name = argv.find((token) => !token.startsWith("-"));
      if (options.help || !name) {
        const usage = "Usage: animaworks-tool describe <tool> [--anima NAME] [--json]";
        if (options.help) return (out.stdout(usage), 0);
        throw new ToolHostError("InvalidArguments", "describe needs a tool name", usage);
      }
      const tool = await host.describe(anima, name);
      if (options.json) out.stdout(JSON.stringify({ status: "ok", tool }, null, 2));
      else out.stdout(describeText(tool));
      return 0;
    }
    case "refresh":
    case "share":
    case "validate": {
      // Commands load their modules on use: a plain tool call must not pay for SQLite, MCP or the lifecycle.
      const { LIFECYCLE_USAGE, runLifecycleCommand } = await import("./lifecycle.js");
      if (options.help) return (out.stdout(LIFECYCLE_USAGE[command]), 0);
      return runLifecycleCommand(host, command, argv, anima, options.json, out, ctx.cwd, hostFromConfig);
    }
    case "mcp": {
      const { MCP_USAGE, runMcp } = await import("./mcp.js");
      if (options.help) return (out.stdout(MCP_USAGE), 0);
      return runMcp(host, anima, out);
    }
    case "audit": {
      const { AUDIT_USAGE, runAudit } = await import("./audit.js");
      if (options.help) return (out.stdout(AUDIT_USAGE), 0);
      return runAudit(host, argv, anima, options.json, out, ctx.cwd);
    }
    case "submit":
    case "jobs":
    case "serve":
      return (await import("./jobs.js")).runJobsCommand(command, argv, {
        host,
        anima,
        json: options.json,
        help: options.help,
        out,
        argumentsFromJson: () => argumentsFromJson(options, ctx),
        hostFactory: hostFromConfig,
        runInvocation: main,
        ...(ctx.stderrIsTerminal !== undefined ? { terminal: ctx.stderrIsTerminal } : {}),
        ...(ctx.signal ? { signal: ctx.signal } : {}),
      });
    case "daemon": {
      const { DAEMON_USAGE, runDaemonCommand } = await import("./daemon.js");
      if (options.help) return (out.stdout(DAEMON_USAGE), 0);
      return runDaemonCommand(argv, { host, json: options.json, out, env: ctx.env, hostFactory: hostFromConfig, runInvocation: main });
    }
    default:
      throw new ToolHostError(
        "InvalidArguments",
        `"${command}" is reserved for a command that this build of animaworks-tool does not provide yet`,
        "run animaworks-tool --help for the commands available",
      );
  }
}

function osSandboxOption(value: string | undefined): "auto" | "required" | "off" | undefined {
  if (value === undefined || value === "auto" || value === "required" || value === "off") return value;
  throw new ToolHostError("InvalidArguments", `--os-sandbox must be auto, required or off, not ${JSON.stringify(value)}`, "see animaworks-tool --help");
}

async function argumentsFromJson(options: GlobalOptions, ctx: InvocationContext): Promise<Record<string, unknown>> {
  if (options.argsJson !== undefined && options.argsFile !== undefined) {
    throw new ToolHostError("InvalidArguments", "give either --args-json or --args-file, not both");
  }
  let text: string | undefined = options.argsJson;
  let source = "--args-json";
  if (options.argsFile === "-") {
    source = "stdin";
    try {
      text = await ctx.readStdin();
    } catch (error) {
      if (error instanceof ToolHostError) throw error;
      throw new ToolHostError("InvalidArguments", "could not read arguments from stdin");
    }
  } else if (options.argsFile !== undefined) {
    source = options.argsFile;
    try {
      text = (await readRegularFile(resolve(ctx.cwd, options.argsFile), MAX_ARGUMENTS_BYTES, ctx.signal)).toString("utf8");
    } catch (error) {
      if (error instanceof UnreadableFile) throw argumentFileError("--args-file", error);
      throw error;
    }
  }
  if (text === undefined) return {};
  // However stdin was read (this process's, a client's through a running host, a test's), the same bound.
  if (source === "stdin" && Buffer.byteLength(text) > MAX_ARGUMENTS_BYTES) throw stdinTooLarge();
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ToolHostError("InvalidArguments", `arguments from ${source} are not valid JSON: ${(error as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ToolHostError("InvalidArguments", `arguments from ${source} must be a JSON object`);
  }
  return value as Record<string, unknown>;
}

/** This process's stdin, up to `MAX_ARGUMENTS_BYTES` (`--args-file - < /dev/zero` must not fill the memory). */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of process.stdin) {
    bytes += (chunk as Buffer).length;
    if (bytes > MAX_ARGUMENTS_BYTES) {
      process.stdin.destroy();
      throw stdinTooLarge();
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function noAnima(): ToolHostError {
  return new ToolHostError("InvalidArguments", "no Anima selected", "pass --anima NAME or set ANIMAWORKS_ANIMA_DIR");
}

function defaultOutput(): Output {
  return {
    stdout: (text) => process.stdout.write(text.endsWith("\n") ? text : `${text}\n`),
    stderr: (text) => process.stderr.write(text.endsWith("\n") ? text : `${text}\n`),
  };
}

export type { CallResult };

/** This build's version, from the project's package.json (read only for `--version`). */
async function packageVersion(): Promise<string> {
  const manifest = JSON.parse(await readFile(resolve(PROJECT_ROOT, "package.json"), "utf8")) as { version?: string };
  return manifest.version ?? "unknown";
}
