import { basename } from "node:path";
import { ToolHostError } from "../errors.js";
import { RESERVED_NAMES, TOOL_EXTENSIONS, TOOL_NAME_PATTERN } from "../registry/discovery.js";
import { findUnawaitedCredentials } from "./credential-await.js";
import { findPromiseUsesOfIsCancelled } from "./cancel-check.js";
import { type DeclarationCheck, checkDeclaration, unusedHandlers } from "./declaration-check.js";
import { type CheckName, type Finding, findingLocation } from "./findings.js";
import { loadFindings } from "./load-findings.js";
import { validatePythonSource } from "./python-checks.js";
import { findSecrets } from "./secrets.js";
import { readToolSource } from "./read-tool-source.js";
import { importProblem } from "./import-check.js";
import { type SourceScan, scanSource } from "./source-scan.js";

/**
 * `animaworks-tool validate <file>`: the Validation Checklist of tool-creator.md as automated checks.
 * Static checks read the source text (see source-scan.ts); with a `load` function the tool is also
 * really loaded (bundled and described in a sandbox) and that load's errors are findings too. Every
 * check runs and every finding is reported, with its line where the source shows one: a new author
 * should fix a draft in one pass, not one error per run.
 *
 * The real load is the authority on schemas and handlers, but stops at the first problems and names no
 * lines; the same checks read from a literal schema list find them all, at their lines. So when the load
 * fails with exactly what those checks found, their findings stand in for its message; when it succeeds,
 * they are dropped (see declaration-check.ts).
 *
 * Levels: `error` = the tool will not work, is unsafe, or breaks the checklist (share refuses it);
 * `warning` = it works, but something the checklist asks for is missing.
 */
export type { CheckName, Finding, FindingLevel } from "./findings.js";

/** What a real load says: `ok`, or the problems that made it fail (each one line). */
export interface LoadCheck {
  ok: boolean;
  problems: string[];
  /** The schema names the tool declared, when it loaded. */
  schemas?: string[];
}
/** Loads the file at `path` as tool `tool` (default: the file's name without its extension). */
export type ToolLoader = (path: string, tool?: string) => Promise<LoadCheck>;
/**
 * Checks a tool name against the tools already installed (see installed-tools.ts): shadowing and schema
 * collisions. `schemas`: the names the real load found, when it loaded.
 */
export type InstalledToolsCheck = (tool: string, schemas: string[] | undefined) => Promise<Finding[]>;

export interface ValidateOptions {
  /** Also load the tool for real (see load-check.ts); its failures become `load` findings. */
  load?: ToolLoader;
  /** Largest source file checked, in bytes. Default: 1 MiB (MAX_TOOL_SOURCE_BYTES). */
  maxSourceBytes?: number;
  /**
   * The tool name the file is checked as (a draft to be installed under another name). Default: the
   * file's name without its extension.
   */
  name?: string;
  /** Also check the name against the installed tools; runs only when the name itself is valid. */
  installed?: InstalledToolsCheck;
}

export interface ValidationReport {
  /** The path as given. */
  path: string;
  /** The tool name the file is checked as (`name`, else the file's name without the extension). */
  tool: string;
  findings: Finding[];
  errors: number;
  warnings: number;
  /** Result of the real load; undefined when none was run (no loader, or the file was not read). */
  loaded: boolean | undefined;
}

/** What validate checks: the tool sources this host runs (Python's with python-checks.ts). */
const VALIDATED_EXTENSIONS: readonly string[] = TOOL_EXTENSIONS;
const isPython = (fileName: string): boolean => fileName.endsWith(".py");

/** Tool sources larger than this are refused by validate and share: no hand-written tool is near it. */
export const MAX_TOOL_SOURCE_BYTES = 1024 * 1024;

/** Exit codes of `validate` (docs/design.md §4): 0 no errors (warnings allowed), 2 no such file, 6 errors found (like a tool that fails to load). */
export const VALIDATE_EXIT_CODES = { ok: 0, missingFile: 2, errors: 6 } as const;

/** Validates one tool file. A missing or unreadable file throws (NotFound / InvalidArguments), everything else is a finding. */
export async function validateToolFile(path: string, options: ValidateOptions = {}): Promise<ValidationReport> {
  const maxBytes = options.maxSourceBytes ?? MAX_TOOL_SOURCE_BYTES;
  const fileName = basename(path);
  const tool = options.name ?? toolNameOf(fileName);
  const source = await readToolSource(path, maxBytes);
  const nameFindings = checkFileName(fileName, options.name);
  let loaded: boolean | undefined;
  let schemas: string[] | undefined;
  let findings: Finding[];
  if (source.tooLarge) {
    findings = [
      ...nameFindings,
      { level: "error" as const, check: "file" as const, message: `the file is ${source.bytes} bytes; tool sources may be at most ${maxBytes} bytes` },
    ];
  } else if (isPython(fileName)) {
    // The TypeScript declaration checks weigh their findings against the load's message; Python's stand
    // as they are, and the load's problems are added to them.
    findings = validateSource(fileName, source.text, { staticSchemas: true, name: options.name });
    if (options.load) {
      try {
        const result = await options.load(path, tool);
        loaded = result.ok;
        schemas = result.schemas;
        for (const problem of result.ok ? [] : result.problems) findings.push(...loadFindings(problem, [fileName, `${tool}.py`]));
      } catch (error) {
        loaded = false;
        findings.push({ level: "error", check: "load", message: `the tool could not be loaded: ${error instanceof Error ? error.message : String(error)}` });
      }
    }
  } else if (!options.load) {
    findings = validateSource(fileName, source.text, { staticSchemas: true, ...(options.name !== undefined ? { name: options.name } : {}) });
  } else {
    const checked = staticChecks(fileName, source.text, { staticSchemas: false, name: options.name });
    findings = checked.findings;
    const { declaration, scan } = checked;
    try {
      const result = await options.load(path, tool);
      loaded = result.ok;
      schemas = result.schemas;
      if (result.ok) {
        // The load accepted the declaration: a reading of the source has nothing to add to that.
        findings.push(...unusedHandlers(tool, scan, result.schemas ?? declaration.schemaNames));
      } else {
        // Whatever stopped the load, the declaration's problems are real; the load's message is kept
        // only for what they do not already say (at their lines).
        findings.push(...declaration.declared, ...unusedHandlers(tool, scan, declaration.schemaNames));
        for (const problem of result.problems) {
          const rest = declaration.explain(problem);
          if (rest !== "") findings.push(...loadFindings(rest ?? problem, [fileName, `${tool}${extensionOf(fileName)}`]));
        }
      }
    } catch (error) {
      loaded = false;
      findings.push(...declaration.declared, ...unusedHandlers(tool, scan, declaration.schemaNames));
      findings.push({ level: "error", check: "load", message: `the tool could not be loaded: ${error instanceof Error ? error.message : String(error)}` });
    }
  }
  // An invalid name could never be installed, so what it would shadow is moot.
  if (options.installed && !nameFindings.some((f) => f.level === "error")) {
    try {
      findings.push(...(await options.installed(tool, schemas)));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      findings.push({
        level: "error",
        check: "shadowing",
        message: `the installed tools could not be listed (${message}); run validate again, or check them with animaworks-tool list`,
      });
    }
  }
  return summarise(path, tool, findings, loaded);
}

/**
 * The static checks on source text. `staticSchemas: false` leaves schema validity and handlers to the
 * real load (the caller runs one).
 */
export function validateSource(fileName: string, source: string, options: { staticSchemas: boolean; name?: string } = { staticSchemas: true }): Finding[] {
  if (isPython(fileName)) return [...checkFileName(fileName, options.name), ...validatePythonSource(fileName, source, options)];
  const { findings, declaration, scan, tool } = staticChecks(fileName, source, options);
  if (options.staticSchemas) findings.push(...declaration.declared, ...unusedHandlers(tool, scan, declaration.schemaNames));
  return findings;
}

/** The checks on the text, with what the declaration checks found kept apart for the caller to weigh against a load. */
function staticChecks(
  fileName: string,
  source: string,
  options: { staticSchemas: boolean; name?: string | undefined },
): { findings: Finding[]; declaration: DeclarationCheck; scan: SourceScan; tool: string } {
  const findings = checkFileName(fileName, options.name);
  const tool = options.name ?? toolNameOf(fileName);
  const scan = scanSource(source);
  if (scan.unterminated) {
    findings.push({ level: "error", check: "source", line: scan.unterminated.line, message: `the file ends inside an unterminated ${scan.unterminated.what}` });
  }
  const declaration = checkDeclaration(tool, scan, options.staticSchemas);
  findings.push(...declaration.checklist);
  for (const use of scan.imports) {
    const problem = importProblem(use);
    if (problem) findings.push({ level: "error", check: "imports", line: use.line, message: problem });
  }
  for (const hit of findSecrets(source, scan.tokens)) findings.push({ level: "error", check: "secrets", line: hit.line, message: hit.message });
  for (const call of findUnawaitedCredentials(scan.tokens)) {
    findings.push({
      level: "warning",
      check: "credentials",
      line: call.line,
      column: call.column,
      message: `${call.name}() returns a Promise: used without await, the value here is the Promise, not the credential (sent on, it reads "[object Promise]"); write await ${call.name}(…)`,
    });
  }
  for (const use of findPromiseUsesOfIsCancelled(scan.tokens)) {
    findings.push({
      level: "warning",
      check: "cancellation",
      line: use.line,
      column: use.column,
      message: `isCancelled() returns a boolean, not a Promise: .${use.method}() on it fails when the job runs; write if (isCancelled()) { … }`,
    });
  }
  for (const call of scan.fetchCalls) {
    if (call.hasTimeout !== false) continue;
    findings.push({
      level: "warning",
      check: "network-timeout",
      line: call.line,
      message: "fetch() without a timeoutMs option: the host's default (30 s) applies; set timeoutMs to what the service needs",
    });
  }
  return { findings, declaration, scan, tool };
}

/**
 * The file's extension, and the tool name: the file's name without its extension, or `name` (the name
 * it is to be installed under; the file is then written as `name` plus its extension).
 */
export function checkFileName(fileName: string, name?: string): Finding[] {
  const error = (message: string): Finding[] => [{ level: "error", check: "file-name", message }];
  const extension = VALIDATED_EXTENSIONS.find((ext) => fileName.endsWith(ext));
  if (fileName.endsWith(".d.ts") || fileName.endsWith(".d.mts")) return error(`"${fileName}" is a type declaration file, not a tool`);
  if (!extension) return error(`"${fileName}" must end in ${VALIDATED_EXTENSIONS.join(", ")}`);
  const stem = name ?? fileName.slice(0, -extension.length);
  const problem = toolNameProblem(stem, extension);
  if (problem !== undefined) {
    return error(
      stem.startsWith("_") && name === undefined ? `"${fileName}" starts with "_": such files are helpers that tools import, never loaded as tools` : problem,
    );
  }
  if (!/^[a-z][a-z0-9_]*$/.test(stem))
    return [
      { level: "warning", check: "file-name", message: `"${stem}" is not snake_case; tool names are conventionally snake_case (e.g. ${snakeCase(stem)})` },
    ];
  return [];
}

/** Why `name` cannot be a tool name (discovery's rules, see registry/discovery.ts), or undefined. */
export function toolNameProblem(name: string, extension = ""): string | undefined {
  if (name.startsWith("_")) return `"${name}" starts with "_": such files are helpers that tools import, never loaded as tools`;
  if (!TOOL_NAME_PATTERN.test(name)) {
    return `"${name}" is not a valid tool name: use up to 64 letters, digits and "_", starting with a letter (snake_case, e.g. my_tool${extension})`;
  }
  if (RESERVED_NAMES.has(name)) return `"${name}" is an animaworks-tool command and cannot be a tool name`;
  return undefined;
}

function summarise(path: string, tool: string, findings: Finding[], loaded: boolean | undefined): ValidationReport {
  const order: CheckName[] = [
    "file",
    "file-name",
    "source",
    "exports",
    "schemas",
    "profile",
    "description",
    "input-schema",
    "handlers",
    "anima-dir",
    "imports",
    "secrets",
    "credentials",
    "cancellation",
    "network-timeout",
    "load",
    "shadowing",
    "collisions",
  ];
  const sorted = findings
    .map((finding, index) => ({ finding, index }))
    .sort(
      (a, b) =>
        order.indexOf(a.finding.check) - order.indexOf(b.finding.check) ||
        (a.finding.line ?? 0) - (b.finding.line ?? 0) ||
        (a.finding.column ?? 0) - (b.finding.column ?? 0) ||
        a.index - b.index,
    )
    .map(({ finding }) => finding);
  const errors = sorted.filter((f) => f.level === "error").length;
  return { path, tool, findings: sorted, errors, warnings: sorted.length - errors, loaded };
}

/**
 * One line per finding (`path:line: level [check] message`, the form editors and grep understand), then
 * a summary line. Exit code 0 without errors (warnings allowed), 6 with errors.
 */
export function formatValidation(report: ValidationReport): { text: string; exitCode: number } {
  const lines = report.findings.map((f) => `${findingLocation(report.path, f)}: ${f.level} [${f.check}] ${f.message}`);
  const count = (n: number, word: string): string => `${n} ${word}${n === 1 ? "" : "s"}`;
  const loadNote = report.loaded === true ? " (loaded in the sandbox)" : "";
  lines.push(
    report.errors === 0 && report.warnings === 0
      ? `${report.path}: OK, no problems found${loadNote}`
      : `${report.path}: ${count(report.errors, "error")}, ${count(report.warnings, "warning")}${loadNote}`,
  );
  return { text: lines.join("\n"), exitCode: report.errors > 0 ? VALIDATE_EXIT_CODES.errors : VALIDATE_EXIT_CODES.ok };
}

/** What `validate` prints and exits with, and the report behind it (for `--json`). */
export interface ValidateOutcome {
  text: string;
  exitCode: number;
  report: ValidationReport;
}

/** validate + format for the CLI: a missing or unreadable file is one line and exit code 2. */
export async function runValidate(path: string, options: ValidateOptions = {}): Promise<ValidateOutcome> {
  try {
    const report = await validateToolFile(path, options);
    return { ...formatValidation(report), report };
  } catch (error) {
    if (error instanceof ToolHostError && (error.type === "NotFound" || error.type === "InvalidArguments")) {
      const findings: Finding[] = [{ level: "error", check: "file", message: error.message }];
      const report = { path, tool: options.name ?? toolNameOf(basename(path)), findings, errors: 1, warnings: 0, loaded: undefined };
      return { text: `${path}: error [file] ${error.message}`, exitCode: VALIDATE_EXIT_CODES.missingFile, report };
    }
    throw error;
  }
}

/**
 * `validate --json`: every finding as data (`line` and `column` where known), the counts, and the text
 * report as `report` (what the command printed before findings were listed here).
 */
export function validationJson(outcome: ValidateOutcome): Record<string, unknown> {
  const { report } = outcome;
  return {
    status: outcome.exitCode === VALIDATE_EXIT_CODES.ok ? "ok" : "error",
    path: report.path,
    tool: report.tool,
    errors: report.errors,
    warnings: report.warnings,
    loaded: report.loaded ?? null,
    findings: report.findings.map((f) => ({
      level: f.level,
      check: f.check,
      ...(f.line !== undefined ? { line: f.line } : {}),
      ...(f.column !== undefined ? { column: f.column } : {}),
      ...(f.file !== undefined ? { file: f.file } : {}),
      message: f.message,
    })),
    report: outcome.text,
  };
}

/**
 * A `validate` function for shareTool: the error findings of validateToolFile as lines that name no
 * host path (they are shown to the Anima). Warnings do not block sharing.
 */
export function errorsForShare(options: ValidateOptions = {}): (sourcePath: string) => Promise<string[]> {
  return async (sourcePath) => {
    const report = await validateToolFile(sourcePath, options);
    return report.findings
      .filter((f) => f.level === "error")
      .map((f) => `[${f.check}]${f.line !== undefined ? ` ${f.file !== undefined ? `${f.file} ` : ""}line ${f.line}:` : ""} ${f.message}`);
  };
}

function extensionOf(fileName: string): string {
  return VALIDATED_EXTENSIONS.find((ext) => fileName.endsWith(ext)) ?? "";
}

function toolNameOf(fileName: string): string {
  const extension = VALIDATED_EXTENSIONS.find((ext) => fileName.endsWith(ext));
  return extension ? fileName.slice(0, -extension.length) : fileName.replace(/\.[^.]*$/, "");
}

function snakeCase(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase();
}
