import { readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import * as library from "../../src/index.js";

/**
 * The library's public surface is what src/index.ts exports (package.json "exports"). This pins its names
 * and their kinds, so that a change to it is a decision made in this file, never a side effect of a
 * refactoring. (A change of a type's shape is the type checker's and the API docs' business.)
 */
const EXPECTED = {
  // values
  createHost: "function",
  ERROR_TYPES: "array",
  EXIT_CODES: "object",
  ToolHostError: "class",
  JobService: "class",
  startMcpServer: "function",
  // types
  AnimaReport: "type",
  AuditEvent: "type",
  AuditLog: "type",
  AuditReader: "type",
  AuditRecord: "type",
  CallOptions: "type",
  CallResult: "type",
  ErrorInfo: "type",
  ErrorType: "type",
  Fault: "type",
  HostOptions: "type",
  Job: "type",
  JobProgress: "type",
  JobResult: "type",
  JobServiceOptions: "type",
  JobStatus: "type",
  JobStore: "type",
  LogRecord: "type",
  McpServerHandle: "type",
  McpServerOptions: "type",
  RunWorkerOptions: "type",
  SchemaInfo: "type",
  SubmitOptions: "type",
  SubmittedJob: "type",
  ToolHost: "type",
  ToolInfo: "type",
  ToolListing: "type",
  WaitOptions: "type",
  WireError: "type",
};

/** Every name src/index.ts exports, as "type" (type-only) or "value", read from its syntax. */
function declaredExports(): Record<string, "type" | "value"> {
  const file = join(PROJECT_ROOT, "src", "index.ts");
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, false, ts.ScriptKind.TS);
  const names: Record<string, "type" | "value"> = {};
  for (const statement of source.statements) {
    const exported = ts.canHaveModifiers(statement) && ts.getModifiers(statement)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    if (ts.isExportDeclaration(statement)) {
      // `export * from` would make the surface whatever another module exports: not allowed here.
      if (!statement.exportClause || !ts.isNamedExports(statement.exportClause)) throw new Error("src/index.ts: name every export (no export *)");
      for (const element of statement.exportClause.elements) names[element.name.text] = statement.isTypeOnly || element.isTypeOnly ? "type" : "value";
    } else if (exported) {
      throw new Error(
        `src/index.ts: declare exports in the modules they belong to and re-export them by name (found: ${statement.getText(source).slice(0, 60)})`,
      );
    }
  }
  return names;
}

function runtimeKind(value: unknown): string {
  if (typeof value === "function") return /^class\b/.test(Function.prototype.toString.call(value)) ? "class" : "function";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

describe("the public API (src/index.ts)", () => {
  it("exports exactly these names, of these kinds", () => {
    const declared = declaredExports();
    const kinds: Record<string, string> = {};
    for (const [name, kind] of Object.entries(declared)) kinds[name] = kind === "type" ? "type" : runtimeKind((library as Record<string, unknown>)[name]);
    expect(kinds).toEqual(EXPECTED);
  });

  it("has at run time exactly the value exports it declares", () => {
    const values = Object.entries(declaredExports())
      .filter(([, kind]) => kind === "value")
      .map(([name]) => name);
    expect(Object.keys(library).sort()).toEqual(values.sort());
  });

  it("keeps the documented error types and exit codes", () => {
    expect(library.ERROR_TYPES).toEqual([
      "InvalidArguments",
      "ToolNotFound",
      "LoadError",
      "Timeout",
      "MemoryLimit",
      "PermissionDenied",
      "SandboxViolation",
      "ToolConfigError",
      "ExecutionError",
      "NotFound",
      "SandboxCrashed",
      "Busy",
    ]);
    expect(library.EXIT_CODES).toEqual({
      ExecutionError: 1,
      ToolConfigError: 1,
      SandboxCrashed: 1,
      Busy: 1,
      InvalidArguments: 2,
      NotFound: 2,
      Timeout: 3,
      MemoryLimit: 3,
      PermissionDenied: 4,
      SandboxViolation: 4,
      ToolNotFound: 5,
      LoadError: 6,
    });
  });
});
