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
