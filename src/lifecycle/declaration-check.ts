import { type SchemaIssue, checkToolSchemas, schemaIssues } from "../registry/schemas.js";
import type { Token } from "./lexer.js";
import { type LiteralLocations, locate } from "./literal.js";
import { SCHEMA_FUNCTIONS, type SourceScan } from "./source-scan.js";
import type { Finding } from "./findings.js";

/**
 * What a tool declares (its schema list, EXECUTION_PROFILE and handlers), checked from the source when
 * the list is written as a literal, with each problem at the line (and column) of the part it is about.
 *
 * The real load is the authority on whether the declaration loads, but it stops early (at a schema's
 * first broken rule, and before the handlers when any schema is broken) and names no lines. So the
 * validator reports these findings instead of the load's message whenever that message is exactly what
 * the load says about this same literal (`explain`), and drops them when the load succeeds.
 */
export interface DeclarationCheck {
  /** Schema, profile and handler problems: what the real load also judges. */
  declared: Finding[];
  /** The checklist's own rules about the declaration, which no load judges (exports, descriptions…). */
  checklist: Finding[];
  /** The schema names of a literal list (undefined when the list is computed). */
  schemaNames: string[] | undefined;
  /**
   * What is left of a load problem once the declared findings are said: "" when they say all of it,
   * the rest (as a load problem) when they say its beginning, undefined when the load found something
   * else (the literal read here is then not what the module returned, or the failure is elsewhere).
   */
  explain(problem: string): string | undefined;
}

/** Exports that are part of the tool contract, never action handlers. */
const CONTRACT_EXPORTS = new Set([...SCHEMA_FUNCTIONS, "dispatch", "cli_main", "cliMain", "EXECUTION_PROFILE", "default"]);

/** `staticSchemas: false`: a real load follows, so a computed list needs no "checked only when loaded" warning. */
export function checkDeclaration(tool: string, scan: SourceScan, staticSchemas: boolean): DeclarationCheck {
  const checklist: Finding[] = [];
  const nothingDeclared: DeclarationCheck = { declared: [], checklist, schemaNames: undefined, explain: () => undefined };
  const exported = (name: string): boolean => scan.exports.has(name);
  if (![...SCHEMA_FUNCTIONS].some(exported)) {
    if (scan.exportsUnknown) {
      checklist.push({
        level: "warning",
        check: "exports",
        message: "the module's exports are built at run time; the required get_tool_schemas() export could not be confirmed",
      });
    } else {
      checklist.push({
        level: "error",
        check: "exports",
        line: scan.schemas?.line,
        message: "get_tool_schemas() (or getToolSchemas) is not exported; every tool must export it",
      });
    }
  }
  if (scan.schemas?.kind === "dynamic" && staticSchemas) {
    checklist.push({
      level: "warning",
      check: "schemas",
      line: scan.schemas.line,
      message: "get_tool_schemas() builds its list at run time; its schemas and handlers are checked only when the tool is loaded",
    });
  }
  if (scan.schemas?.kind !== "literal") return nothingDeclared;
  const { value: schemas, locations } = scan.schemas;
  const at = (path: Array<string | number>, where: LiteralLocations = locations): Pick<Finding, "line" | "column"> => position(locate(where, path));

  for (const [index, entry] of schemas.entries()) {
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) continue;
    const record = entry as Record<string, unknown>;
    const label = typeof record["name"] === "string" ? `schema "${record["name"]}"` : `schema #${index + 1}`;
    const description = record["description"];
    // A description of another type is the load's to refuse (a `schemas` finding); here: none written.
    if (description === undefined || description === null || (typeof description === "string" && description.trim() === "")) {
      checklist.push({
        level: "error",
        check: "description",
        ...at([index, "description"]),
        message: `${label} has no description; the model chooses tools by it (one or two sentences)`,
      });
    }
    if (record["input_schema"] === undefined && record["parameters"] === undefined) {
      checklist.push({
        level: "warning",
        check: "input-schema",
        ...at([index]),
        message: `${label} has no input_schema (or parameters); it is treated as taking no arguments — say so with { type: "object", properties: {} }`,
      });
    }
  }

  const profile = scan.profile?.kind === "literal" ? scan.profile : undefined;
  const declared: Finding[] = schemaIssues(tool, schemas, profile?.value).map((issue: SchemaIssue) => ({
    level: "error",
    check: issue.in === "profile" ? "profile" : "schemas",
    ...(issue.in === "profile" ? (profile ? at(issue.path, profile.locations) : {}) : at(issue.path)),
    message: issue.message,
  }));
  const handlerless =
    scan.exportsUnknown || exported("dispatch")
      ? []
      : schemas.flatMap((entry, index) => {
          const name = typeof entry === "object" && entry !== null ? (entry as Record<string, unknown>)["name"] : undefined;
          return typeof name === "string" && !exported(name) ? [{ name, index }] : [];
        });
  for (const { name, index } of handlerless) {
    declared.push({
      level: "error",
      check: "handlers",
      ...at([index, "name"]),
      message: `no handler for schema "${name}": export dispatch(name, args), or a function named ${name}`,
    });
  }
  const schemaNames = schemas.flatMap((entry) => {
    const name = typeof entry === "object" && entry !== null ? (entry as Record<string, unknown>)["name"] : undefined;
    return typeof name === "string" ? [name] : [];
  });

  // What the load reports about this literal: its schema problems (checkToolSchemas, which it runs),
  // else the schemas it finds no handler for.
  const predicted = checkToolSchemas(tool, schemas, profile?.value);
  let expected: string | undefined;
  if (!predicted.ok) expected = `${tool}: ${predicted.problems.join("; ")}`;
  else if (!scan.exportsUnknown && !exported("dispatch")) {
    const missing = predicted.schemas.filter((schema) => !exported(schema.name)).map((schema) => schema.name);
    if (missing.length > 0) expected = `${tool}: no handler for ${missing.join(", ")}`;
  }
  const explain = (problem: string): string | undefined => {
    if (expected === undefined) return undefined;
    // The load adds its hint in parentheses; the handler findings carry the same advice.
    if (problem === expected || problem.startsWith(`${expected} (`)) return "";
    // A profile built at run time: its problems follow the schemas' and are the load's alone to say.
    if (problem.startsWith(`${expected}; `)) return `${tool}: ${problem.slice(expected.length + 2)}`;
    return undefined;
  };
  return { declared, checklist, schemaNames, explain };
}

/**
 * Exported functions named like an action of this tool that no schema declares: a handler whose schema
 * was forgotten or misspelt. The host never calls them, so the action the author meant does not exist.
 */
export function unusedHandlers(tool: string, scan: SourceScan, schemaNames: string[] | undefined): Finding[] {
  if (schemaNames === undefined) return [];
  const declared = new Set(schemaNames);
  const findings: Finding[] = [];
  for (const [name, token] of scan.exportTokens) {
    if (CONTRACT_EXPORTS.has(name) || declared.has(name) || !name.startsWith(`${tool}_`)) continue;
    findings.push({
      level: "warning",
      check: "handlers",
      ...position(token),
      message: `${name} is exported like a handler, but no schema declares "${name}": the host never calls it; declare it in get_tool_schemas() (or stop exporting it)`,
    });
  }
  return findings;
}

function position(token: Token | undefined): Pick<Finding, "line" | "column"> {
  return token ? { line: token.line, column: token.column } : {};
}
