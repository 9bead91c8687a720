import { join, resolve } from "node:path";
import { type Environment, animaDirIn, dataDirIn, defaultDataDirIn } from "../environment.js";
import { ToolHostError } from "../errors.js";
import { type OptionSpec, scanArgs } from "./options.js";

/**
 * How a command line is read before anything runs: the CLI's own options, the data dir and the Anima.
 * Shared by the CLI (`main.ts`) and its thin client (`src/cli/client.ts`), which must find the same
 * data dir to reach the host running for it; so this module imports nothing but node:path, the
 * environment readers, the error type and the option scanner (options.ts).
 */

/** Options the CLI itself understands, wherever they appear before the action's own flags. */
export interface GlobalOptions {
  anima?: string;
  dataDir?: string;
  json: boolean;
  help: boolean;
  demo: boolean;
  /** `--no-daemon`: run in this process; neither use nor start a running host. */
  noDaemon: boolean;
  /** `--version`: print the version. */
  version: boolean;
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

const FLAGS: Record<string, "json" | "help" | "demo" | "noDaemon" | "version"> = {
  "-j": "json",
  "--json": "json",
  "-h": "help",
  "--help": "help",
  "--demo": "demo",
  "--no-daemon": "noDaemon",
  "--version": "version",
};

const GLOBAL_SPEC: OptionSpec = {
  ...Object.fromEntries(Object.keys(VALUE_OPTIONS).map((name) => [name, "value" as const])),
  ...Object.fromEntries(Object.keys(FLAGS).map((name) => [name, "flag" as const])),
};

/** Commands that always run in the calling process: they hold a terminal or stdio, or manage the host. */
export const LOCAL_COMMANDS: ReadonlySet<string> = new Set(["mcp", "serve", "daemon", "init"]);

export function emptyOptions(): GlobalOptions {
  return { json: false, help: false, demo: false, noDaemon: false, version: false };
}

/** Removes the CLI's own options from argv (all of them when `leadingOnly` is false). */
export function takeGlobalOptions(argv: readonly string[], options: GlobalOptions, leadingOnly: boolean): string[] {
  const rest: string[] = [];
  for (const token of scanArgs(argv, GLOBAL_SPEC)) {
    if (token.kind === "end") {
      rest.push(...argv.slice(token.index));
      break;
    }
    if (token.kind === "option") {
      const key = VALUE_OPTIONS[token.name];
      if (key) {
        if (token.value === undefined) throw new ToolHostError("InvalidArguments", `option ${token.name} needs a value`);
        (options as unknown as Record<string, unknown>)[key] = token.value;
      } else options[FLAGS[token.name] as (typeof FLAGS)[string]] = true;
      continue;
    }
    if (leadingOnly) {
      rest.push(...argv.slice(token.index));
      break;
    }
    rest.push(token.text);
  }
  return rest;
}

/**
 * Whether the invocation asks for JSON output (`-j`/`--json` anywhere before `--`), read without
 * failing: an error found while reading the rest of argv must still answer in the envelope asked for.
 */
export function jsonRequested(argv: readonly string[]): boolean {
  for (const token of scanArgs(argv, GLOBAL_SPEC)) {
    if (token.kind === "end") return false;
    if (token.kind === "option" && FLAGS[token.name] === "json") return true;
  }
  return false;
}

/** The bundled demo data dir (`--demo`), under the project root. */
export function demoDataDir(projectRoot: string): string {
  return join(projectRoot, "examples", "demo-data");
}

/**
 * Which data dir and Anima the call is for: `--data-dir`/`--demo`/`$ANIMAWORKS_DATA_DIR`, else the data
 * dir that holds `$ANIMAWORKS_ANIMA_DIR`, else `~/.animaworks`; the Anima from `--anima` or the basename
 * of `$ANIMAWORKS_ANIMA_DIR` (which must lie in `{dataDir}/animas/`). Relative paths are taken from `cwd`.
 */
export function resolveIdentity(options: GlobalOptions, env: Environment, cwd: string, projectRoot: string): { dataDir: string; anima: string | undefined } {
  // An empty --data-dir would resolve to the working directory and make a data dir of it.
  if (options.dataDir !== undefined && options.dataDir.trim() === "") {
    throw new ToolHostError("InvalidArguments", "--data-dir is empty", "give the AnimaWorks data dir, e.g. --data-dir ~/.animaworks");
  }
  const envAnimaDir = animaDirIn(env, cwd);
  let dataDir = options.dataDir !== undefined ? resolve(cwd, options.dataDir) : options.demo ? demoDataDir(projectRoot) : dataDirIn(env, cwd);
  if (options.anima !== undefined) return { dataDir: dataDir ?? defaultDataDirIn(env, cwd), anima: options.anima };
  if (options.demo) return { dataDir: dataDir ?? demoDataDir(projectRoot), anima: "demo" };
  if (!envAnimaDir) return { dataDir: dataDir ?? defaultDataDirIn(env, cwd), anima: undefined };
  const parts = envAnimaDir.split("/");
  const name = parts.pop() as string;
  const parent = parts.join("/");
  dataDir ??= parent.endsWith("/animas") ? parent.slice(0, -"/animas".length) : defaultDataDirIn(env, cwd);
  if (join(dataDir, "animas", name) !== envAnimaDir) {
    throw new ToolHostError(
      "InvalidArguments",
      `ANIMAWORKS_ANIMA_DIR (${envAnimaDir}) is not an Anima folder of the data dir ${dataDir}`,
      "set ANIMAWORKS_DATA_DIR to the data dir that holds it, or pass --anima NAME",
    );
  }
  return { dataDir, anima: name };
}
