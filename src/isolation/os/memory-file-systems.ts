import { statSync, statfsSync } from "node:fs";

/**
 * The in-memory file systems a sandbox process's tree can write into, and the bytes written there, for
 * the resource watchdog (resource-watchdog.ts): files in bubblewrap's tmpfs `/`, `/tmp` and `/dev` are RAM
 * that no process's resident set shows.
 *
 * Invariants:
 *  - Only mount points are counted, seen through /proc/<pid>/root of the tree's innermost process: the
 *    sandbox can neither replace nor rename them (a directory such as /dev/shm it could swap for a
 *    symlink, which the host would follow from its own root).
 *  - One path per device, and none on a device of the host's own (`hostMemoryDevices`): a tree sharing
 *    the host's file systems (no bwrap) writes there as the host, which these limits do not cover.
 *  - Reading fails soft: a path that cannot be read counts nothing (the process ended, or is ending).
 */

const TMPFS_MAGIC = 0x01021994;

/** Devices of the host's own `/`, `/tmp`, `/dev` and `/dev/shm`. */
export function hostMemoryDevices(): Set<number> {
  return new Set(["/", "/tmp", "/dev", "/dev/shm"].flatMap((path) => deviceOf(path) ?? []));
}

/**
 * The tmpfs mounts of the tree's own mount namespace (bwrap's `/`, `/tmp`, `/dev` with its `shm`),
 * seen through /proc/<inner>/root of its innermost process, one path per device; none where the tree
 * shares the host's (`hostDevices`).
 */
export function memoryFileSystemsOf(inner: number, hostDevices: ReadonlySet<number>): string[] {
  const paths: string[] = [];
  const seen = new Set(hostDevices);
  for (const path of ["", "/tmp", "/dev"]) {
    const full = `/proc/${inner}/root${path}`;
    const device = deviceOf(full);
    if (device === undefined || seen.has(device)) continue;
    seen.add(device);
    try {
      if (statfsSync(full).type === TMPFS_MAGIC) paths.push(full);
    } catch {
      // not readable: not counted
    }
  }
  return paths;
}

const deviceOf = (path: string): number | undefined => {
  try {
    return statSync(path).dev;
  } catch {
    return undefined;
  }
};

/** Bytes in use on the file systems at `paths`. */
export function usedBytes(paths: string[]): number {
  let used = 0;
  for (const path of paths) {
    try {
      const fs = statfsSync(path);
      used += (fs.blocks - fs.bfree) * fs.bsize;
    } catch {
      // the process ended meanwhile
    }
  }
  return used;
}
