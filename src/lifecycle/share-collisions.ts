import type { ToolOrigin } from "../registry/discovery.js";

/** What `shareCollisions` needs of an installed tool (a `ToolInfo` of the host's listing). */
export interface InstalledTool {
  name: string;
  origin: ToolOrigin;
  status: "ok" | "error";
  schemas: readonly { name: string }[];
}

/**
 * Why a personal tool `tool` declaring `schemas` must not be shared, given the core and shared tools
 * installed (empty: it may). A schema name belongs to the longest visible tool name that prefixes it
 * (docs/animaworks-reference.md §3.3), and a shared tool would be seen by every Anima, so it may neither
 *  - take a schema name of a core or shared tool: `tool` followed by `_` starts one of its schema names
 *    (registry/precedence.ts makes it give way to a core tool in every view, and against a shared tool
 *    of its own precedence the shorter tool would stop loading for everyone), nor
 *  - have one of its own schema names taken by the longer name of a core or shared tool.
 * Personal tools of other Animas are not set against it: there the shared tool is the one of lower
 * precedence, and it gives way in that Anima's view only.
 */
export function shareCollisions(tool: string, schemas: readonly string[], installed: readonly InstalledTool[]): string[] {
  const problems: string[] = [];
  const quoted = (names: string[]): string => names.map((name) => `"${name}"`).join(", ");
  for (const other of installed) {
    if (other.origin === "personal" || other.name === tool) continue;
    const taken = other.schemas.map((schema) => schema.name).filter((name) => name.startsWith(`${tool}_`));
    if (taken.length > 0) {
      problems.push(
        `the ${other.origin} tool "${other.name}" declares ${quoted(taken)}, which a tool named "${tool}" would take over; rename "${tool}" to a name that does not start any schema name of "${other.name}"`,
      );
    }
    if (!other.name.startsWith(`${tool}_`)) continue;
    const captured = schemas.filter((name) => name.startsWith(`${other.name}_`));
    if (captured.length > 0) {
      problems.push(
        `${quoted(captured)} would belong to the ${other.origin} tool "${other.name}" (the longest tool name that prefixes a schema name owns it); rename ${captured.length === 1 ? "that schema" : "those schemas"} of "${tool}", or the tool`,
      );
    }
  }
  return problems;
}
