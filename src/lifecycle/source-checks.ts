import { RESERVED_NAMES, TOOL_EXTENSIONS, TOOL_NAME_PATTERN } from "../registry/discovery.js";
import { findUnawaitedCredentials } from "./credential-await.js";
import { findPromiseUsesOfIsCancelled } from "./cancel-check.js";
import { type DeclarationCheck, checkDeclaration, unusedHandlers } from "./declaration-check.js";
import { type Finding, standIns } from "./findings.js";
import { loadFindings } from "./load-findings.js";
import { validatePythonSource } from "./python-checks.js";
import { findSecrets } from "./secrets.js";
import { importProblem } from "./import-check.js";
import { type SourceScan, scanSource } from "./source-scan.js";

/**
 * The checks `validate` runs on a tool's text (validate.ts reads the file, runs the real load, and sets the
 * name against what is installed). A pure function of plain data in and out: a long-running host runs it
 * on a thread of its own (source-checker.ts), because a crafted 1 MiB draft costs it up to half a second
 * of CPU, which on the host's main thread would stall every Anima's calls.
 */

/** What a real load says: `ok`, or the problems that made it fail (each one line). */
export interface LoadCheck {
  ok: boolean;
  problems: string[];
  /** The schema names the tool declared, when it loaded. */
  schemas?: string[];
}

/** A real load's outcome as the checks weigh it: what it said, or the message of what it threw. */
export type LoadOutcome = LoadCheck | { threw: string };

export interface SourceCheckRequest {
  /** The file's name (its extension picks the checks; its stem is the tool name unless `name` is given). */
  fileName: string;
  /** The source text, already bounded by the caller. */
  text: string;
  /** The tool name the file is checked as, when not its own. */
  name?: string;
  /** The real load's outcome, when one ran: the checks weigh their findings against it. */
  load?: LoadOutcome;
}

/** What tool sources this host runs (Python's are checked with python-checks.ts). */
const VALIDATED_EXTENSIONS: readonly string[] = TOOL_EXTENSIONS;
const isPython = (fileName: string): boolean => fileName.endsWith(".py");

/**
 * Every finding about the text, weighed against the real load where one ran. The real load is the
 * authority on schemas and handlers but stops at the first problems and names no lines; the same checks
 * read from a literal schema list find them all, at their lines. So when the load fails with exactly what
 * those checks found, their findings stand in for its message; when it succeeds, they are dropped (see
 * declaration-check.ts). Python's findings stand as they are, the load's problems added to them.
 */
export function checkSource(request: SourceCheckRequest): Finding[] {
  return boundedPerCheck(uncappedFindings(request)).map(boundedMessage);
}

/**
 * Characters of one finding's message, at most. A message quotes what it is about (a schema's name, a
 * load error), and a draft's text chooses those: 101 schemas named by one 1 MB string made each validate
 * hand the host 160 million characters of findings to receive and format (red team: finding_message_flood).
 */
export const MAX_FINDING_MESSAGE_CHARS = 1_000;

function boundedMessage(finding: Finding): Finding {
  const { message } = finding;
  if (message.length <= MAX_FINDING_MESSAGE_CHARS) return finding;
  return { ...finding, message: `${message.slice(0, MAX_FINDING_MESSAGE_CHARS)}…[${message.length - MAX_FINDING_MESSAGE_CHARS} more characters]` };
}

/**
 * Findings listed per check, at most: a crafted 1 MiB draft made 100,000 (`fetch(u);` per line), which
 * the host then received, sorted and formatted on its event loop (≈ 0.3 s a validate). The first ones by
 * line are kept, and one more finding at the first line left out counts the rest.
 */
export const MAX_FINDINGS_PER_CHECK = 100;

function boundedPerCheck(findings: Finding[]): Finding[] {
  const byCheck = new Map<string, Finding[]>();
  for (const finding of findings) {
    const list = byCheck.get(finding.check);
    if (list) list.push(finding);
    else byCheck.set(finding.check, [finding]);
  }
  const bounded: Finding[] = [];
  for (const list of byCheck.values()) {
    if (list.length <= MAX_FINDINGS_PER_CHECK) {
      bounded.push(...list);
      continue;
    }
    const ordered = list
      .map((finding, index) => ({ finding, index }))
      .sort((a, b) => (a.finding.line ?? 0) - (b.finding.line ?? 0) || (a.finding.column ?? 0) - (b.finding.column ?? 0) || a.index - b.index)
      .map(({ finding }) => finding);
    bounded.push(...ordered.slice(0, MAX_FINDINGS_PER_CHECK));
    // One finding per level left out, where the first of them is (so after every finding listed).
    bounded.push(
      ...standIns(
        ordered.slice(MAX_FINDINGS_PER_CHECK),
        (level, count, first) =>
          `… and ${count} more ${level}s of [${first.check}] from here on, like those above (the first ${MAX_FINDINGS_PER_CHECK} findings of a check are listed)`,
      ),
    );
  }
  return bounded;
}

/**
 * What the load alone says, for when the checks on the text could not run (source-checker.ts): its
 * problems as load findings, unweighed, or the message of what it threw.
 */
export function loadOnlyFindings(request: SourceCheckRequest): Finding[] {
  return loadProblems(request).map(boundedMessage);
}

function loadProblems(request: SourceCheckRequest): Finding[] {
  const { fileName, name, load } = request;
  if (load === undefined || ("ok" in load && load.ok)) return [];
  if ("threw" in load) return [threwFinding(load.threw)];
  return load.problems.flatMap((problem) => loadFindings(problem, shownNames(fileName, name ?? toolNameOf(fileName))));
}

/** The names a load problem may give the file by (loadFindings): its own, and the tool's as the load builds it. */
const shownNames = (fileName: string, tool: string): string[] => [fileName, `${tool}${extensionOf(fileName)}`];

const threwFinding = (message: string): Finding => ({ level: "error", check: "load", message: `the tool could not be loaded: ${message}` });

function uncappedFindings(request: SourceCheckRequest): Finding[] {
  const { fileName, text, name, load } = request;
  const tool = name ?? toolNameOf(fileName);
  // Python's findings stand as they are, the load's added to them.
  if (isPython(fileName)) return [...validateSource(fileName, text, { staticSchemas: true, name }), ...loadProblems(request)];
  if (load === undefined) return validateSource(fileName, text, { staticSchemas: true, ...(name !== undefined ? { name } : {}) });
  const { findings, declaration, scan } = staticChecks(fileName, text, { staticSchemas: false, name });
  if ("threw" in load) {
    findings.push(...declaration.declared, ...unusedHandlers(tool, scan, declaration.schemaNames), threwFinding(load.threw));
  } else if (load.ok) {
    // The load accepted the declaration: a reading of the source has nothing to add to that.
    findings.push(...unusedHandlers(tool, scan, load.schemas ?? declaration.schemaNames));
  } else {
    // Whatever stopped the load, the declaration's problems are real; the load's message is kept only for
    // what they do not already say (at their lines).
    findings.push(...declaration.declared, ...unusedHandlers(tool, scan, declaration.schemaNames));
    for (const problem of load.problems) {
      const rest = declaration.explain(problem);
      if (rest !== "") findings.push(...loadFindings(rest ?? problem, shownNames(fileName, tool)));
    }
  }
  return findings;
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

export function extensionOf(fileName: string): string {
  return VALIDATED_EXTENSIONS.find((ext) => fileName.endsWith(ext)) ?? "";
}

export function toolNameOf(fileName: string): string {
  const extension = VALIDATED_EXTENSIONS.find((ext) => fileName.endsWith(ext));
  return extension ? fileName.slice(0, -extension.length) : fileName.replace(/\.[^.]*$/, "");
}

function snakeCase(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase();
}
