import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PROJECT_ROOT } from "../../project-root.js";

/**
 * The interpreter snapshot the build makes (scripts/python-snapshot.mjs): a memory snapshot of a booted
 * interpreter, taken by a boot in the build's own process before any tool code ran, which every sandbox
 * process then restores for its first Python interpreter (≈ 0.5 s) instead of booting one (≈ 1.2 s).
 *
 * Invariants:
 *  - It is used only when it was made from exactly the files a boot reads now (`runtimeStamp`: Pyodide's
 *    files, the standard library, the runtime's script and Python modules); otherwise a process makes its
 *    own from its first boot, as without it.
 *  - It is build output, as trusted as the runtime's files beside it; no tool code ever ran in it.
 *  - What every interpreter restored from it shares: Python's string hash key (`random` is reseeded after
 *    each restore). The snapshot is made by each install's own build, so the key is that install's, not
 *    the package's; a process's own snapshot shared it among that process's interpreters before.
 */
export const INTERPRETER_SNAPSHOT_FILE = join(PROJECT_ROOT, "dist", "python", "interpreter.snapshot");
/** `{ "stamp": runtimeStamp }` of the files the snapshot was made from. */
export const INTERPRETER_SNAPSHOT_STAMP_FILE = join(PROJECT_ROOT, "dist", "python", "interpreter.json");

/** What a boot reads, as python-boot.ts holds it. */
export interface BootInputs {
  asm: string;
  loader: string;
  lockFile: string;
  runtime: string;
  pythonFiles: string;
  binaries: ReadonlyMap<string, Buffer>;
}

/** A hash of everything a boot reads (≈ 17 MB: computed once per process, at its first Python boot). */
export function runtimeStamp(inputs: BootInputs): string {
  // node:crypto on first use: a cold CLI call of a TypeScript tool never loads it.
  const hash = process.getBuiltinModule("node:crypto").createHash("sha256");
  for (const text of [inputs.asm, inputs.loader, inputs.lockFile, inputs.runtime, inputs.pythonFiles]) hash.update(`${text.length}:`).update(text);
  for (const [name, bytes] of [...inputs.binaries].sort(([a], [b]) => a.localeCompare(b))) hash.update(`${name}:${bytes.length}:`).update(bytes);
  return hash.digest("hex");
}

/** The build's snapshot if it was made from files with this stamp; undefined when there is none or it is for others. */
export function buildSnapshot(stamp: string): Buffer | undefined {
  try {
    const recorded = JSON.parse(readFileSync(INTERPRETER_SNAPSHOT_STAMP_FILE, "utf8")) as { stamp?: unknown };
    return recorded.stamp === stamp ? readFileSync(INTERPRETER_SNAPSHOT_FILE) : undefined;
  } catch {
    return undefined;
  }
}
