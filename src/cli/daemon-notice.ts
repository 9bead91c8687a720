import { closeSync, openSync } from "node:fs";
import type { EndpointPaths } from "../endpoint/paths.js";

/**
 * The one notice a caller gets when a call of theirs leaves a daemon running (issue #35: `npm run demo`
 * left a process of ≈ 180 MB behind for 15 minutes without a word). Part of the thin client: node:fs only.
 *
 * Shown once per data dir and machine, not once per daemon start: a daemon that exits when idle is
 * started again by the next call, and an Anima that calls tools all day would otherwise find the same
 * paragraph in its Bash output every quarter of an hour. Whoever has seen it once knows where to look
 * (`animaworks-tool daemon --help`). A marker file beside the daemon's socket remembers it; it is per
 * machine name like the socket, since a daemon is a process of one machine.
 */

/** Default idle time of a daemon, s (HOST_DEFAULTS.daemonIdleTimeoutMs; the client loads no host code). */
export const DEFAULT_DAEMON_IDLE_SECONDS = 900;

/**
 * Claims the notice for this data dir: true the first time (the marker is made now), false once it was
 * shown, or when a daemon was started explicitly (`daemon start` claims it without showing it: whoever
 * ran that knows). A marker that cannot be made (a full disk) leaves the notice to be shown: saying too
 * much once more is better than leaving a process behind unannounced.
 */
export function claimDaemonNotice(paths: EndpointPaths): boolean {
  try {
    closeSync(openSync(paths.noticed, "wx", 0o600));
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "EEXIST";
  }
}

/** The notice, on the caller's stderr (never stdout: `-j` output stays one JSON document). */
export function daemonNotice(pid: number | undefined, dataDir: string, idleSeconds: number): string {
  const target = `animaworks-tool --data-dir ${shellQuoted(dataDir)}`;
  return [
    `Note: animaworks-tool started a daemon${pid !== undefined ? ` (pid ${pid})` : ""} for ${dataDir}, so that later calls start faster.`,
    `  It stays in the background (≈ 180 MB with its sandbox processes) until ${duration(idleSeconds)} pass without a call.`,
    `  Stop it now: ${target} daemon stop    Its state: ${target} daemon status`,
    `  Run calls without one: --no-daemon, or ANIMAWORKS_NO_DAEMON=1, or "daemon": false in config.json's "animaworks_tool" section.`,
    "  (This note is shown once for this data dir.)",
    "",
  ].join("\n");
}

/**
 * The idle time the started daemon will have, as `resolveConfig` finds it for a daemon a call starts:
 * `$ANIMAWORKS_DAEMON_IDLE_SECONDS`, else config.json's `daemon_idle_seconds`, else 15 min. A value that
 * is not a positive number is the in-process call's to report; the notice then names the default.
 */
export function daemonIdleSeconds(environmentValue: string | undefined, configValue: unknown): number {
  const fromEnvironment = environmentValue !== undefined && environmentValue.trim() !== "" ? Number(environmentValue) : undefined;
  for (const value of [fromEnvironment, configValue]) if (typeof value === "number" && Number.isFinite(value) && value > 0) return value;
  return DEFAULT_DAEMON_IDLE_SECONDS;
}

function duration(seconds: number): string {
  if (seconds >= 120 && seconds % 60 === 0) return `${seconds / 60} minutes`;
  return `${seconds} s`;
}

/** A path as one shell word (quoted only when it needs to be), so the stop command can be pasted as is. */
function shellQuoted(path: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(path) ? path : `'${path.replace(/'/g, `'\\''`)}'`;
}
