/**
 * Which runtime a bundle needs, read from its text: a Python tool's bundle (src/bundling/python-bundle.ts)
 * starts with `PYTHON_BUNDLE_MARKER`, which esbuild's output for a TypeScript/JavaScript tool never does
 * (its first line is the host's: `"use strict";` or the IIFE), and the bundler refuses one that would.
 * Read from the text, not sent beside it, so that a bundle pinned by a background job (which keeps only
 * its text and hash) runs as it was built.
 */
export const PYTHON_BUNDLE_MARKER = "// animaworks:python-tool\n";

export function isPythonBundle(code: string): boolean {
  return code.startsWith(PYTHON_BUNDLE_MARKER);
}

/**
 * Time a Python tool's interpreter may take to start, ms: a deadline, never a CPU allowance. A load gets
 * it beside the load timeout (a describe may start one: ≈ 0.5–1 s from its process's snapshot, ≈ 3–5 s
 * without, several times that on a busy machine), and a spare interpreter's boot runs under it. What the
 * judge leaves unjudged of a boot is far shorter and the Anima's (scheduling/boot-allowance.ts).
 */
export const PYTHON_BOOT_GRACE_MS = 30_000;
