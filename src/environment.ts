import { join, resolve } from "node:path";

/**
 * Where the variables that locate the data dir and the Anima are read from a given environment. Only
 * `config.ts` passes this process's own (`process.env`); a long-running host passes the environment a
 * CLI client forwarded, so a call resolves exactly as it would have in the client's process. No imports
 * beyond node:path: the thin CLI client loads this module.
 */
export type Environment = Readonly<Record<string, string | undefined>>;

/** `$ANIMAWORKS_DATA_DIR` if set and non-empty, absolute (relative to `cwd`). */
export function dataDirIn(env: Environment, cwd: string): string | undefined {
  const value = env["ANIMAWORKS_DATA_DIR"]?.trim();
  return value ? resolve(cwd, expandHome(value, env)) : undefined;
}

/** `$ANIMAWORKS_ANIMA_DIR` if set and non-empty, absolute (relative to `cwd`). */
export function animaDirIn(env: Environment, cwd: string): string | undefined {
  const value = env["ANIMAWORKS_ANIMA_DIR"]?.trim();
  return value ? resolve(cwd, expandHome(value, env)) : undefined;
}

/** `$ANIMAWORKS_DATA_DIR`, else `~/.animaworks`. */
export function defaultDataDirIn(env: Environment, cwd: string): string {
  return dataDirIn(env, cwd) ?? join(homeDirIn(env), ".animaworks");
}

/** `$HOME`, else the account's home folder (node:os is loaded only when HOME is unset). */
export function homeDirIn(env: Environment): string {
  const home = env["HOME"];
  return home && home !== "" ? home : process.getBuiltinModule("node:os").homedir();
}

export function expandHome(path: string, env: Environment): string {
  return path === "~" || path.startsWith("~/") ? join(homeDirIn(env), path.slice(1)) : path;
}

/** `$ANIMAWORKS_NO_DAEMON` set to 1, true or yes: CLI calls neither use nor start a running host. */
export function noDaemonIn(env: Environment): boolean {
  return /^(1|true|yes)$/i.test(env["ANIMAWORKS_NO_DAEMON"]?.trim() ?? "");
}
