import { basename, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The project root (the folder holding package.json), found from this file's compiled location: a leaf
 * module, so that the parts that only need to find the install's files (the prelude, the sandbox
 * entry, the build id) import nothing else of the host for it.
 */
export const PROJECT_ROOT = findProjectRoot();

function findProjectRoot(): string {
  // dist/src/project-root.js (or the CLI bundle dist/cli/main.cjs, at the same depth) or src/project-root.ts.
  const here = dirname(fileURLToPath(import.meta.url));
  return basename(dirname(here)) === "dist" ? resolve(here, "..", "..") : resolve(here, "..");
}
