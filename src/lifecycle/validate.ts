import { basename } from "node:path";
import { ToolHostError } from "../errors.js";
import { type CheckName, type Finding, countFindings, findingLocation } from "./findings.js";
import { counted } from "../terminal-text.js";
import { readToolSource } from "./read-tool-source.js";
import { type SourceChecker, sharedSourceChecker } from "./source-checker.js";
import { type LoadCheck, type LoadOutcome, type SourceCheckRequest, checkFileName, toolNameOf } from "./source-checks.js";

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
export { type LoadCheck, checkFileName, toolNameProblem, validateSource } from "./source-checks.js";

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
  /** Where the checks on the text run. Default: the host process's source checker (source-checker.ts). */
  checker?: SourceChecker;
  /** The Anima asking, if any: the checks are shared between Animas in turn (source-checker.ts). */
  anima?: string;
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
  } else {
    // The load first: the checks weigh their findings against what it said (source-checks.ts).
    let load: LoadOutcome | undefined;
    if (options.load) {
      try {
        // Plain data only: it is sent to the checks' thread.
        const said = await options.load(path, tool);
        load = { ok: said.ok, problems: [...said.problems].map(String), ...(said.schemas !== undefined ? { schemas: [...said.schemas].map(String) } : {}) };
        loaded = load.ok;
        schemas = load.schemas;
      } catch (error) {
        // The host too busy to load it says nothing about the file: the caller tries again.
        if (error instanceof ToolHostError && error.type === "Busy") throw error;
        loaded = false;
        load = { threw: error instanceof Error ? error.message : String(error) };
      }
    }
    const request: SourceCheckRequest = {
      fileName,
      text: source.text,
      ...(options.name !== undefined ? { name: options.name } : {}),
      ...(load ? { load } : {}),
    };
    findings = await (options.checker ?? sharedSourceChecker()).check(request, options.anima);
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
  return { path, tool, findings: sorted, ...countFindings(sorted), loaded };
}

/**
 * One line per finding (`path:line: level [check] message`, the form editors and grep understand), then
 * a summary line. Exit code 0 without errors (warnings allowed), 6 with errors.
 */
export function formatValidation(report: ValidationReport): { text: string; exitCode: number } {
  const lines = report.findings.map((f) => `${findingLocation(report.path, f)}: ${f.level} [${f.check}] ${f.message}`);
  const loadNote = report.loaded === true ? " (loaded in the sandbox)" : "";
  lines.push(
    report.errors === 0 && report.warnings === 0
      ? `${report.path}: OK, no problems found${loadNote}`
      : `${report.path}: ${counted(report.errors, "error")}, ${counted(report.warnings, "warning")}${loadNote}`,
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
      ...(f.omitted !== undefined ? { omitted: f.omitted } : {}),
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
