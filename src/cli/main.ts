import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { PROJECT_ROOT, animaDirFromEnv, dataDirFromEnv, defaultDataDir, formatLogRecord, osSandboxFromEnv } from "../config.js";
import { ToolHostError } from "../errors.js";
import { type CallResult, type ToolHost, type ToolInfo, createHost } from "../host.js";
import { RESERVED_NAMES } from "../registry/discovery.js";
import { parseToolFlags } from "./flags.js";
import { actionHelp, describeText, listText, toolHelp, topLevelHelp } from "./help.js";
import { type Output, printError, printResult, terminalSafeOutput } from "./output.js";

/** Options the CLI itself understands, wherever they appear before the action's own flags. */
interface GlobalOptions {
  anima?: string;
  dataDir?: string;
  json: boolean;
  help: boolean;
  demo: boolean;
  argsJson?: string;
  argsFile?: string;
  /** `--os-sandbox auto|required|off` for the commands that run sandbox processes (mcp, serve). */
  osSandbox?: string;
  /** `--jobs-url postgres://…`: background jobs in PostgreSQL (else `$ANIMAWORKS_JOBS_URL`, else SQLite). */
  jobsUrl?: string;
}

const VALUE_OPTIONS: Record<string, keyof GlobalOptions> = {
  "--anima": "anima",
  "--data-dir": "dataDir",
  "--args-json": "argsJson",
  "--args-file": "argsFile",
  "--os-sandbox": "osSandbox",
  "--jobs-url": "jobsUrl",
};
const DEMO_DATA_DIR = join(PROJECT_ROOT, "examples", "demo-data");

/** Runs the CLI; returns the exit code (design.md §4). Never throws. */
export async function main(argv: string[], out: Output = defaultOutput()): Promise<number> {
  const options: GlobalOptions = { json: false, help: false, demo: false };
  let host: ToolHost | undefined;
  try {
    const rest = takeGlobalOptions(argv, options, true);
    // --anima / --data-dir / --demo may also follow the command or the tool name: find them first.
    const identityOptions: GlobalOptions = { json: false, help: false, demo: false };
    takeGlobalOptions(argv, identityOptions, false);
    const { dataDir, anima } = await resolveIdentity(identityOptions);
    // Long-running commands get supervised sandbox processes; a one-shot call runs isolates in-process.
    const longRunning = rest[0] === "mcp";
    // Log lines go through the CLI's own stderr writer (synchronous; process.stderr would load Node's
    // stream modules, ≈ 10 ms of a one-shot call).
    const osSandbox = osSandboxOption(options.osSandbox ?? identityOptions.osSandbox) ?? osSandboxFromEnv();
    host = createHost({
      dataDir,
      // An operator who requires the OS sandbox gets it for one-shot calls too (at the cost of a start).
      isolation: longRunning || osSandbox === "required" ? "process" : "in-process",
      osSandbox,
      ...((options.jobsUrl ?? identityOptions.jobsUrl) !== undefined ? { jobsUrl: (options.jobsUrl ?? identityOptions.jobsUrl) as string } : {}),
      onLog: (record) => out.stderr(formatLogRecord(record)),
    });
    return await run(host, rest, options, anima, out);
  } catch (error) {
    const info = error instanceof ToolHostError ? error.toInfo() : { type: "ExecutionError" as const, message: String(error instanceof Error ? error.message : error) };
    return printError(out, info, options.json);
  } finally {
    await host?.close();
    if (host && !host.canExitCleanly()) hostHoldsStuckThread = true;
  }
}

/** Set when a host of this process was left with an isolate that could not be stopped (see `exitProcess`). */
let hostHoldsStuckThread = false;

/**
 * Ends the CLI process with `code`. A one-shot call runs isolates in this process; if one of them could
 * not be stopped (a hostile tool isolated-vm cannot interrupt), Node's own exit would hang or crash on its
 * thread, so the process is ended with SIGKILL instead, after its output was written (stdout and stderr
 * are synchronous for files, pipes and terminals on Linux). The caller then sees exit status 137.
 */
export function exitProcess(code: number): void {
  if (!hostHoldsStuckThread) {
    process.exitCode = code;
    return;
  }
  process.stderr.write("animaworks-tool: a tool's isolate could not be stopped; ending this process with SIGKILL so that it cannot hang\n", () =>
    process.kill(process.pid, "SIGKILL"),
  );
}

/**
 * `out` carries a tool call's own result unchanged (callers pipe it); everything else the CLI prints
 * (help, listings, reports, error lines) goes through `safe`, which escapes control characters: tool
 * names, descriptions and messages are tool-controlled text, never terminal commands.
 */
async function run(host: ToolHost, argv: string[], options: GlobalOptions, anima: string | undefined, out: Output): Promise<number> {
  const safe = terminalSafeOutput(out);
  const [word, ...rest] = argv;
  if (word === undefined) {
    const help = topLevelHelp(await host.list(anima).catch(() => undefined));
    if (options.help) return safe.stdout(help), 0;
    safe.stderr(help);
    return 2;
  }
  if (RESERVED_NAMES.has(word)) return runCommand(host, word, takeGlobalOptions(rest, options, false), options, anima, safe);

  const tool = await host.describe(anima, word);
  if (tool.hasCliMain) {
    // cli_main gets the raw argv after the tool name, as in AnimaWorks.
    if (anima === undefined) throw noAnima();
    return printResult(out, await host.callCli(anima, tool.name, rest), options.json);
  }
  const toolArgv = takeGlobalOptions(rest, options, false);
  const actionIndex = toolArgv.findIndex((token) => !token.startsWith("-"));
  if (actionIndex < 0) {
    if (options.help || toolArgv.length === 0) {
      const text = toolHelp(tool);
      if (options.help) return safe.stdout(text), 0;
      safe.stderr(text);
      return tool.status === "error" ? 6 : 2;
    }
    throw new ToolHostError("InvalidArguments", `no action given for tool "${word}"`, actionsHint(tool));
  }
  const actionName = toolArgv[actionIndex] as string;
  const flagArgv = [...toolArgv.slice(0, actionIndex), ...toolArgv.slice(actionIndex + 1)];
  if (tool.status === "error") throw ToolHostError.fromInfo(tool.error ?? { type: "LoadError", message: "the tool failed to load" });
  const schema = tool.schemas.find((s) => s.action === actionName);
  if (!schema) throw new ToolHostError("ToolNotFound", `tool "${tool.name}" has no action "${actionName}"`, actionsHint(tool));
  if (options.help) return safe.stdout(actionHelp(tool, schema)), 0;

  const base = await argumentsFromJson(options);
  const args = { ...base, ...parseToolFlags(schema.parameters, flagArgv) };
  if (anima === undefined) throw noAnima();
  return printResult(out, await host.call(anima, schema.name, args), options.json);
}

async function runCommand(host: ToolHost, command: string, argv: string[], options: GlobalOptions, anima: string | undefined, out: Output): Promise<number> {
  switch (command) {
    case "help":
      out.stdout(topLevelHelp(await host.list(anima)));
      return 0;
    case "list": {
      if (options.help) return out.stdout("Usage: animaworks-tool list [--anima NAME] [--json]\nLists the tools the Anima can use."), 0;
      const listing = await host.list(anima);
      if (options.json) out.stdout(JSON.stringify({ status: "ok", ...listing }, null, 2));
      else out.stdout(listText(listing));
      return 0;
    }
    case "describe": {
      const name = argv.find((token) => !token.startsWith("-"));
      if (options.help || !name) {
        const usage = "Usage: animaworks-tool describe <tool> [--anima NAME] [--json]";
        if (options.help) return out.stdout(usage), 0;
        throw new ToolHostError("InvalidArguments", "describe needs a tool name", usage);
      }
      const tool = await host.describe(anima, name);
      if (options.json) out.stdout(JSON.stringify({ status: "ok", tool }, null, 2));
      else out.stdout(describeText(tool));
      return 0;
    }
    case "refresh":
    case "share":
    case "validate":
    {
      // Commands load their modules on use: a plain tool call must not pay for SQLite, MCP or the lifecycle.
      const { LIFECYCLE_USAGE, runLifecycleCommand } = await import("./lifecycle.js");
      if (options.help) return out.stdout(LIFECYCLE_USAGE[command]), 0;
      return runLifecycleCommand(host, command, argv, anima, options.json, out);
    }
    case "mcp":
    {
      const { MCP_USAGE, runMcp } = await import("./mcp.js");
      if (options.help) return out.stdout(MCP_USAGE), 0;
      return runMcp(host, anima);
    }
    case "audit":
    {
      const { AUDIT_USAGE, runAudit } = await import("./audit.js");
      if (options.help) return out.stdout(AUDIT_USAGE), 0;
      return runAudit(host, argv, anima, options.json, out);
    }
    case "submit":
    case "jobs":
    case "serve":
      return (await import("./jobs.js")).runJobsCommand(command, argv, { host, anima, json: options.json, help: options.help, out, argumentsFromJson: () => argumentsFromJson(options) });
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

/** Removes the CLI's own options from argv (all of them when `leadingOnly` is false). */
function takeGlobalOptions(argv: string[], options: GlobalOptions, leadingOnly: boolean): string[] {
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] as string;
    if (token === "--") {
      rest.push(...argv.slice(i));
      break;
    }
    const eq = token.indexOf("=");
    const name = eq >= 0 ? token.slice(0, eq) : token;
    const key = VALUE_OPTIONS[name];
    if (key) {
      const value = eq >= 0 ? token.slice(eq + 1) : argv[++i];
      if (value === undefined) throw new ToolHostError("InvalidArguments", `option ${name} needs a value`);
      (options as unknown as Record<string, unknown>)[key] = value;
    } else if (token === "-j" || token === "--json") options.json = true;
    else if (token === "-h" || token === "--help") options.help = true;
    else if (token === "--demo") options.demo = true;
    else if (leadingOnly) {
      rest.push(...argv.slice(i));
      break;
    } else rest.push(token);
  }
  return rest;
}

/**
 * Which data dir and Anima the call is for: `--data-dir`/`--demo`/`$ANIMAWORKS_DATA_DIR`, else the data
 * dir that holds `$ANIMAWORKS_ANIMA_DIR`, else `~/.animaworks`; the Anima from `--anima` or the basename
 * of `$ANIMAWORKS_ANIMA_DIR` (which must lie in `{dataDir}/animas/`).
 */
async function resolveIdentity(options: GlobalOptions): Promise<{ dataDir: string; anima: string | undefined }> {
  const envAnimaDir = animaDirFromEnv();
  let dataDir = options.dataDir ?? (options.demo ? DEMO_DATA_DIR : dataDirFromEnv());
  if (options.anima !== undefined) return { dataDir: dataDir ?? defaultDataDir(), anima: options.anima };
  if (options.demo) return { dataDir: dataDir ?? DEMO_DATA_DIR, anima: "demo" };
  if (!envAnimaDir) return { dataDir: dataDir ?? defaultDataDir(), anima: undefined };
  const parts = envAnimaDir.split("/");
  const name = parts.pop() as string;
  const parent = parts.join("/");
  dataDir ??= parent.endsWith("/animas") ? parent.slice(0, -"/animas".length) : defaultDataDir();
  if (join(dataDir, "animas", name) !== envAnimaDir) {
    throw new ToolHostError("InvalidArguments", `ANIMAWORKS_ANIMA_DIR (${envAnimaDir}) is not an Anima folder of the data dir ${dataDir}`, "set ANIMAWORKS_DATA_DIR to the data dir that holds it, or pass --anima NAME");
  }
  return { dataDir, anima: name };
}

async function argumentsFromJson(options: GlobalOptions): Promise<Record<string, unknown>> {
  if (options.argsJson !== undefined && options.argsFile !== undefined) {
    throw new ToolHostError("InvalidArguments", "give either --args-json or --args-file, not both");
  }
  let text: string | undefined = options.argsJson;
  let source = "--args-json";
  if (options.argsFile !== undefined) {
    source = options.argsFile === "-" ? "stdin" : options.argsFile;
    try {
      text = options.argsFile === "-" ? await readStdin() : await readFile(options.argsFile, "utf8");
    } catch {
      throw new ToolHostError("InvalidArguments", `could not read arguments from ${source}`);
    }
  }
  if (text === undefined) return {};
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

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function actionsHint(tool: ToolInfo): string {
  return tool.schemas.length > 0 ? `actions: ${tool.schemas.map((s) => s.action).join(", ")}` : "this tool has no actions";
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
