import { dirname, join } from "node:path";

/** What `validate` reports (validate.ts): one finding per problem, with its check and, where the source shows one, its line. */
export type FindingLevel = "error" | "warning";
export type CheckName =
  | "file"
  | "file-name"
  | "source"
  | "exports"
  | "schemas"
  | "profile"
  | "description"
  | "input-schema"
  | "handlers"
  | "anima-dir"
  | "secrets"
  | "credentials"
  | "cancellation"
  | "imports"
  | "network-timeout"
  | "load"
  | "shadowing"
  | "collisions";

export interface Finding {
  level: FindingLevel;
  check: CheckName;
  message: string;
  /** 1-based source line, when the finding has one (left out rather than guessed). */
  line?: number;
  /** 1-based column on that line, when known. */
  column?: number;
  /**
   * The file the finding is about when it is not the validated one (a helper it imports, whose build
   * failed), relative to the validated file's folder; `line` and `column` are then in that file.
   */
  file?: string;
  /**
   * Set on the finding that stands for findings of its check and level left out of the list (at most
   * 100 of one check are listed): how many it stands for. It counts as that many in the totals.
   */
  omitted?: number;
}

/**
 * One finding per level standing for `left` (findings left out of a list, in their order): at the first
 * of them, counting them all (`omitted`, summed where some stand for others already). `message` says so.
 */
export function standIns(left: readonly Finding[], message: (level: FindingLevel, count: number, first: Finding) => string): Finding[] {
  const standing: Finding[] = [];
  for (const level of ["error", "warning"] as const) {
    const ofLevel = left.filter((finding) => finding.level === level);
    const first = ofLevel[0];
    if (first === undefined) continue;
    const { errors, warnings } = countFindings(ofLevel);
    const omitted = errors + warnings;
    standing.push({
      level,
      check: first.check,
      ...(first.line !== undefined ? { line: first.line } : {}),
      ...(first.column !== undefined ? { column: first.column } : {}),
      message: message(level, omitted, first),
      omitted,
    });
  }
  return standing;
}

/** Errors and warnings, each finding counted as what it stands for (`omitted`, else one). */
export function countFindings(findings: readonly Finding[]): { errors: number; warnings: number } {
  let errors = 0;
  let warnings = 0;
  for (const finding of findings) {
    const count = finding.omitted ?? 1;
    if (finding.level === "error") errors += count;
    else warnings += count;
  }
  return { errors, warnings };
}

/**
 * Where a finding is, as editors and CI match it: `path`, `path:line` or `path:line:column` (`path`: the
 * validated file's, or the helper's the finding names, beside it).
 */
export function findingLocation(path: string, finding: Finding): string {
  const file = finding.file === undefined ? path : join(dirname(path), finding.file);
  if (finding.line === undefined) return file;
  return `${file}:${finding.line}${finding.column !== undefined ? `:${finding.column}` : ""}`;
}
