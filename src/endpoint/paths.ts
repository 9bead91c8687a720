import { closeSync, constants, lstatSync, mkdirSync, openSync, readFileSync, chmodSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/**
 * Where a data dir's host endpoint lives, and the checks that keep it the owner's alone. Loaded by the
 * thin client too: node:fs and node:path only.
 *
 * Invariants:
 * - The socket and its lock files are in `{dataDir}/state/animaworks-tool/endpoint/`, a directory of mode
 *   0700 owned by the user: only that user can reach the socket (Linux checks search permission on the
 *   directory before a connect).
 * - Names carry the machine's host name: workers on several machines may share a data dir (over NFS), and
 *   a socket, like a pid, only means something on the machine that made it.
 */
export interface EndpointPaths {
  dir: string;
  socket: string;
  /** Held (O_EXCL, with the holder's pid) while a process checks for and takes over the socket. */
  lock: string;
  /** Written by the client that starts a daemon, so that concurrent first calls start one. */
  starting: string;
  /** The daemon's stdout and stderr. */
  log: string;
  /** Made when a caller was first told that a call of theirs started a daemon (cli/daemon-notice.ts). */
  noticed: string;
}

export function endpointPaths(dataDir: string, hostname: string): EndpointPaths {
  const dir = join(dataDir, "state", "animaworks-tool", "endpoint");
  const name = hostname.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 64) || "localhost";
  // `dir` is normalized (join) and each file name has a suffix (never "." or ".."), so appending is what
  // join would give; five more joins cost the thin client ≈ 0.2–0.7 ms of V8 tiering on a served call.
  const file = (suffix: string): string => `${dir}/${name}.${suffix}`;
  return { dir, socket: file("sock"), lock: file("lock"), starting: file("starting"), log: file("log"), noticed: file("daemon-noticed") };
}

/**
 * True when `dir` is a real directory (not a link) owned by this user that no one else may enter. The
 * client talks only to a socket in such a directory.
 */
export function isPrivateDir(dir: string): boolean {
  let stats;
  try {
    stats = lstatSync(dir, { throwIfNoEntry: false });
  } catch {
    return false; // ENOTDIR (the data dir is a file), EACCES (a folder on the way is closed): no endpoint there
  }
  return stats !== undefined && stats.isDirectory() && stats.uid === process.getuid?.() && (stats.mode & 0o077) === 0;
}

/** Creates the endpoint directory (mode 0700), or tightens one of ours; refuses a link or another user's. */
export function makePrivateDir(dir: string): void {
  mkdirSync(dirname(dir), { recursive: true });
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const stats = lstatSync(dir);
  if (!stats.isDirectory() || stats.uid !== process.getuid?.()) {
    throw new Error(`${dir} is not a directory of this user; remove it so the host can make its own`);
  }
  if ((stats.mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

/** Longest socket path the kernel takes (sun_path is 108 bytes with its terminating NUL), with margin. */
const MAX_SOCKET_PATH_BYTES = 100;
const heldDirs = new Map<string, number>();

/**
 * The address to bind or connect to for `socket`. A path too long for a socket address is reached
 * through `/proc/self/fd/N/` of a descriptor held on its directory, which names the same directory in
 * a few bytes (the socket file itself is made in, and found in, the real directory).
 */
export function socketAddress(socket: string): string {
  if (Buffer.byteLength(socket) <= MAX_SOCKET_PATH_BYTES) return socket;
  const dir = dirname(socket);
  let fd = heldDirs.get(dir);
  if (fd === undefined) {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    heldDirs.set(dir, fd);
  }
  return `/proc/self/fd/${fd}/${basename(socket)}`;
}

/** Lets go of the descriptor `socketAddress` may hold for a long path (when the endpoint closes). */
export function releaseSocketAddress(socket: string): void {
  const dir = dirname(socket);
  const fd = heldDirs.get(dir);
  if (fd === undefined) return;
  heldDirs.delete(dir);
  closeSync(fd);
}

/**
 * The build of the install at `projectRoot`: `dist/cli/build-id`, a content hash written by
 * scripts/bundle-cli.mjs. A client and a host of different builds never run each other's calls.
 */
export function readBuildInfo(projectRoot: string): { build: string; install: string } {
  let build = "unbuilt";
  try {
    build = readFileSync(join(projectRoot, "dist", "cli", "build-id"), "utf8").trim() || build;
  } catch {
    // a source checkout without `npm run build`: only hosts of the same checkout match
  }
  return { build, install: projectRoot };
}
