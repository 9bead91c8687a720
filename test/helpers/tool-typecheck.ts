import { join } from "node:path";
import ts from "typescript";
import { REPO_ROOT } from "./tools.js";

/**
 * Type-checks tool files as an author's editor would: strict, against the published declaration of
 * `@animaworks/tool` (sandbox/animaworks-tool.d.ts), with no Node types. The diagnostics, none when clean.
 */
export function typeCheckTools(files: readonly string[]): readonly ts.Diagnostic[] {
  const program = ts.createProgram([join(REPO_ROOT, "sandbox", "animaworks-tool.d.ts"), ...files], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    skipLibCheck: true,
    types: [],
    lib: ["lib.es2022.d.ts"],
  });
  return ts.getPreEmitDiagnostics(program);
}
